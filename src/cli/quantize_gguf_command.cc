// `tailcut quantize-gguf`: requantise a generative model's GGUF file to another weight type
// with llama.cpp's quantizer (engine/gguf_quantize.h), to make the precision variants the
// generative engine can load. Prints one JSON object: the type, both sizes, the time.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/gguf_quantize.h"

namespace tailcut::cli {
namespace {

struct QuantizeArgs {
  std::string input;
  std::string output;
  GgufQuantizeOptions options;
};

int RunQuantize(const QuantizeArgs& args) {
  LogToStderr();
  auto result = QuantizeGguf(args.input, args.output, args.options);
  if (!result.ok()) {
    PrintError(result.status().message());
    return 1;
  }
  const nlohmann::json out = {
      {"input", args.input},
      {"output", args.output},
      {"type", result->type},
      {"file_type", result->type_name},
      {"input_bytes", result->input_bytes},
      {"output_bytes", result->output_bytes},
      {"seconds", result->seconds},
  };
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

Runner AddQuantizeGgufCommand(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  std::string types;
  for (const std::string& t : GgufQuantizeTypes()) types += (types.empty() ? "" : ", ") + t;
  CLI::App* cmd = app.add_subcommand(
      "quantize-gguf", "Requantise a GGUF generative model to another weight type (llama.cpp)");
  cmd->add_option("--in", args->input, "Source GGUF file (may itself be quantised)")->required();
  cmd->add_option("--out", args->output, "GGUF file to write (replaced if it exists)")->required();
  cmd->add_option("--type", args->options.type, "Target type: " + types)->required();
  cmd->add_option("--threads", args->options.threads, "Quantizing threads; 0 = number of cores")
      ->check(CLI::NonNegativeNumber);
  return [args] { return RunQuantize(*args); };
}

}  // namespace tailcut::cli
