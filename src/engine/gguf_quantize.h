// Requantising a GGUF model file to another weight type with llama.cpp's own quantizer
// (llama_model_quantize, what its llama-quantize tool runs): the way tailcut makes the
// precision variants of a generative model (Q8_0 and F16 copies of the shipped Q4_1, say) that
// trade file size and quality against prefill and decode speed.
//
// The source may itself be quantised: its weights are dequantised and quantised again, so a
// variant is never better than its source, only differently fast. Which tensors get which type
// is llama.cpp's default mixture for the named type (1-d norms stay F32; rows whose length is
// not a multiple of a K-quant's 256-weight block fall back to a legacy type).
//
// Thread-safety: QuantizeGguf may be called from any thread, several at once on different
// files; it blocks for the whole file (seconds for a 135M model) and keeps `threads` cores busy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tailcut {

struct GgufQuantizeOptions {
  // The target weight type, by llama.cpp's lower-case name: "q4_0", "q4_1", "q5_0", "q5_1",
  // "q8_0", "f16", "bf16", "f32", or a K-quant mixture ("q4_k_m", "q6_k", ...);
  // GgufQuantizeTypes() lists them all.
  std::string type = "q8_0";
  // Threads for quantizing; 0 takes the machine's cores.
  int32_t threads = 1;
};

struct GgufQuantizeResult {
  std::string type;           // The target type as asked ("q8_0").
  std::string type_name;      // llama.cpp's name of the file type it wrote ("Q8_0").
  uint64_t input_bytes = 0;   // Size of the source file.
  uint64_t output_bytes = 0;  // Size of the file written.
  double seconds = 0;         // Wall time of the quantization.
};

// The type names QuantizeGguf accepts: legacy types, K-quant mixtures, IQ4 types, floats.
std::vector<std::string> GgufQuantizeTypes();

// Writes `output` as `input` requantised to options.type. The file appears only when complete
// (it is written beside `output` under a temporary name, then renamed), so a failure leaves no
// partial model behind. Errors name the file or the type: kNotFound when `input` or the folder
// of `output` is missing; kInvalidArgument for an unknown type (the message lists the known
// ones), an input that is not a GGUF file, `output` equal to `input`, or a file llama.cpp
// cannot quantise (quoting llama.cpp's error).
Result<GgufQuantizeResult> QuantizeGguf(const std::string& input, const std::string& output,
                                        const GgufQuantizeOptions& options);

}  // namespace tailcut
