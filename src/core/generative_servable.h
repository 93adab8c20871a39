// GenerativeServable: a generative model (kind: generative, a GGUF file) as the inference
// service serves it: the loaded GenerativeModel and the GenerationScheduler whose step loop
// drives it. The model.yaml generation options become the model's and the scheduler's options
// here.
//
// Thread-safety: Admit(), Generate(), Describe() and queued_rows() are safe from any thread;
// Stop() once.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/in_flight_gate.h"
#include "core/generation_metrics.h"
#include "core/generation_scheduler.h"
#include "core/servable.h"
#include "engine/generative_model.h"
#include "engine/model_config.h"

namespace tailcut {

struct GenerativeServableOptions {
  // Deadline for generation requests that bring none; 0 = none (max_tokens and the context
  // bound them).
  int64_t default_timeout_millis = 0;
};

class GenerativeServable final : public Servable {
 public:
  // Loads the GGUF file (config.file_path) with config.generation's options and starts the
  // step loop. kInvalidArgument names an option out of range.
  static Result<std::unique_ptr<GenerativeServable>> Load(const ModelConfig& config,
                                                          const GenerativeServableOptions& options,
                                                          const GenerationMetrics& metrics,
                                                          const Clock& clock);
  ~GenerativeServable() override;  // Stop(false) unless stopped.

  // A pass for one request, or null once Stop() has begun; taken under the lock a reload
  // swaps the servable under, so a request either reaches this copy's queue before it
  // drains or sees the new copy.
  InFlightGate::Pass Admit() { return gate_.Enter(); }
  // Tokenises on this thread and queues (GenerationScheduler::Generate). `pass` from Admit().
  void Generate(GenerateRequest request, GenerationSinkPtr sink, InFlightGate::Pass pass);

  ModelDescription Describe() const override;
  int64_t queued_rows() const override { return scheduler_->stats().waiting; }
  // Closes the gate, waits for the Generate() calls already past it to queue their request,
  // then stops the scheduler (GenerationScheduler::Stop).
  void Stop(bool drain) override;

  GenerationSchedulerStats stats() const { return scheduler_->stats(); }

 private:
  GenerativeServable(const ModelConfig& config, std::string digest,
                     std::unique_ptr<GenerativeModel> model, const GenerationMetrics& metrics);

  const ModelConfig config_;
  const std::string digest_;  // Of the GGUF file: the model's version.
  const GenerationMetrics metrics_;  // The scheduler's options point here.
  std::unique_ptr<GenerativeModel> model_;
  std::unique_ptr<GenerationScheduler> scheduler_;  // After model_: stopped and freed first.
  InFlightGate gate_;
  std::mutex stop_mu_;
  bool stopped_ = false;
};

}  // namespace tailcut
