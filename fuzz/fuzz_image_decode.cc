// Fuzz target: DecodeImage() on arbitrary bytes (an encoded image a client sends to an image
// model), then PreprocessImage() of what decodes. The limits are small (64 K pixels) so that
// each input stays cheap; the decoders' own size checks are what runs first either way.
//
// Oracles: no crash, overread, leak or undefined behaviour on any input (libjpeg's and
// libpng's error paths longjmp through our frames); a decoded image is within the limits and
// has exactly width x height x 3 bytes; its preprocessed tensor is all finite and within the
// range that normalising 0..255 pixels can give.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "image/image_decoder.h"
#include "image/image_preprocess.h"

using tailcut::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tailcut::ImageDecodeLimits limits;
  limits.max_pixels = 1 << 16;
  limits.max_side_pixels = 1024;
  limits.max_jpeg_scans = 64;
  auto image = tailcut::DecodeImage(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), limits);
  if (!image.ok()) {
    Check(image.status().code() == tailcut::Status::Code::kInvalidArgument,
          "a refused image that is not InvalidArgument");
    Check(!image.status().message().empty(), "a refusal without a message");
    return 0;
  }
  Check(image->width > 0 && image->height > 0, "a decoded image of no pixels");
  Check(static_cast<int64_t>(image->width) * image->height <= limits.max_pixels,
        "a decoded image beyond the pixel limit");
  Check(image->rgb.size() == static_cast<size_t>(image->width) * image->height * 3,
        "decoded pixels that disagree with the size");

  tailcut::ImagePreprocessOptions options;
  options.resize_shorter_side_pixels = 16;
  options.crop_width_pixels = 12;
  options.crop_height_pixels = 12;
  std::vector<float> out(3 * 12 * 12);
  const tailcut::Status s = tailcut::PreprocessImage(*image, options, out);
  Check(s.ok(), "a decoded image that the preprocessing refused");
  for (size_t c = 0; c < out.size(); ++c) {
    const size_t channel = c / (12 * 12);
    const float lo = (0.0f - options.mean[channel]) / options.stddev[channel];
    const float hi = (1.0f - options.mean[channel]) / options.stddev[channel];
    Check(std::isfinite(out[c]) && out[c] >= lo - 1e-4f && out[c] <= hi + 1e-4f,
          "a preprocessed value outside what 0..255 pixels normalise to");
  }
  return 0;
}
