// Decoding of encoded images (JPEG, PNG) into 8-bit interleaved RGB, the first step of turning
// a request's image bytes into an image classifier's input tensor (image_preprocess.h).
//
// Untrusted input: the format is detected from the magic bytes (never from a name or content
// type), the declared size is checked against ImageDecodeLimits before any pixel memory is
// allocated, and every decoder error (corrupt, truncated, unsupported) comes back as
// Status::InvalidArgument; libjpeg and libpng are set up so they never print or exit().
//
// Thread-safety: pure functions with no shared state; call from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace tailcut {

// An image as 8-bit RGB, row-major, channels interleaved: pixel (x, y) channel c is
// rgb[(y * width + x) * 3 + c]. Whatever the source held (grey, alpha, palette, 16 bits per
// sample, CMYK) ends here as three 8-bit channels; alpha is dropped, not composited.
struct DecodedImage {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3 bytes.
};

// Bounds on what DecodeImage accepts, checked against the image's header before decoding.
struct ImageDecodeLimits {
  // Largest width * height. Bounds the decode's memory (3 bytes a pixel for the result: 40 M
  // pixels is 120 MB; a progressive JPEG also buffers its coefficients, up to 6 bytes a pixel)
  // and time; a 12-megapixel phone photo is well inside the default.
  int64_t max_pixels = 40'000'000;
  // Largest width or height. Bounds very thin images, whose row buffers and resize weights
  // scale with one side, and keeps every size well inside int32 arithmetic.
  int32_t max_side_pixels = 16'384;
  // Largest number of scans a progressive JPEG may have (0 = no limit). Each scan re-reads the
  // whole coefficient buffer, so a small file with thousands of tiny scans can cost seconds of
  // CPU (libjpeg-turbo's own guidance for untrusted input); real encoders write about 10.
  int32_t max_jpeg_scans = 256;
};

// Decodes a JPEG or PNG (detected from its first bytes) into RGB. Errors are
// Status::InvalidArgument naming the problem: empty input, an unrecognised format (the message
// lists the accepted ones), a zero or too large declared size (with the numbers), and
// truncated or corrupt data.
Result<DecodedImage> DecodeImage(std::span<const std::byte> encoded,
                                 const ImageDecodeLimits& limits = {});

}  // namespace tailcut
