#include "image/image_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tailcut {
namespace {

// Pillow's fixed point: 8 bits of pixel, 2 bits of headroom for the filter's negative lobes
// and overshoot, the rest fraction; accumulators start at one half so the shift rounds.
constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int32_t kHalf = int32_t{1} << (kPrecisionBits - 1);

uint8_t Clip8(int32_t sum) {
  // An arithmetic shift (floor), as Pillow's lookup table indexes by it.
  const int32_t value = sum >> kPrecisionBits;
  return static_cast<uint8_t>(std::clamp(value, 0, 255));
}

double BicubicKernel(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double BilinearKernel(double x) {
  if (x < 0.0) x = -x;
  if (x < 1.0) return 1.0 - x;
  return 0.0;
}

// One axis' weights for a range of output samples: output sample i (of the range) reads input
// samples [first[i], first[i] + count[i]) with weights[i * taps ...].
struct AxisWeights {
  int32_t taps = 0;
  std::vector<int32_t> first;
  std::vector<int32_t> count;
  std::vector<int32_t> weights;
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, for output samples
// [out_begin, out_begin + out_count) of an in_size -> out_size resize. The expressions keep
// Pillow's order of floating-point operations, so the fixed-point weights are identical.
AxisWeights ComputeAxisWeights(int32_t in_size, int32_t out_size, int32_t out_begin,
                               int32_t out_count, ResampleFilter filter) {
  double (*kernel)(double) = filter == ResampleFilter::kBicubic ? BicubicKernel : BilinearKernel;
  const double kernel_support = filter == ResampleFilter::kBicubic ? 2.0 : 1.0;

  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);  // Widen the filter only when shrinking.
  const double support = kernel_support * filter_scale;
  const double inverse_filter_scale = 1.0 / filter_scale;

  AxisWeights axis;
  axis.taps = static_cast<int32_t>(std::ceil(support)) * 2 + 1;
  axis.first.resize(out_count);
  axis.count.resize(out_count);
  axis.weights.assign(static_cast<size_t>(out_count) * axis.taps, 0);
  std::vector<double> raw(axis.taps);
  for (int32_t i = 0; i < out_count; ++i) {
    const double center = (out_begin + i + 0.5) * scale;
    // Truncating casts, as Pillow's (int) (the clamps make the sign irrelevant).
    const int32_t lo = std::max(static_cast<int32_t>(center - support + 0.5), 0);
    const int32_t hi = std::min(static_cast<int32_t>(center + support + 0.5), in_size);
    const int32_t count = hi - lo;
    double total = 0.0;
    for (int32_t t = 0; t < count; ++t) {
      raw[t] = kernel((static_cast<double>(t + lo) - center + 0.5) * inverse_filter_scale);
      total += raw[t];
    }
    int32_t* fixed = &axis.weights[static_cast<size_t>(i) * axis.taps];
    for (int32_t t = 0; t < count; ++t) {
      const double w = total != 0.0 ? raw[t] / total : raw[t];
      fixed[t] = static_cast<int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits)
                                            : 0.5 + w * (1 << kPrecisionBits));
    }
    axis.first[i] = lo;
    axis.count[i] = count;
  }
  return axis;
}

// An 8-bit RGB plane in memory: `rows` rows of `stride` bytes; pixel (x, y) at
// data + y * stride + x * 3.
struct Plane {
  const uint8_t* data;
  size_t stride;
};

// Horizontal pass over `rows` rows of `in`: output column i of the weights' range, row r, goes
// to out[(r * columns + i) * 3].
void ResampleRows(Plane in, int32_t rows, const AxisWeights& axis, uint8_t* out) {
  const int32_t columns = static_cast<int32_t>(axis.first.size());
  for (int32_t r = 0; r < rows; ++r) {
    const uint8_t* row = in.data + r * in.stride;
    uint8_t* dst = out + static_cast<size_t>(r) * columns * 3;
    for (int32_t i = 0; i < columns; ++i) {
      const int32_t* k = &axis.weights[static_cast<size_t>(i) * axis.taps];
      const uint8_t* src = row + static_cast<size_t>(axis.first[i]) * 3;
      int32_t red = kHalf, green = kHalf, blue = kHalf;
      for (int32_t t = 0; t < axis.count[i]; ++t, src += 3) {
        red += src[0] * k[t];
        green += src[1] * k[t];
        blue += src[2] * k[t];
      }
      dst[i * 3 + 0] = Clip8(red);
      dst[i * 3 + 1] = Clip8(green);
      dst[i * 3 + 2] = Clip8(blue);
    }
  }
}

