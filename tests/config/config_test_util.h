// Helpers shared by config_test's files: substring assertions and throwaway config files.
//
// Thread-safety: test-only helpers for the test's own thread; WriteFile() writes under the
// test temp folder, so tests that use one name must not run in parallel in one process.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tailcut::config_test {

// gmock is not installed on every build machine, so substring checks are done by hand.
inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\"\n  does not contain\n\"" << part << "\"";
}

// Writes `text` to a fresh file under the test temp folder and returns its path.
inline std::string WriteFile(const std::string& name, const std::string& text) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "tailcut_config_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace tailcut::config_test
