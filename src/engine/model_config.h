// ModelConfig: what a model folder in the model repository declares about itself, read from
// its model.yaml. A folder holding only model.onnx is a plain tensor model named after the
// folder, so any ONNX file dropped into the repository can be served over KServe v2; a folder
// holding only one *.gguf file is a generative model with the default generation options.
//
//   name: all-MiniLM-L6-v2        # how clients address it (defaults to the folder name)
//   kind: text-embedding          # text-embedding | tensor | generative
//   file: model.onnx              # relative to the folder (generative: the .gguf file; the
//                                 #   folder's only *.gguf when omitted)
//   tokenizer: tokenizer.json     # text models: a Hugging Face tokenizer.json (WordPiece)
//   max_sequence_length: 256      # tokens, [CLS]/[SEP] included
//   output: sentence_embedding    # the output tensor that holds the embedding
//   pooling: none                 # none (graph pools) | mean | cls (for per-token outputs)
//   normalize: true               # L2-normalise unless the request says otherwise
//   dimensions: 384
//   max_batch_size: 64            # the largest batch this model is run with
//   variants:                     # optional precision variants of the same model; the
//     - name: fp32                #   first is the default unless default_variant names
//       file: model.onnx          #   another. `precision` (fp32 | fp16 | int8) is the
//       precision: fp32           #   alias requests may use; the first variant of a
//     - name: int8-static         #   precision is the one the alias picks, so list the
//       file: model.int8-static.onnx  # best first.
//       precision: int8
//       batch_invariant: true     #   a row's vector does not depend on its batch-mates
//       fidelity_min_cosine: 0.995    # measured against fp32 at quantize
//       fidelity_recall_at_10: 0.99   # time (tools/quantize_model.py) on a fixed check set
//   default_variant: fp32
//
// The last three keys say whether a variant is interchangeable with the default one for the
// model's users (the same vector space, to a measured tolerance): the precision controller
// only ever switches to a variant that is (src/core/variant_eligibility.h). A variant that
// omits them is of unknown fidelity and is served only when a request pins it.
//
// A generative model (a GGUF file run by llama.cpp) takes these keys instead of the embedding
// ones (GenerativeConfig says what each bounds):
//
//   kind: generative
//   file: SmolLM2-135M-Instruct.Q4_1.gguf
//   context_tokens: 8192          # KV-cache cells of all running sequences together
//   max_sequences: 8              # requests generating at once
//   kv_cache: per_sequence        # or shared (KvCacheLayout: a stream per sequence, or a pool)
//   batch_tokens: 512             # most tokens in one decode step
//   prefill_chunk_tokens: 256     # most prompt tokens of one request in one step
//   max_step_millis_while_generating: 0   # a fixed step time bound beside the SLO's; 0 = none
//   min_prefill_tokens_per_step: 16       # ... but at least this many per step
//   target_time_to_first_token_millis: 400  # ... or more, for a prompt that can still make it
//   inter_token_slo_millis: 86    # steps' prompt tokens cut to keep steps plus the measured
//                                 # overrun margin within it; or whole prompts, while gaps over
//   slow_gaps_per_mille: 5        #   this stay within this share (a P99's slack, spent)
//   max_waiting_requests: 64      # requests waiting to start before 429s
//   max_queue_delay_millis: 10000 # longest wait for KV space before a 429
//   decode_threads: 1             # llama.cpp compute threads (see GenerativeModelOptions)
//   batch_threads: 1
//   thread_poll_level: 0          # compute threads spin 0 .. 100 before they sleep
//   variants:                     # optional: other GGUF files of the same weights; the
//     - name: q4_1                #   first is the default unless default_variant names
//       file: SmolLM2-135M-Instruct.Q4_1.gguf  # another. `precision` is the GGUF weight
//       precision: q4_1           #   type (the alias a request may pin); `perplexity` is
//       perplexity: 18.346        #   `tailcut perplexity` on a fixed text (unset: never
//     - name: q8_0                #   measured, served only when pinned)
//       file: SmolLM2-135M-Instruct.Q8_0.gguf
//       precision: q8_0
//       perplexity: 18.354
//   default_variant: q4_1
//   precision:                    # the controller that picks the variant of requests that
//     mode: prefill               #   pin none (GenerativePrecisionConfig; "off" keeps the
//     prefill_variant: q8_0       #   default variant)
//
// A tensor model whose input is an image may also take encoded images (JPEG or PNG) as a
// BYTES tensor of one image per row, turned into its input as it was trained (ImageConfig),
// and may name a label file for KServe's classification extension:
//
//   kind: tensor
//   file: model.onnx
//   image:                        # ImageConfig; every key optional
//     input: input                # the input that takes images (default: the only one)
//     resize_shorter_side_pixels: 256
//     crop_width_pixels: 224
//     crop_height_pixels: 224
//     mean: [0.485, 0.456, 0.406] # per RGB channel, on pixels scaled to 0..1
//     std: [0.229, 0.224, 0.225]
//     layout: nchw                # or nhwc
//     filter: bicubic             # or bilinear (the resize's interpolation)
//     max_pixels: 40000000        # an image's declared width x height, refused above
//   labels: labels.txt            # one class name a line, in class-index order
//
// Without `variants` a generative model has one variant, its file, named after it. The
// packaged model (scripts/setup.sh) lists its shipped Q4_1 and a Q8_0 that set-up makes from
// it once, after the build, with `tailcut quantize-gguf` (see setup.sh); a variant whose file
// is missing fails to load and is reported, the others still serve.
//
// Thread-safety: plain value types.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/generative_model.h"  // KvCacheLayout

