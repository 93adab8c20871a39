// Turns a decoded image into an image classifier's input: resize the shorter side, centre
// crop, scale to [0, 1], normalise per channel, lay out as NCHW or NHWC floats.
//
// It reproduces the usual Python reference, torchvision's Resize(shorter_side) +
// CenterCrop(crop) + ToTensor() + Normalize(mean, std) on a PIL image, including its integer
// rules (the longer side becomes int(shorter_side * long / short), the crop offset is
// round((size - crop) / 2) with Python's round-half-to-even) and Pillow's resampling
// (image_resample.h, bit-exact), so a model sees what it saw in its evaluation.
//
// An image smaller than the crop after the resize is refused (InvalidArgument naming both
// sizes), not padded: padding would show the model borders it was never evaluated with, and
// with the defaults (shorter side 256, crop 224) it only happens when resizing is turned off.
//
// Thread-safety: pure functions with no shared state; call from any number of threads.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "common/status.h"
#include "image/image_decoder.h"
#include "image/image_resample.h"

namespace tailcut {

struct ImagePreprocessOptions {
  // The shorter side is resized to this (aspect ratio kept); 0 = no resize, crop the image as
  // decoded. 256 with a 224 crop is the ImageNet evaluation convention (crop ratio 0.875).
  int32_t resize_shorter_side_pixels = 256;
  // The centre crop taken from the resized image: the model's input width and height.
  int32_t crop_width_pixels = 224;
  int32_t crop_height_pixels = 224;
  // Per channel (R, G, B), applied as (pixel / 255 - mean) / stddev. The defaults are
  // EfficientNet-Lite's (TF's 127 and 128 on 0..255 pixels, tools/export_image_model.py);
  // torchvision's ImageNet models use mean {0.485, 0.456, 0.406}, stddev {0.229, 0.224, 0.225}.
  std::array<float, 3> mean = {127.0f / 255.0f, 127.0f / 255.0f, 127.0f / 255.0f};
  std::array<float, 3> stddev = {128.0f / 255.0f, 128.0f / 255.0f, 128.0f / 255.0f};
  // The output tensor's layout for one image: NCHW writes three planes (R, then G, then B) of
  // crop_height x crop_width; NHWC writes rows of interleaved RGB.
  enum class Layout { kNchw, kNhwc };
  Layout layout = Layout::kNchw;
  // The resampling filter; bicubic is what the reference preprocessing of most classifiers
  // (and of EfficientNet-Lite) uses.
  ResampleFilter filter = ResampleFilter::kBicubic;
};

// Writes the preprocessed `image` into `out`, which must hold exactly
// 3 * crop_width_pixels * crop_height_pixels floats (one image of a batch tensor).
// InvalidArgument for a wrong `out` size, invalid options (non-positive crop, negative resize,
// zero or non-finite stddev), an image smaller than the crop after resizing, or an empty image.
Status PreprocessImage(const DecodedImage& image, const ImagePreprocessOptions& options,
                       std::span<float> out);

}  // namespace tailcut
