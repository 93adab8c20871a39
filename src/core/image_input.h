// ImageInput: the image input of a tensor model that takes encoded images (model.yaml
// `image`, ModelConfig::image). It turns a BYTES tensor of JPEG or PNG images, one a row,
// into the FP32 tensor the model takes: each image decoded, resized, centre-cropped and
// normalised as the model was evaluated (image/image_preprocess.h), into its row. It runs on
// the request's thread (a work-pool thread, never an IO thread) before the request is queued,
// so a bad image is a 400 that costs the batch nothing.
//
// Thread-safety: immutable after Create(); Convert() from any number of threads.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "engine/model_config.h"
#include "engine/tensor.h"
#include "image/image_decoder.h"
#include "image/image_preprocess.h"

namespace tailcut {

class ImageInput {
 public:
  // Checks `config` against the model's inputs: the named input (or the only one) must be an
  // FP32 tensor of rank 4 whose fixed dimensions agree with the crop and the layout.
  static Result<std::unique_ptr<ImageInput>> Create(const ImageConfig& config,
                                                    const std::vector<TensorSpec>& model_inputs,
                                                    const std::string& model_name);

  const std::string& input_name() const { return input_name_; }

  // Replaces `tensor` (BYTES of shape [n] or [n, 1], named input_name()) with the model's
  // FP32 input [n, 3, h, w] (or [n, h, w, 3]). InvalidArgument naming the image and the
  // problem (not an image, truncated, too large, ...); `tensor` is unchanged then.
  Status Convert(Tensor* tensor) const;

 private:
  ImageInput() = default;

  std::string input_name_;
  ImageDecodeLimits limits_;
  ImagePreprocessOptions preprocess_;
};

}  // namespace tailcut
