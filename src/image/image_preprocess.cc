#include "image/image_preprocess.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tailcut {
namespace {

std::string SizeText(int64_t width, int64_t height) {
  return std::to_string(width) + " x " + std::to_string(height);
}

Status CheckOptions(const ImagePreprocessOptions& options) {
  if (options.crop_width_pixels <= 0 || options.crop_height_pixels <= 0) {
    return Status::InvalidArgument("preprocess: crop size " +
                                   SizeText(options.crop_width_pixels, options.crop_height_pixels) +
                                   " is not positive");
  }
  if (options.resize_shorter_side_pixels < 0) {
    return Status::InvalidArgument("preprocess: resize_shorter_side_pixels is negative (" +
                                   std::to_string(options.resize_shorter_side_pixels) + ")");
  }
  for (size_t c = 0; c < 3; ++c) {
    if (!std::isfinite(options.mean[c]) || !std::isfinite(options.stddev[c]) ||
        options.stddev[c] == 0.0f) {
      return Status::InvalidArgument("preprocess: channel " + std::to_string(c) +
                                     " has a non-finite mean or a zero or non-finite stddev");
    }
  }
  return Status::Ok();
}

// Python's round(x / 2) for a non-negative integer x: halves go to the even neighbour.
int32_t HalfRoundedToEven(int32_t x) {
  const int32_t half = x / 2;
  return (x % 2 == 1 && half % 2 == 1) ? half + 1 : half;
}

}  // namespace

Status PreprocessImage(const DecodedImage& image, const ImagePreprocessOptions& options,
                       std::span<float> out) {
  if (Status status = CheckOptions(options); !status.ok()) return status;
  const int32_t crop_width = options.crop_width_pixels;
  const int32_t crop_height = options.crop_height_pixels;
  const size_t plane = static_cast<size_t>(crop_width) * crop_height;
  if (out.size() != plane * 3) {
    return Status::InvalidArgument("preprocess: output has " + std::to_string(out.size()) +
                                   " floats, a " + SizeText(crop_width, crop_height) +
                                   " RGB crop needs " + std::to_string(plane * 3));
  }
  if (image.width <= 0 || image.height <= 0) {
    return Status::InvalidArgument("preprocess: the image is empty (" +
                                   SizeText(image.width, image.height) + " pixels)");
  }

  // torchvision's Resize(int): the shorter side becomes the target, the longer one
  // int(target * long / short), a floor, which the integer division gives exactly.
  int64_t resized_width = image.width;
  int64_t resized_height = image.height;
  if (const int64_t target = options.resize_shorter_side_pixels; target > 0) {
    if (image.width <= image.height) {
      resized_width = target;
      resized_height = target * image.height / image.width;
    } else {
      resized_height = target;
      resized_width = target * image.width / image.height;
    }
  }
  if (resized_width > std::numeric_limits<int32_t>::max() ||
      resized_height > std::numeric_limits<int32_t>::max()) {
    return Status::InvalidArgument("preprocess: the " + SizeText(image.width, image.height) +
                                   " image would be resized to " +
                                   SizeText(resized_width, resized_height) + " pixels");
  }
  if (resized_width < crop_width || resized_height < crop_height) {
    return Status::InvalidArgument(
        "preprocess: the image is " + SizeText(resized_width, resized_height) + " pixels" +
        (options.resize_shorter_side_pixels > 0
             ? " after resizing (from " + SizeText(image.width, image.height) + ")"
             : std::string(" (resizing is off)")) +
        ", smaller than the " + SizeText(crop_width, crop_height) + " crop; it is not padded");
  }

  // torchvision's CenterCrop: offset int(round((size - crop) / 2.0)).
  const PixelWindow window{HalfRoundedToEven(static_cast<int32_t>(resized_width) - crop_width),
                           HalfRoundedToEven(static_cast<int32_t>(resized_height) - crop_height),
                           crop_width, crop_height};
  std::vector<uint8_t> crop(plane * 3);
  if (Status status =
          ResizeWindow(image, static_cast<int32_t>(resized_width),
                       static_cast<int32_t>(resized_height), options.filter, window, crop);
      !status.ok()) {
    return status;
  }

  // 256 possible values a channel: a table instead of a divide per value.
  float table[3][256];
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) {
      table[c][v] = (static_cast<float>(v) / 255.0f - options.mean[c]) / options.stddev[c];
    }
  }
  const uint8_t* pixel = crop.data();
  if (options.layout == ImagePreprocessOptions::Layout::kNchw) {
    float* red = out.data();
    float* green = red + plane;
    float* blue = green + plane;
    for (size_t i = 0; i < plane; ++i, pixel += 3) {
      red[i] = table[0][pixel[0]];
      green[i] = table[1][pixel[1]];
      blue[i] = table[2][pixel[2]];
    }
  } else {
    for (size_t i = 0; i < plane * 3; i += 3, pixel += 3) {
      out[i] = table[0][pixel[0]];
      out[i + 1] = table[1][pixel[1]];
      out[i + 2] = table[2][pixel[2]];
    }
  }
  return Status::Ok();
}

}  // namespace tailcut
