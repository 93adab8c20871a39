#include "core/image_input.h"

#include <span>
#include <utility>

namespace tailcut {

Result<std::unique_ptr<ImageInput>> ImageInput::Create(const ImageConfig& config,
                                                       const std::vector<TensorSpec>& model_inputs,
                                                       const std::string& model_name) {
  const std::string where = "model '" + model_name + "': image";
  const TensorSpec* spec = nullptr;
  if (config.input.empty()) {
    if (model_inputs.size() != 1) {
      return Status::InvalidArgument(where + ": the model has " +
                                     std::to_string(model_inputs.size()) +
                                     " inputs; name the one that takes images (image.input)");
    }
    spec = &model_inputs.front();
  } else {
    for (const TensorSpec& s : model_inputs) {
      if (s.name == config.input) spec = &s;
    }
    if (spec == nullptr) {
      return Status::InvalidArgument(where + ".input '" + config.input +
                                     "' is not an input of the model");
    }
  }
  const bool nchw = config.layout == "nchw";
  // The image's place in the input's shape: [batch, 3, h, w] or [batch, h, w, 3].
  const Shape want = nchw ? Shape{-1, 3, config.crop_height_pixels, config.crop_width_pixels}
                          : Shape{-1, config.crop_height_pixels, config.crop_width_pixels, 3};
  bool fits = spec->type == DataType::kFp32 && spec->shape.size() == 4;
  for (size_t d = 1; fits && d < 4; ++d) fits = spec->shape[d] < 0 || spec->shape[d] == want[d];
  if (!fits) {
    return Status::InvalidArgument(
        where + ": input '" + spec->name + "' is " + std::string(DataTypeName(spec->type)) + " " +
        ShapeToString(spec->shape) + ", but the image settings (" + config.layout + ", crop " +
        std::to_string(config.crop_width_pixels) + "x" + std::to_string(config.crop_height_pixels) +
        ") make FP32 " + ShapeToString(want));
  }
  std::unique_ptr<ImageInput> in(new ImageInput());
  in->input_name_ = spec->name;
  in->limits_.max_pixels = config.max_pixels;
  ImagePreprocessOptions& p = in->preprocess_;
  p.resize_shorter_side_pixels = config.resize_shorter_side_pixels;
  p.crop_width_pixels = config.crop_width_pixels;
  p.crop_height_pixels = config.crop_height_pixels;
  p.mean = config.mean;
  p.stddev = config.std;
  p.layout = nchw ? ImagePreprocessOptions::Layout::kNchw : ImagePreprocessOptions::Layout::kNhwc;
  p.filter = config.filter == "bilinear" ? ResampleFilter::kBilinear : ResampleFilter::kBicubic;
  return in;
}

Status ImageInput::Convert(Tensor* tensor) const {
  const std::string where = "input '" + input_name_ + "'";
  const Shape& shape = tensor->shape;
  if (shape.empty() || shape.size() > 2 || (shape.size() == 2 && shape[1] != 1)) {
    return Status::InvalidArgument(where +
                                   ": encoded images come as BYTES of shape [n] or [n, 1]"
                                   " (one image a row), got " +
                                   ShapeToString(shape));
  }
  const auto n = static_cast<int64_t>(tensor->elements.size());
  if (n == 0) return Status::InvalidArgument(where + " holds no image");
  const size_t row = 3 * static_cast<size_t>(preprocess_.crop_width_pixels) *
                     static_cast<size_t>(preprocess_.crop_height_pixels);
  Tensor out;
  out.name = tensor->name;
  out.type = DataType::kFp32;
  out.shape = preprocess_.layout == ImagePreprocessOptions::Layout::kNchw
                  ? Shape{n, 3, preprocess_.crop_height_pixels, preprocess_.crop_width_pixels}
                  : Shape{n, preprocess_.crop_height_pixels, preprocess_.crop_width_pixels, 3};
  out.data.resize(static_cast<size_t>(n) * row * sizeof(float));
  auto* rows = reinterpret_cast<float*>(out.data.data());
  for (int64_t i = 0; i < n; ++i) {
    const std::string& encoded = tensor->elements[static_cast<size_t>(i)];
    const std::string which = where + ", image " + std::to_string(i) +
                              (n > 1 ? " of " + std::to_string(n) : std::string()) + ": ";
    auto image =
        DecodeImage(std::span<const std::byte>(reinterpret_cast<const std::byte*>(encoded.data()),
                                               encoded.size()),
                    limits_);
    if (!image.ok()) return Status::InvalidArgument(which + image.status().message());
    const Status s = PreprocessImage(*image, preprocess_,
                                     std::span<float>(rows + static_cast<size_t>(i) * row, row));
    if (!s.ok()) return Status::InvalidArgument(which + s.message());
  }
  *tensor = std::move(out);
  return Status::Ok();
}

}  // namespace tailcut
