// Fuzz target: raw bytes as they arrive on a connection to `tailcut serve`: Beast's request
// parser with the server's limits, then auth, the router and every API handler against a fake
// inference service (see http_harness.h for what is checked).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/http_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tailcut::fuzz::HttpHarness harness;
  // Not ready now and then, so the health routes' 503 answers run too.
  harness.set_ready(size % 7 != 0);
  harness.ServeBytes(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
