// Fuzz target: the body of POST /embed (Hugging Face TEI schema).
#include <cstddef>
#include <cstdint>

#include "fuzz/json_route_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tailcut::fuzz::HttpHarness harness;
  tailcut::fuzz::PostJson(harness, {"/embed"}, {reinterpret_cast<const char*>(data), size});
  return 0;
}
