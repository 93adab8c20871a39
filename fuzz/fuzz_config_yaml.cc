// Fuzz target: a `tailcut serve --config FILE` YAML file, through ServerConfigLoader::Load()
// (yaml-cpp, then our walk over the settings table with its type and range checks). The input
// is written to an in-memory file (memfd) that the loader opens by its /proc path.
//
// Oracle: Load() returns (a config or an error); an exception escaping it, which would end
// `tailcut serve` with std::terminate instead of a message, is a crash.
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "config/server_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = [] {
    const int fd = memfd_create("tailcut-fuzz-config", 0);
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return fd;
  }();
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::perror("writing the config memfd");
    std::abort();
  }
  // As the serve command registers it, parsed once: the command line never changes, and
  // Load() reads the file afresh each time. The environment is replaced by an empty one so
  // that the fuzzing process's own TAILCUT_* variables cannot matter.
  static CLI::App app{"fuzz"};
  static tailcut::ServerConfigLoader* loader = [] {
    auto* l = new tailcut::ServerConfigLoader(*app.add_subcommand("serve"));
    std::vector<std::string> words = {"tailcut", "serve", "--config",
                                      "/proc/self/fd/" + std::to_string(fd)};
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return l;
  }();
  const std::map<std::string, std::string> env;
  auto config = loader->Load(&env);
  (void)config;
  return 0;
}
