// Servable: one loaded model as the inference service's registry holds it, whatever its kind
// (TextEmbeddingServable, TensorServable, GenerativeServable). The registry loads, describes,
// reloads and stops every model through this interface; each kind's request method (Embed,
// Infer, Generate) lives on its own class, which the service reaches after checking the
// model's kind.
//
// Thread-safety: Describe() and queued_rows() are safe from any thread; Stop() once.
#pragma once

#include <cstdint>
#include <string>

#include "core/inference_api.h"

namespace tailcut {

class Servable {
 public:
  virtual ~Servable() = default;

  virtual ModelDescription Describe() const = 0;
  // Work accepted but not started: rows in the batch queue, or generation requests waiting
  // for admission (the tailcut_queue_rows gauge).
  virtual int64_t queued_rows() const = 0;
  // Refuses new work, then ends what was accepted: run to completion with drain, failed with
  // kUnavailable without. Returns once nothing of it refers to the servable any more.
  virtual void Stop(bool drain) = 0;
  // Pins the variant that serves requests which pin none (the admin route), or gives the
  // choice back to the precision controller when `name` is empty. InvalidArgument naming the
  // variants when `name` is none of them.
  virtual Status SetActiveVariant(const std::string& name) = 0;
};

}  // namespace tailcut
