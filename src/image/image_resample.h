// Resizing of 8-bit RGB images that reproduces Pillow's Image.resize((w, h), filter) bit for
// bit, because image classifiers' reference preprocessing (torchvision's Resize on PIL
// images) is Pillow's.
//
// Pillow's algorithm (src/libImaging/Resample.c): separable, horizontal pass first into an
// intermediate 8-bit image, then vertical; when downscaling, the filter's support is widened
// by the scale factor (antialiasing); each output sample's weights are normalised to sum to 1,
// turned into 22-bit fixed point, and every pass rounds and clamps to 8 bits. A pass whose
// size does not change is skipped (its weights would be the identity anyway).
//
// Only a window of the resized image is computed (a centre crop's worth): each output pixel
// depends only on its own weights, so the window is identical to cropping the full resize, at
// a fraction of the work and memory.
//
// Thread-safety: pure functions with no shared state; call from any number of threads.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "image/image_decoder.h"

namespace tailcut {

// The resampling filters, as Pillow defines them.
enum class ResampleFilter {
  kBicubic,   // Image.BICUBIC: cubic convolution, a = -0.5, support 2.
  kBilinear,  // Image.BILINEAR: triangle, support 1.
};

// A rectangle in the resized image, in its pixels.
struct PixelWindow {
  int32_t x = 0;
  int32_t y = 0;
  int32_t width = 0;
  int32_t height = 0;
};

// Resizes `image` to resized_width x resized_height as Pillow does and writes the `window` of
// the result into `out`: window.width * window.height * 3 bytes, RGB interleaved, row-major.
// InvalidArgument when a size is not positive, the window is not inside the resized image, or
// `out` has the wrong size.
Status ResizeWindow(const DecodedImage& image, int32_t resized_width, int32_t resized_height,
                    ResampleFilter filter, const PixelWindow& window, std::span<uint8_t> out);

}  // namespace tailcut
