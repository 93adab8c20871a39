// gguf_quantize.h on llama.cpp's llama_model_quantize.
#include <llama.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/gguf_quantize.h"
#include "engine/llama_backend.h"

namespace tailcut {
namespace {

namespace fs = std::filesystem;

struct TypeEntry {
  const char* name;
  llama_ftype ftype;
};

// llama-quantize's list, less the types that need an importance matrix (the IQ1/IQ2 family
// and Q2_K_S: without one llama.cpp refuses them, and tailcut has no calibration set) and the
// ternary ones (for models trained ternary only).
constexpr TypeEntry kTypes[] = {
    {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
    {"q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},     {"q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},
    {"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},     {"q2_k", LLAMA_FTYPE_MOSTLY_Q2_K},
    {"q3_k_s", LLAMA_FTYPE_MOSTLY_Q3_K_S}, {"q3_k_m", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"q3_k_l", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"q4_k_s", LLAMA_FTYPE_MOSTLY_Q4_K_S},
    {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"q5_k_s", LLAMA_FTYPE_MOSTLY_Q5_K_S},
    {"q5_k_m", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"q6_k", LLAMA_FTYPE_MOSTLY_Q6_K},
    {"iq4_nl", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"iq4_xs", LLAMA_FTYPE_MOSTLY_IQ4_XS},
    {"f16", LLAMA_FTYPE_MOSTLY_F16},       {"bf16", LLAMA_FTYPE_MOSTLY_BF16},
    {"f32", LLAMA_FTYPE_ALL_F32},
};

const TypeEntry* FindType(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const TypeEntry& t : kTypes) {
    if (lower == t.name) return &t;
  }
  return nullptr;
}

std::string KnownTypes() {
  std::string out;
  for (const TypeEntry& t : kTypes) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

// The common mistakes get a precise message before llama.cpp's parser sees the file.
Status CheckInput(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound("GGUF file '" + path + "' not found");
  if (!fs::is_regular_file(path, ec)) {
    return Status::InvalidArgument("GGUF input '" + path + "' is not a file");
  }
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, sizeof magic) || std::memcmp(magic, "GGUF", 4) != 0) {
    return Status::InvalidArgument("'" + path +
                                   "' is not a GGUF file: it does not start with \"GGUF\"");
  }
  return Status::Ok();
}

Status CheckOutput(const std::string& input, const std::string& output) {
  if (output.empty()) return Status::InvalidArgument("no output file given for the GGUF");
  std::error_code ec;
  if (fs::exists(output, ec) && fs::equivalent(input, output, ec)) {
    return Status::InvalidArgument("output '" + output + "' is the input file");
  }
  const fs::path parent = fs::absolute(output, ec).parent_path();
  if (!fs::is_directory(parent, ec)) {
    return Status::NotFound("folder '" + parent.string() + "' for output '" + output +
                            "' not found");
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> GgufQuantizeTypes() {
  std::vector<std::string> out;
  for (const TypeEntry& t : kTypes) out.emplace_back(t.name);
  return out;
}

Result<GgufQuantizeResult> QuantizeGguf(const std::string& input, const std::string& output,
                                        const GgufQuantizeOptions& options) {
  const TypeEntry* type = FindType(options.type);
  if (type == nullptr) {
    return Status::InvalidArgument("unknown GGUF quantization type '" + options.type + "' for '" +
                                   input + "'; known: " + KnownTypes());
  }
  if (options.threads < 0) {
    return Status::InvalidArgument("GgufQuantizeOptions.threads is " +
                                   std::to_string(options.threads) + "; it must be >= 0");
  }
  if (Status s = CheckInput(input); !s.ok()) return s;
  if (Status s = CheckOutput(input, output); !s.ok()) return s;
  llama_backend::Init();

  llama_model_quantize_params params = llama_model_quantize_default_params();
  params.nthread = options.threads;
  params.ftype = type->ftype;
  // The shipped model is already quantised (Q4_1): without this llama.cpp refuses to touch
  // its quantised tensors.
  params.allow_requantize = true;

  // Written under a temporary name and renamed when complete, so that nothing ever loads a
  // half-written model (llama.cpp writes its output in place and leaves it on failure).
  const std::string partial = output + ".partial";
  const auto t0 = std::chrono::steady_clock::now();
  llama_backend::ClearLastError();
  const uint32_t rc = llama_model_quantize(input.c_str(), partial.c_str(), &params);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::error_code ec;
  if (rc != 0) {
    fs::remove(partial, ec);
    return Status::InvalidArgument("llama.cpp could not quantise '" + input + "' to " + type->name +
                                   ": " + llama_backend::LastError());
  }
  fs::rename(partial, output, ec);
  if (ec) {
    fs::remove(partial, ec);
    return Status::Internal("could not rename '" + partial + "' to '" + output +
                            "': " + ec.message());
  }
  GgufQuantizeResult result;
  result.type = type->name;
  result.type_name = llama_ftype_name(type->ftype);
  result.input_bytes = fs::file_size(input, ec);
  result.output_bytes = fs::file_size(output, ec);
  result.seconds = seconds;
  return result;
}

}  // namespace tailcut
