// TensorServable: any ONNX model served over KServe v2 with JSON tensors. Requests are
// batched along the first axis when the model leaves it free: requests whose other
// dimensions and datatypes agree are concatenated, run once, and the outputs split back by
// rows. Models with a fixed first axis run one request at a time, and so does a batch whose
// outputs turn out not to have the batch's rows on their first axis (they cannot be split).
// A free first axis is taken to mean independent rows: a model that mixes rows (statistics
// over the batch) must set max_batch_size: 1 in its model.yaml.
//
// A model.yaml may list precision variants (tools/quantize_image_model.py writes FP16 and
// INT8 ones for the image model): each is loaded as its own session; a request pins one with
// the KServe parameter `precision`, the others run on the active variant, which the precision
// controller moves by load (core/variant_selector.h), and every answer names its variant.
// Requests on different variants never share a batch.
//
// An image model (model.yaml `image`) also takes its image input as encoded images, decoded
// into the input tensor on the caller's thread before queueing (core/image_input.h), and any
// model answers KServe's classification extension on a score output (core/classification.h),
// naming classes from its labels file.
//
// Thread-safety: Infer(), Describe() and SetActiveVariant() are safe from any thread; Stop()
// once, at shutdown.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "core/batch_scheduler.h"
#include "core/image_input.h"
#include "core/inference_api.h"
#include "core/latency_window.h"
#include "core/precision_controller.h"
#include "core/servable.h"
#include "core/servable_metrics.h"
#include "core/variant_selector.h"
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
  // Which variant serves requests that pin none, under load (precision_controller.h); the
  // server's precision.* settings, as for text models. A classifier's variant qualifies by its
  // measured top-1 agreement with fp32 (variant_eligibility.h).
  PrecisionPolicy precision;
  // How often the controller looks at the load signals, and the window they cover.
  int64_t precision_interval_micros = 1'000'000;
  int precision_window_seconds = 10;
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
  // Pins the variant for requests that pin none (admin); empty gives it back to the
  // controller. InvalidArgument naming the variants if unknown.
  Status SetActiveVariant(const std::string& name) override;
  int64_t queued_rows() const override { return scheduler_->queued_rows(); }

 private:
  TensorServable(const ModelConfig& config, const ServableMetrics& metrics, const Clock& clock,
                 const TensorServableOptions& options);
  struct Variant {
    std::unique_ptr<OnnxSession> session;  // Null when loading failed.
    std::string error;
    // Exponentially weighted inference time per row, nanoseconds; 0 until it has run. The
    // controller's estimate of how much slower the accurate variant is.
    std::atomic<int64_t> nanos_per_row{0};
  };

  void ProcessBatch(Batch&& batch);
  // Replaces the outputs `request` asked to classify by their top classes.
  Status ClassifyOutputs(const TensorRequest& request, TensorResult* result) const;
  // The controller thread: one LoadSignals a precision interval, until Stop().
  void ControllerLoop();
  void StopController();

  const ModelConfig config_;
  const ServableMetrics metrics_;
  const Clock& clock_;
  const TensorServableOptions options_;
  std::vector<std::unique_ptr<Variant>> variants_;  // Index-aligned with config_.variants.
  // The default variant's session (else the first loaded one): inputs, outputs, validation.
  // Every variant of a model takes and gives the same tensors.
  const OnnxSession* session_ = nullptr;
  std::unique_ptr<VariantSelector> selector_;
  LatencyWindow latency_;
  std::atomic<int64_t> busy_micros_{0};  // Worker time spent in batches, ever.
  std::mutex controller_mutex_;
  std::condition_variable controller_wake_;
  bool controller_stop_ = false;  // Guarded by controller_mutex_.
  std::thread controller_thread_;
  bool batchable_ = false;  // Every input and output has a free first axis.
  std::unique_ptr<ImageInput> image_input_;  // Null unless the model takes images.
  std::vector<std::string> labels_;          // Class names; empty = none.
  std::unique_ptr<BatchScheduler> scheduler_;
};

}  // namespace tailcut
