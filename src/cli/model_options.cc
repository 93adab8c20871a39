#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "engine/ort_environment.h"

namespace tailcut::cli {
namespace fs = std::filesystem;

void AddModelOptions(CLI::App& cmd, ModelOptions& options) {
  cmd.add_option("-m,--model-dir", options.model_dir,
                 "Model folder (model.yaml + model.onnx); default $TAILCUT_MODEL_DIR or "
                 "models/all-MiniLM-L6-v2");
  cmd.add_option("--threads", options.intra_op_threads,
                 "Threads per inference (ONNX Runtime intra-op); 0 = number of cores")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--variant", options.variant,
                 "Precision variant of model.yaml to load, by name (e.g. int8-per-token); "
                 "default the model's file");
  cmd.add_flag("--spin", options.allow_spinning,
               "Let inference threads spin between runs (lower latency, busier cores)");
}

std::string DefaultModelDir() {
  if (const char* env = std::getenv("TAILCUT_MODEL_DIR"); env && *env) return env;
  const fs::path rel = fs::path("models") / "all-MiniLM-L6-v2";
  std::error_code ec;
  if (fs::exists(rel, ec)) return rel.string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = exe.parent_path().parent_path() / rel;
    if (fs::exists(beside, ec)) return beside.string();
  }
  return rel.string();
}

void PrintError(const std::string& message) {
  std::cerr << "tailcut: " << message << "\n";
}

void LogToStderr() {
  spdlog::set_default_logger(spdlog::stderr_color_mt("tailcut"));
}

}  // namespace tailcut::cli

namespace tailcut::cli {

Result<std::unique_ptr<TextEmbeddingModel>> LoadTextModel(const ModelOptions& options) {
  OrtEnvironmentOptions env;
  env.intra_op_threads = options.intra_op_threads;
  env.allow_spinning = options.allow_spinning;
  Status init = OrtEnvironment::Init(env);
  if (!init.ok()) return init;
  const std::string dir = options.model_dir.empty() ? DefaultModelDir() : options.model_dir;
  auto config = LoadModelConfig(dir);
  if (!config.ok()) return config.status();
  if (options.variant.empty()) return TextEmbeddingModel::Load(*config, OnnxSessionOptions{});
  std::string names;
  for (const VariantConfig& v : config->variants) {
    if (v.name == options.variant) {
      return TextEmbeddingModel::Load(*config, v.file_path, OnnxSessionOptions{});
    }
    names += (names.empty() ? "" : ", ") + v.name;
  }
  return Status::InvalidArgument("--variant '" + options.variant + "': model '" + config->name +
                                 "' has " + (names.empty() ? "no variants" : "variants " + names));
}

}  // namespace tailcut::cli
