// Fuzz target: DecodeEmbedding() on arbitrary bytes, i.e. whatever a shared Redis holds under
// one of our keys. The expected dimension count is taken from the bytes' own count field
// (bytes 4..7), as a matching model's would be, so that decodable values are reachable; a
// second decode with a different count must then fail.
//
// Oracles: no crash or overread on any input; a successful decode has the expected size,
// only finite values, and EncodeEmbedding() of it reproduces the input byte for byte (the
// format has one encoding per vector, so anything else means the decoder accepted bytes the
// encoder never writes).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "cache/cached_value.h"
#include "fuzz/fuzz_check.h"

using tailcut::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  size_t dims = 384;
  if (size >= 8) {
    dims = size_t{data[4]} | size_t{data[5]} << 8 | size_t{data[6]} << 16 | size_t{data[7]} << 24;
  }
  auto decoded = tailcut::DecodeEmbedding(bytes, dims);
  if (!decoded.ok()) return 0;
  Check(decoded->size() == dims, "decoded a different number of values than expected");
  for (float v : *decoded) Check(std::isfinite(v), "decoded a non-finite value");
  Check(tailcut::EncodeEmbedding(*decoded) == bytes, "decode then encode is not the identity");
  Check(!tailcut::DecodeEmbedding(bytes, dims + 1).ok(), "decoded with the wrong dimension count");
  return 0;
}
