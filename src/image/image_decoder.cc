#include "image/image_decoder.h"

#include <string>

#include "image/image_formats.h"

namespace tailcut {
namespace image_internal {

bool HasJpegSignature(std::span<const std::byte> encoded) {
  return encoded.size() >= 3 && encoded[0] == std::byte{0xFF} && encoded[1] == std::byte{0xD8} &&
         encoded[2] == std::byte{0xFF};
}

bool HasPngSignature(std::span<const std::byte> encoded) {
  static constexpr unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (encoded.size() < sizeof(kSignature)) return false;
  for (size_t i = 0; i < sizeof(kSignature); ++i) {
    if (encoded[i] != std::byte{kSignature[i]}) return false;
  }
  return true;
}

Status CheckDeclaredSize(int64_t width, int64_t height, const ImageDecodeLimits& limits,
                         const char* format) {
  const std::string size = std::to_string(width) + " x " + std::to_string(height);
  if (width <= 0 || height <= 0) {
    return Status::InvalidArgument(std::string(format) + " image declares an empty size (" + size +
                                   " pixels)");
  }
  if (width > limits.max_side_pixels || height > limits.max_side_pixels) {
    return Status::InvalidArgument(std::string(format) + " image is too large: " + size +
                                   " pixels, the limit is " +
                                   std::to_string(limits.max_side_pixels) + " pixels a side");
  }
  // Both sides are at most max_side_pixels (an int32), so the product fits in int64.
  if (width * height > limits.max_pixels) {
    return Status::InvalidArgument(std::string(format) + " image is too large: " + size + " = " +
                                   std::to_string(width * height) + " pixels, the limit is " +
                                   std::to_string(limits.max_pixels) + " pixels");
  }
  return Status::Ok();
}

}  // namespace image_internal

Result<DecodedImage> DecodeImage(std::span<const std::byte> encoded,
                                 const ImageDecodeLimits& limits) {
  if (encoded.empty()) return Status::InvalidArgument("image data is empty");
  if (image_internal::HasJpegSignature(encoded)) return image_internal::DecodeJpeg(encoded, limits);
  if (image_internal::HasPngSignature(encoded)) return image_internal::DecodePng(encoded, limits);
  return Status::InvalidArgument("image data is not a JPEG or PNG file (" +
                                 std::to_string(encoded.size()) +
                                 " bytes with neither signature); accepted formats: JPEG, PNG");
}

}  // namespace tailcut
