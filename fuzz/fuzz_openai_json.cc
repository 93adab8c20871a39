// Fuzz target: the body of POST /v1/embeddings (OpenAI embeddings schema).
#include <cstddef>
#include <cstdint>

#include "fuzz/json_route_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tailcut::fuzz::HttpHarness harness;
  tailcut::fuzz::PostJson(harness, {"/v1/embeddings"}, {reinterpret_cast<const char*>(data), size});
  return 0;
}
