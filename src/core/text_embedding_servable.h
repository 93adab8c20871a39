// TextEmbeddingServable: a text-embedding model being served: its precision variants (each a
// loaded, warmed TextEmbeddingModel sharing the one ONNX Runtime thread pool), its batch
// queue and worker, and the request path in front of them:
//
//   caller thread: validate -> tokenise -> queue each input as an item   (Embed)
//   worker thread: form batch -> pad -> run the variant -> fill job rows (ProcessBatch)
//
// Thread-safety: Embed() and Describe() are safe from any thread; Stop() once, at shutdown.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/batch_scheduler.h"
#include "core/inference_api.h"
#include "core/servable_metrics.h"
#include "engine/model_config.h"
#include "engine/text_embedding_model.h"

namespace tailcut {

struct TextServableOptions {
  BatchSchedulerOptions scheduler;
  // Deadline for requests that bring none, from their arrival. Requests still queued when it
  // passes are answered 504 without running; 0 = no deadline.
  int64_t default_timeout_micros = 30'000'000;
  // Most inputs (texts) in one request; more is a 413.
  size_t max_inputs_per_request = 2048;
};

class TextEmbeddingServable {
 public:
  static Result<std::unique_ptr<TextEmbeddingServable>> Load(const ModelConfig& config,
                                                             const OnnxSessionOptions& session,
                                                             const TextServableOptions& options,
                                                             const ServableMetrics& metrics,
                                                             const Clock& clock);
  ~TextEmbeddingServable();

  void Embed(EmbedRequest request, EmbedCallback done);
  ModelDescription Describe() const;
  // Stops the worker; with drain, queued items still run.
  void Stop(bool drain);

  const ModelConfig& config() const { return config_; }
  int64_t queued_rows() const { return scheduler_->queued_rows(); }

 private:
  struct Variant {
    std::string name;
    std::unique_ptr<TextEmbeddingModel> model;
  };

  TextEmbeddingServable(const ModelConfig& config, const TextServableOptions& options,
                        const ServableMetrics& metrics, const Clock& clock);
  void ProcessBatch(Batch&& batch);
  // Index of the variant a request runs on (the pin, else the active one), or an error
  // naming the available variants.
  Result<int> ChooseVariant(const std::string& precision) const;

  const ModelConfig config_;
  const TextServableOptions options_;
  const ServableMetrics metrics_;
  const Clock& clock_;
  std::vector<Variant> variants_;
  int active_variant_ = 0;
  std::unique_ptr<BatchScheduler> scheduler_;
};

}  // namespace tailcut
