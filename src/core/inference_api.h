// InferenceApi: the narrow core API that every protocol front-end (OpenAI, TEI, KServe v2)
// calls. Front-ends only translate JSON to these requests and results back to JSON; model
// lookup, lazy loading, tokenisation, caching, batching, deadlines and precision choice all
// happen behind this interface.
//
// Calls return at once; the callback runs exactly once, on whichever thread finishes the
// work (a batch worker, a model loader, or the caller's own thread for immediate answers).
//
// Thread-safety: all methods are safe to call concurrently from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/cancellation.h"
#include "common/status.h"
#include "core/generation.h"
#include "core/stage_timings.h"
#include "engine/tensor.h"

namespace tailcut {

struct EmbedRequest {
  std::string model;                // A model name or alias; "default" = the default model.
  std::vector<std::string> inputs;  // UTF-8 texts.
  // A reranker's inputs are pairs: inputs[i] with second_inputs[i] (as many), each scored as
  // one sequence through the tokenizer's pair template. Empty for a text-embedding model.
  std::vector<std::string> second_inputs;
  std::optional<bool> normalize;    // Unset = the model's configuration.
  bool truncate = true;             // False: an over-long input is an error, not cut.
  std::string precision;            // A variant pin ("fp32", "int8", ...); empty = server's choice.
  bool cache_read = true;           // False for Cache-Control: no-cache.
  bool cache_write = true;          // False for Cache-Control: no-store.
  int64_t received_micros = 0;      // When the request arrived (SystemClock).
  int64_t deadline_micros = 0;      // Absolute (SystemClock); 0 = the server default.
  CancellationFlag cancellation;    // Set when the client goes away: queued rows are dropped.
  StageTimings timings;             // Stages already spent (parse) before the call.
};

struct EmbedResult {
  std::string model;    // Canonical model name.
  std::string variant;  // The precision variant that computed (or would compute) its rows.
  // While the precision controller serves a fast variant, inputs already cached under the
  // accurate (reference) variant's key are answered with those rows: an interchangeable
  // vector, and a hit that load does not take away. This names that variant and counts them.
  std::string reference_variant;
  int64_t reference_rows = 0;
  int dimensions = 0;
  std::vector<float> embeddings;  // inputs.size() x dimensions, row-major.
  std::vector<int32_t> token_counts;
  int64_t cache_hits = 0;
  StageTimings timings;
};
// Which variants' vectors a result holds, for X-Tailcut-Variant: one name, or
// "<reference>,<variant>" when rows of both are in it.
std::string ServedVariants(const EmbedResult& result);
using EmbedCallback = std::function<void(Result<EmbedResult>)>;

// KServe's classification extension on one output (Triton's "classification" output
// parameter): the output comes back as BYTES [rows, top_k] instead of its scores, each
// element "score:index" or "score:index:label" (the model's labels file), the top_k highest
// scores of its row, highest first.
struct OutputClassification {
  std::string output;
  int32_t top_k = 0;
};

struct TensorRequest {
  std::string model;
  // An image model's image input may come as BYTES, one encoded image (JPEG or PNG) a row
  // (ModelConfig::image); the servable decodes it into the model's input before queueing.
  std::vector<Tensor> inputs;
  std::vector<std::string> outputs;  // Empty = all.
  std::vector<OutputClassification> classifications;  // Outputs to answer as classes.
  // A precision variant to pin (name or alias such as "int8"); empty = the active one.
  std::string precision;
  int64_t received_micros = 0;
  int64_t deadline_micros = 0;
  CancellationFlag cancellation;  // Set when the client goes away: a queued request is dropped.
  StageTimings timings;
};

struct TensorResult {
  std::string model;
  std::string version;
  std::string variant;  // The precision variant that computed it.
  std::vector<Tensor> outputs;
  StageTimings timings;
};
using TensorCallback = std::function<void(Result<TensorResult>)>;

enum class ModelState { kUnloaded, kLoading, kReady, kFailed };
std::string_view ModelStateName(ModelState state);

struct VariantDescription {
  std::string name;
  std::string precision;
  bool loaded = false;
  std::string error;  // Why it failed to load, when it did.
  std::string file_digest;
  bool batch_invariant = false;
  std::optional<double> fidelity_min_cosine;  // To fp32, measured at quantize time.
  std::optional<double> fidelity_recall_at_10;
  std::optional<double> perplexity;  // Generative variants: measured (model.yaml).
  std::optional<double> top1_agreement;  // Classifiers: measured (model.yaml).
  std::optional<double> top1_accuracy;
  // Whether the precision controller may serve it in place of the default variant (the same
  // vector space, src/core/variant_eligibility.h); else why not.
  bool interchangeable = false;
  std::string not_interchangeable_reason;
};

struct ModelDescription {
  std::string name;
  std::string kind;  // "text-embedding" | "tensor" | "generative"
  ModelState state = ModelState::kUnloaded;
  std::string error;    // Why it failed, when it did.
  std::string version;  // File digest of the active variant.
  int dimensions = 0;
  int max_sequence_length = 0;
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<std::string> variants;  // Loaded variants' names.
  std::vector<VariantDescription> variant_details;
  std::string active_variant;
  // The variant whose vectors define the model's vector space (model.yaml default_variant);
  // unpinned requests only ever get vectors interchangeable with it.
  std::string default_variant;
  std::string precision_policy;      // "off", "slo", "thresholds" or "pinned".
  std::string precision_controller;  // What it moves between, or why it is off.
  // The interchangeability floor in force (PrecisionPolicy), and whether it is waived.
  double fidelity_floor_min_cosine = 0;
  double fidelity_floor_recall_at_10 = 0;
  bool fidelity_floor_waived = false;
  double top1_agreement_floor = 0;  // Classifiers' floor (PrecisionPolicy).
  int64_t precision_switches = 0;
  // Generative models: the KV cache's capacity in tokens (all sequences together), the most
  // sequences generated at once, the context the model was trained with, and llama.cpp's
  // summary of it ("llama 256M Q4_1").
  int context_tokens = 0;
  int max_sequences = 0;
  int trained_context_tokens = 0;
  std::string engine_description;
};

class InferenceApi {
 public:
  virtual ~InferenceApi() = default;

  virtual void Embed(EmbedRequest request, EmbedCallback done) = 0;
  virtual void Infer(TensorRequest request, TensorCallback done) = 0;
  // Generates text for `request` into `sink` (core/generation.h: OnStart, OnText..., OnEnd).
  virtual void Generate(GenerateRequest request, GenerationSinkPtr sink) = 0;

  virtual std::vector<ModelDescription> ListModels() const = 0;
  // The model's description; NotFound for an unknown name.
  virtual Result<ModelDescription> DescribeModel(const std::string& name) const = 0;
  // The name "default" resolves to.
  virtual std::string default_model() const = 0;

  // Live: the process runs. Ready: every model loaded at start-up is loaded and warm, and
  // the server is not shutting down.
  virtual bool Ready() const = 0;
};

}  // namespace tailcut
