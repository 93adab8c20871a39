// Paths the engine tests read: the default model (TAILCUT_MODEL_DIR overrides), the default
// generative model (TAILCUT_GGUF overrides) and committed test data.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tailcut::testing {

inline std::string ModelDir() {
  if (const char* env = std::getenv("TAILCUT_MODEL_DIR"); env && *env) return env;
  return std::string(TAILCUT_MODELS_DIR) + "/all-MiniLM-L6-v2";
}

// The GGUF file scripts/setup.sh installs, in its model folder; a checkout whose models were
// set up before that folder existed still has it in models/gguf/ (set-up moves it).
inline std::string GgufPath() {
  if (const char* env = std::getenv("TAILCUT_GGUF"); env && *env) return env;
  const std::string file = "SmolLM2-135M-Instruct.Q4_1.gguf";
  const std::string installed = std::string(TAILCUT_MODELS_DIR) + "/smollm2-135m-instruct/" + file;
  const std::string legacy = std::string(TAILCUT_MODELS_DIR) + "/gguf/" + file;
  return !std::filesystem::exists(installed) && std::filesystem::exists(legacy) ? legacy
                                                                                 : installed;
}

inline std::string SourcePath(const std::string& relative) {
  return std::string(TAILCUT_SOURCE_DIR) + "/" + relative;
}

// A fresh empty folder under the system temp folder.
inline std::filesystem::path TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("tailcut-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace tailcut::testing
