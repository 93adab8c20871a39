// The generation parameters that OpenAI's completions and chat schemas and Triton's generate
// extension share (max_tokens, temperature, top_p, top_k, seed, stop, presence and frequency
// penalties), read from a JSON object into a GenerateRequest with OpenAI's ranges. Errors are
// kInvalidArgument naming the field as the client wrote it (`prefix` + name, e.g.
// "parameters.temperature" for Triton).
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

#include "common/status.h"
#include "core/generation.h"

namespace tailcut {

// Most stop strings a request may give (OpenAI's limit).
constexpr size_t kMaxStopStrings = 4;

// Reads the fields of `obj` that are present into `request`; absent ones keep its values.
// `max_tokens` may be spelled `max_completion_tokens` (OpenAI's newer name) where
// `allow_max_completion_tokens`; both at once must agree.
Status ReadGenerationParams(const nlohmann::json& obj, std::string_view prefix,
                            bool allow_max_completion_tokens, GenerateRequest* request);

}  // namespace tailcut
