// Fuzz target: the body of POST /embed and POST /rerank (Hugging Face TEI schemas).
#include <cstddef>
#include <cstdint>

#include "fuzz/json_route_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tailcut::fuzz::HttpHarness harness;
  tailcut::fuzz::PostJson(harness, {"/embed", "/rerank"},
                          {reinterpret_cast<const char*>(data), size});
  return 0;
}
