// tailcut: a C++ inference server for ONNX models that keeps tail latency low.
#include <spdlog/spdlog.h>

#include <iostream>
#include <map>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "tailcut: serve ONNX models (text embeddings first) with low tail latency.\n"
      "Run 'tailcut <command> --help' for a command's options."};
  app.set_version_flag("--version", std::string("tailcut ") + TAILCUT_VERSION);
  app.require_subcommand(1);

  std::map<std::string, tailcut::cli::Runner> runners;
  runners["serve"] = tailcut::cli::AddServeCommand(app);
  runners["embed"] = tailcut::cli::AddEmbedCommand(app);
  runners["info"] = tailcut::cli::AddInfoCommand(app);
  runners["bench-engine"] = tailcut::cli::AddBenchEngineCommand(app);
  runners["quantize-gguf"] = tailcut::cli::AddQuantizeGgufCommand(app);
  runners["perplexity"] = tailcut::cli::AddPerplexityCommand(app);
  runners["semantic-pairs"] = tailcut::cli::AddSemanticPairsCommand(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto* sub : app.get_subcommands()) {
    auto it = runners.find(sub->get_name());
    if (it != runners.end()) return it->second();
  }
  return 2;
}
