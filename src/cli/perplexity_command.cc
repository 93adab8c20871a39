// `tailcut perplexity`: a generative model's perplexity over a text file (engine/perplexity.h:
// llama.cpp's scheme, second half of each window scored), to compare the quality of precision
// variants of one model on the same text. Prints one JSON object.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "engine/generative_model.h"
#include "engine/perplexity.h"

namespace tailcut::cli {
namespace {

struct PerplexityArgs {
  std::string model;
  std::string text_file;
  PerplexityOptions options;
  int threads = 1;
};

int RunPerplexity(const PerplexityArgs& args) {
  LogToStderr();
  std::ifstream in(args.text_file, std::ios::binary);
  if (!in) {
    PrintError("cannot read text file '" + args.text_file + "'");
    return 1;
  }
  std::ostringstream text;
  text << in.rdbuf();

  GenerativeModelOptions mo;
  mo.context_tokens = args.options.window_tokens;
  mo.batch_tokens = args.options.window_tokens;  // One Decode per window.
  mo.max_sequences = 1;
  mo.decode_threads = args.threads;
  mo.batch_threads = args.threads;
  auto model = LoadGenerativeModel(args.model, mo);
  if (!model.ok()) {
    PrintError(model.status().message());
    return 1;
  }
  auto r = ComputeTextPerplexity(**model, text.str(), args.options);
  if (!r.ok()) {
    PrintError(args.text_file + ": " + r.status().message());
    return 1;
  }
  const nlohmann::json out = {
      {"model", args.model},
      {"description", (*model)->description()},
      {"text", args.text_file},
      {"text_tokens", r->text_tokens},
      {"window_tokens", r->window_tokens},
      {"windows", r->windows},
      {"scored_tokens", r->scored_tokens},
      {"mean_nll", r->mean_nll},
      {"perplexity", r->perplexity},
      {"seconds", r->seconds},
      {"threads", args.threads},
  };
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

Runner AddPerplexityCommand(CLI::App& app) {
  auto args = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a GGUF generative model over a text file (llama.cpp's scheme)");
  cmd->add_option("--model", args->model, "GGUF file")->required();
  cmd->add_option("--text", args->text_file, "Text file (UTF-8)")->required();
  cmd->add_option("--context", args->options.window_tokens,
                  "Tokens per window; the second half of each is scored")
      ->check(CLI::Range(16, 1 << 20));
  cmd->add_option("--max-windows", args->options.max_windows, "Stop after N windows; 0 = all")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--threads", args->threads, "Decode threads")->check(CLI::Range(1, 512));
  return [args] { return RunPerplexity(*args); };
}

}  // namespace tailcut::cli
