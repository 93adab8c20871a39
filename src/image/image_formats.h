// Internal to src/image: the per-format decoders that DecodeImage (image_decoder.cc) picks
// between by magic bytes, and the size check they share. Not for use outside src/image.
//
// Thread-safety: pure functions with no shared state; call from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"
#include "image/image_decoder.h"

namespace tailcut::image_internal {

// Magic bytes: JPEG starts with an SOI marker followed by another marker (FF D8 FF); PNG with
// its 8-byte signature.
bool HasJpegSignature(std::span<const std::byte> encoded);
bool HasPngSignature(std::span<const std::byte> encoded);

// Decoders for input whose signature matched; same contract as DecodeImage.
Result<DecodedImage> DecodeJpeg(std::span<const std::byte> encoded,
                                const ImageDecodeLimits& limits);
Result<DecodedImage> DecodePng(std::span<const std::byte> encoded, const ImageDecodeLimits& limits);

// Status::InvalidArgument, naming `format` and the numbers, unless the declared
// width x height is non-empty and within `limits`. Called with the header's size, before any
// pixel memory is allocated.
Status CheckDeclaredSize(int64_t width, int64_t height, const ImageDecodeLimits& limits,
                         const char* format);

}  // namespace tailcut::image_internal
