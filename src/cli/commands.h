// The tailcut command line: each subcommand registers its options on the CLI11 app and
// runs when chosen. main.cc wires them together; one file per subcommand.
//
// Thread-safety: used from main() only.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "engine/text_embedding_model.h"

namespace tailcut::cli {

// Registers a subcommand; the returned function runs it and yields the process exit code.
using Runner = std::function<int()>;
Runner AddEmbedCommand(CLI::App& app);
Runner AddInfoCommand(CLI::App& app);
Runner AddBenchEngineCommand(CLI::App& app);
Runner AddServeCommand(CLI::App& app);
Runner AddQuantizeGgufCommand(CLI::App& app);
Runner AddPerplexityCommand(CLI::App& app);
Runner AddSemanticPairsCommand(CLI::App& app);

// Options shared by the subcommands that load one model.
struct ModelOptions {
  std::string model_dir;     // Empty = DefaultModelDir().
  std::string variant;       // A precision variant of model.yaml by name; empty = its file.
  int intra_op_threads = 0;  // 0 = cores.
  bool allow_spinning = false;
};
void AddModelOptions(CLI::App& cmd, ModelOptions& options);

// $TAILCUT_MODEL_DIR, else models/all-MiniLM-L6-v2 under the working folder, else under the
// folder above the binary's folder (build/tailcut -> models/...).
std::string DefaultModelDir();

// Starts ONNX Runtime with the thread options and loads the text model from the folder.
Result<std::unique_ptr<TextEmbeddingModel>> LoadTextModel(const ModelOptions& options);

// Prints "tailcut: <message>" on stderr, one line.
void PrintError(const std::string& message);

// Sends spdlog's lines (llama.cpp's warnings among them) to stderr, for the commands whose
// stdout is one JSON document that scripts parse.
void LogToStderr();

}  // namespace tailcut::cli