// Vertical pass: output row i of the weights' range reads rows axis.first[i] - row_offset ...
// of `in`, `columns` pixels each. Row by row, so the inner loop runs over contiguous bytes.
void ResampleColumns(Plane in, int32_t row_offset, int32_t columns, const AxisWeights& axis,
                     uint8_t* out) {
  const size_t row_values = static_cast<size_t>(columns) * 3;
  std::vector<int32_t> sums(row_values);
  for (size_t i = 0; i < axis.first.size(); ++i) {
    std::fill(sums.begin(), sums.end(), kHalf);
    const int32_t* k = &axis.weights[i * axis.taps];
    for (int32_t t = 0; t < axis.count[i]; ++t) {
      const uint8_t* src = in.data + (axis.first[i] - row_offset + t) * in.stride;
      const int32_t weight = k[t];
      for (size_t v = 0; v < row_values; ++v) sums[v] += src[v] * weight;
    }
    uint8_t* dst = out + i * row_values;
    for (size_t v = 0; v < row_values; ++v) dst[v] = Clip8(sums[v]);
  }
}

}  // namespace

Status ResizeWindow(const DecodedImage& image, int32_t resized_width, int32_t resized_height,
                    ResampleFilter filter, const PixelWindow& window, std::span<uint8_t> out) {
  if (image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(image.width) * image.height * 3) {
    return Status::InvalidArgument("resize: the image is empty or its pixel buffer (" +
                                   std::to_string(image.rgb.size()) + " bytes) is not " +
                                   std::to_string(image.width) + " x " +
                                   std::to_string(image.height) + " x 3");
  }
  if (resized_width <= 0 || resized_height <= 0) {
    return Status::InvalidArgument("resize: target size " + std::to_string(resized_width) + " x " +
                                   std::to_string(resized_height) + " is empty");
  }
  if (window.width <= 0 || window.height <= 0 || window.x < 0 || window.y < 0 ||
      window.x > resized_width - window.width || window.y > resized_height - window.height) {
    return Status::InvalidArgument("resize: window " + std::to_string(window.width) + " x " +
                                   std::to_string(window.height) + " at (" +
                                   std::to_string(window.x) + ", " + std::to_string(window.y) +
                                   ") is not inside the resized " + std::to_string(resized_width) +
                                   " x " + std::to_string(resized_height) + " image");
  }
  const size_t out_row_bytes = static_cast<size_t>(window.width) * 3;
  if (out.size() != out_row_bytes * window.height) {
    return Status::InvalidArgument("resize: output buffer has " + std::to_string(out.size()) +
                                   " bytes, the window needs " +
                                   std::to_string(out_row_bytes * window.height));
  }

  const Plane input{image.rgb.data(), static_cast<size_t>(image.width) * 3};
  const bool horizontal = resized_width != image.width;
  const bool vertical = resized_height != image.height;

  AxisWeights rows;              // Vertical weights, for the window's rows.
  int32_t row_begin = window.y;  // Input rows the vertical pass reads (or the window's own).
  int32_t row_end = window.y + window.height;
  if (vertical) {
    rows = ComputeAxisWeights(image.height, resized_height, window.y, window.height, filter);
    row_begin = rows.first.front();
    row_end = rows.first.back() + rows.count.back();  // Both increase with the output row.
  }

  // The horizontal pass (or, without one, the input's window columns) for rows
  // [row_begin, row_end).
  std::vector<uint8_t> intermediate;
  Plane columns{input.data + row_begin * input.stride + static_cast<size_t>(window.x) * 3,
                input.stride};
  if (horizontal) {
    const AxisWeights axis =
        ComputeAxisWeights(image.width, resized_width, window.x, window.width, filter);
    intermediate.resize(out_row_bytes * (row_end - row_begin));
    ResampleRows(Plane{input.data + row_begin * input.stride, input.stride}, row_end - row_begin,
                 axis, intermediate.data());
    columns = Plane{intermediate.data(), out_row_bytes};
  }

  if (vertical) {
    ResampleColumns(columns, row_begin, window.width, rows, out.data());
  } else {
    for (int32_t y = 0; y < window.height; ++y) {
      std::memcpy(out.data() + y * out_row_bytes, columns.data + y * columns.stride, out_row_bytes);
    }
  }
  return Status::Ok();
}

}  // namespace tailcut
