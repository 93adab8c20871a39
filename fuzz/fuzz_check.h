// Check: the fuzz targets' oracle. Aborts with `what` on stderr when `ok` is false, in every
// build (unlike assert, which release builds drop), so that libFuzzer reports the input.
//
// Thread-safety: stateless.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tailcut::fuzz {

inline void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz oracle failed: %s\n", what);
  std::abort();
}

}  // namespace tailcut::fuzz