namespace tailcut {

// kReranker: a text model over pairs of texts (a cross-encoder): each input is (text, text)
// through the tokenizer's pair template, with token type ids, and its output is one score
// (a logit) per pair. It is served like a text-embedding model (the same batching, variants
// and cache), answering /rerank rather than /embed.
enum class ModelKind { kTextEmbedding, kTensor, kGenerative, kReranker };

// Text in, vectors out through a tokenizer: text-embedding models and rerankers.
inline bool IsTextModel(ModelKind kind) {
  return kind == ModelKind::kTextEmbedding || kind == ModelKind::kReranker;
}

// One precision variant of a model: another ONNX file computing the same function.
struct VariantConfig {
  std::string name;       // e.g. "fp32", "int8-static"
  std::string precision;  // "fp32", "fp16" or "int8": the alias a request may use
  std::string file_path;  // Absolute.
  // True when each output row depends only on its own input row (no per-batch statistics),
  // so batching never changes a text's vector. Unknown counts as false.
  bool batch_invariant = false;
  // Generative variants: perplexity on a fixed text (`tailcut perplexity`); unset = never
  // measured. The precision controller only moves to a variant within its policy's bound of
  // the default variant's (core/variant_eligibility.h).
  std::optional<double> perplexity;
  // Measured fidelity to the reference variant the quantization tool compared against (the
  // FP32 export, which it lists with 1.0): cosine in [-1, 1], recall in [0, 1]; unset = never
  // measured.
  std::optional<double> fidelity_min_cosine;
  std::optional<double> fidelity_recall_at_10;
  // Classifiers (tools/quantize_image_model.py): the share of a fixed set of check images
  // whose top-1 class equals the reference variant's, and the share of labelled images whose
  // label is the variant's top-1; unset = never measured. A variant with a measured
  // top1_agreement is held to the top-1 floor instead of the vector one.
  std::optional<double> top1_agreement;
  std::optional<double> top1_accuracy;
};
enum class Pooling { kNone, kMean, kCls };

// model.yaml's `precision` mapping of a generative model with variants: how the precision
// controller (core/generation_precision.h) moves requests that pin no variant between the
// default variant and the one that prefills faster. Plain integers so that each is a key.
struct GenerativePrecisionConfig {
  // "prefill" (default): serve prefill_variant while prompt tokens are most of the tokens the
  // model runs; "off": always the default variant (pins still work).
  std::string mode = "prefill";
  // The variant to move to; empty = the first loaded variant other than the default one
  // whose measured perplexity is within max_perplexity_increase_ppm of the default's.
  std::string prefill_variant;
  // Hysteresis on the prefill share (prompt tokens / all tokens decoded, over the window).
  int64_t degrade_at_prefill_percent = 75;
  int64_t restore_below_prefill_percent = 60;
  // Fewer tokens than this in the window is no evidence: no move away from the default on it
  // (and a window with no tokens at all means idle: back to the default).
  int64_t min_window_tokens = 256;
  int64_t window_seconds = 10;
  int64_t interval_millis = 1000;
  int64_t min_dwell_millis = 10'000;
  // The quality bound: perplexity at most this much (parts per million) above the default
  // variant's. 10000 = 1 %; Q8_0 made from the shipped Q4_1 measured +0.05 %.
  int64_t max_perplexity_increase_ppm = 10'000;
};

// The generation options of a kind: generative model, as model.yaml states them; the
// generative servable turns them into GenerativeModelOptions and GenerationSchedulerOptions,
// whose comments say how to tune each.
struct GenerativeConfig {
  int context_tokens = 4096;  // KV-cache cells (tokens) of all sequences together.
  int max_sequences = 8;      // Sequences generating at once.
  KvCacheLayout kv_cache_layout = KvCacheLayout::kPerSequence;
  int batch_tokens = 512;     // Most tokens (decode + prefill) in one step.
  int prefill_chunk_tokens = 256;  // Most prompt tokens of one request per step.
  // A fixed step time bound while streams generate, beside inter_token_slo_millis less the
  // measured overrun margin (GenerationSchedulerOptions); 0 = none of its own.
  int max_step_millis_while_generating = 0;
  int min_prefill_tokens_per_step = 16;       // Prompt tokens a step takes at least.
  int target_time_to_first_token_millis = 400;  // Prefill pace for new prompts; 0 off.
  int inter_token_slo_millis = 86;  // Gaps over it are slow; the budget below spends them.
  int slow_gaps_per_mille = 5;      // Slow gaps whole-prompt steps may cause; 0 off.
  int max_waiting_requests = 64;   // Waiting for admission before ResourceExhausted.
  int max_queue_delay_millis = 10'000;  // Longest wait for admission; 0 = no limit.
  int decode_threads = 1;
  int batch_threads = 1;
  int thread_poll_level = 0;  // 0 .. 100: GenerativeModelOptions::thread_poll_level.
  GenerativePrecisionConfig precision;
};

// How a tensor model's image input takes encoded images (model.yaml `image`): each image is
// decoded, resized so that its shorter side has resize_shorter_side_pixels (aspect kept),
// centre-cropped to crop_width x crop_height, scaled to 0..1 and normalised per channel,
// (x - mean) / std, into one row of the input in `layout`. The defaults are torchvision's
// ImageNet ones; a model trained otherwise must say so (EfficientNet-Lite: mean and std 0.5).
struct ImageConfig {
  std::string input;                     // Empty: the model's only input.
  int resize_shorter_side_pixels = 256;  // 0: no resize (the crop must fit the image).
  int crop_width_pixels = 224;
  int crop_height_pixels = 224;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  std::string layout = "nchw";     // nchw | nhwc: the input's axes after the batch one.
  std::string filter = "bicubic";  // bicubic | bilinear, each as Pillow resizes (antialiased).
  // Bounds the memory one image may take: width x height as its header declares it, checked
  // before any pixel is decoded (40 M pixels = 120 MB of RGB).
  int64_t max_pixels = 40'000'000;
};

struct ModelConfig {
  std::string name;
  std::string dir;  // Absolute folder of the model.
  ModelKind kind = ModelKind::kTensor;
  std::string file_path;       // Absolute path of the ONNX (generative: GGUF) file.
  std::string tokenizer_path;  // Absolute path; text models only.
  int max_sequence_length = 256;
  std::string output;  // Empty = the model's first output.
  Pooling pooling = Pooling::kNone;
  bool normalize = true;
  int dimensions = 0;  // 0 = read from the model.
  int max_batch_size = 0;  // 0 = the server's batching.max_batch_size.
  // At least one; without a `variants` list, one "fp32" variant of file_path.
  std::vector<VariantConfig> variants;
  std::string default_variant;  // A variant name; empty = the first.
  GenerativeConfig generation;  // kind: generative only.
  std::optional<ImageConfig> image;  // kind: tensor only; set when model.yaml has `image`.
  std::string labels_path;           // Absolute; empty = no labels (classification gives indexes).
};

// Reads <dir>/model.yaml (or infers a tensor model from <dir>/model.onnx, or a generative one
// from the folder's only *.gguf). Errors name the file and the offending key.
Result<ModelConfig> LoadModelConfig(const std::string& dir);

std::string_view ModelKindName(ModelKind kind);

}  // namespace tailcut
