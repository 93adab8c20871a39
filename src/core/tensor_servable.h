// TensorServable: any ONNX model served over KServe v2 with JSON tensors. Requests are
// batched along the first axis when the model leaves it free: requests whose other
// dimensions and datatypes agree are concatenated, run once, and the outputs split back by
// rows. Models with a fixed first axis run one request at a time, and so does a batch whose
// outputs turn out not to have the batch's rows on their first axis (they cannot be split).
// A free first axis is taken to mean independent rows: a model that mixes rows (statistics
// over the batch) must set max_batch_size: 1 in its model.yaml.
//
// An image model (model.yaml `image`) also takes its image input as encoded images, decoded
// into the input tensor on the caller's thread before queueing (core/image_input.h), and any
// model answers KServe's classification extension on a score output (core/classification.h),
// naming classes from its labels file.
//
// Thread-safety: Infer() and Describe() are safe from any thread; Stop() once, at shutdown.
#pragma once

#include <memory>

#include "core/batch_scheduler.h"
#include "core/image_input.h"
#include "core/inference_api.h"
#include "core/servable.h"
#include "core/servable_metrics.h"
#include "engine/model_config.h"
#include "engine/onnx_session.h"

namespace tailcut {

struct TensorServableOptions {
  // With admission by time on, as for text models: without it an image model offered 1.27x
  // its capacity queued up to the row bound (1,024 decoded images: 740 MB, P99 2 s) instead
  // of answering the excess with 429s. With the batch time cut-off too: on one-thread
  // workers (the default layout) a batch of 32 photos ran ~300 ms, and at 160 img/s P99 was
  // 1.2 s where the time cut-off keeps it near that of one image per batch.
  BatchSchedulerOptions scheduler = [] {
    BatchSchedulerOptions o;
    o.max_queue_delay_micros = kDefaultMaxQueueDelayMicros;
    o.max_batch_micros = kDefaultMaxBatchMicros;
    return o;
  }();
  // Deadline for requests that bring none; 0 = none.
  int64_t default_timeout_micros = 30'000'000;
};

class TensorServable final : public Servable {
 public:
  static Result<std::unique_ptr<TensorServable>> Load(const ModelConfig& config,
                                                      const OnnxSessionOptions& session,
                                                      const TensorServableOptions& options,
                                                      const ServableMetrics& metrics,
                                                      const Clock& clock);
  ~TensorServable() override;

  void Infer(TensorRequest request, TensorCallback done);
  ModelDescription Describe() const override;
  void Stop(bool drain) override;
  int64_t queued_rows() const override { return scheduler_->queued_rows(); }

 private:
  TensorServable(const ModelConfig& config, const ServableMetrics& metrics, const Clock& clock,
                 const TensorServableOptions& options);
  void ProcessBatch(Batch&& batch);
  // Replaces the outputs `request` asked to classify by their top classes.
  Status ClassifyOutputs(const TensorRequest& request, TensorResult* result) const;

  const ModelConfig config_;
  const ServableMetrics metrics_;
  const Clock& clock_;
  const TensorServableOptions options_;
  std::unique_ptr<OnnxSession> session_;
  bool batchable_ = false;  // Every input and output has a free first axis.
  std::unique_ptr<ImageInput> image_input_;  // Null unless the model takes images.
  std::vector<std::string> labels_;          // Class names; empty = none.
  std::unique_ptr<BatchScheduler> scheduler_;
};

}  // namespace tailcut
