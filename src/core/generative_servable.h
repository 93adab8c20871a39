// GenerativeServable: a generative model (kind: generative, GGUF files) as the inference
// service serves it: one loaded GenerativeModel and one GenerationScheduler (step loop) per
// precision variant, and the choice of variant per request (GenerationPrecision): the
// request's pin, else the one the precision controller keeps active. The model.yaml
// generation options become each variant's model and scheduler options here.
//
// One engine context and step loop per variant, not one loop switching weights: a sequence
// runs wholly on the variant chosen at admission (its KV cells are that context's), so a
// controller switch never touches a running sequence, only where the next requests go, and
// the variants' steps interleave on the cores as two models' would. Memory: each variant
// maps its GGUF file and allocates its own KV cache (context_tokens cells) and compute
// buffers. Measured (tailcut serve, SmolLM2-135M, context_tokens 2048, 8 sequences, after one
// request on each variant): Q4_1 alone 197 MB resident (117 file-backed, 80 anonymous);
// Q4_1 + Q8_0 403 MB (257 file-backed, 146 anonymous): the Q8_0 variant costs about 206 MB.
//
// The controller thread ticks every precision.interval_millis with the step loops' token
// counts (GenerationSchedulerStats) and switches the active variant with the controller's
// hysteresis and dwell; tailcut_precision_active / _switches_total and
// tailcut_generation_requests_total{variant} report it.
//
// Thread-safety: Admit(), Generate(), Describe(), SetActiveVariant() and queued_rows() are
// safe from any thread; Stop() once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/in_flight_gate.h"
#include "core/generation_metrics.h"
#include "core/generation_precision.h"
#include "core/generation_scheduler.h"
#include "core/servable.h"
#include "engine/generative_model.h"
#include "engine/model_config.h"

namespace tailcut {

struct GenerativeServableOptions {
  // Deadline for generation requests that bring none; 0 = none (max_tokens and the context
  // bound them).
  int64_t default_timeout_millis = 0;
  // Whether Load() starts the controller thread (tests drive ControllerTick() by hand with a
  // ManualClock instead).
  bool start_controller_thread = true;
};

class GenerativeServable final : public Servable {
 public:
  // Loads every variant's GGUF file with config.generation's options and starts their step
  // loops. A variant that fails to load is reported (Describe()) while the others serve;
  // the load fails when the default variant does. kInvalidArgument names an option out of
  // range.
  static Result<std::unique_ptr<GenerativeServable>> Load(const ModelConfig& config,
                                                          const GenerativeServableOptions& options,
                                                          const GenerationMetrics& metrics,
                                                          const Clock& clock);
  ~GenerativeServable() override;  // Stop(false) unless stopped.

  // A pass for one request, or null once Stop() has begun; taken under the lock a reload
  // swaps the servable under, so a request either reaches this copy's queue before it
  // drains or sees the new copy.
  InFlightGate::Pass Admit() { return gate_.Enter(); }
  // Chooses the variant (request.precision, else the active one; an unknown pin is
  // kInvalidArgument naming the variants), tokenises on this thread and queues on that
  // variant's step loop (GenerationScheduler::Generate). `pass` from Admit().
  void Generate(GenerateRequest request, GenerationSinkPtr sink, InFlightGate::Pass pass);

  ModelDescription Describe() const override;
  int64_t queued_rows() const override;
  // Closes the gate, waits for the Generate() calls already past it to queue their request,
  // then stops the controller and the step loops (GenerationScheduler::Stop).
  void Stop(bool drain) override;
  // Pins the variant of requests that pin none (admin), disabling the controller until
  // `name` is empty again. InvalidArgument naming the variants if unknown.
  Status SetActiveVariant(const std::string& name) override;
  // One controller evaluation (the controller thread's; public for tests).
  void ControllerTick();

  // The default variant's step loop.
  GenerationSchedulerStats stats() const;
  // The variant unpinned requests go to now.
  std::string active_variant() const;

 private:
  struct Variant {
    VariantConfig config;
    std::string digest;  // Of the GGUF file.
    std::string error;   // Why it failed to load.
    std::unique_ptr<GenerativeModel> model;
    std::unique_ptr<GenerationScheduler> scheduler;  // After model: stopped and freed first.
    // tailcut_generation_requests_total{chosen="request"|"server"}, looked up once at load
    // rather than per request; null without metrics.
    Counter* pinned_requests = nullptr;
    Counter* server_requests = nullptr;
  };

  GenerativeServable(const ModelConfig& config, const GenerationMetrics& metrics);
  int Active() const;
  void SetActive(int index, const std::string& reason);
  void ControllerLoop();

  const ModelConfig config_;
  const GenerationMetrics metrics_;  // The schedulers' options point here.
  std::vector<std::unique_ptr<Variant>> variants_;
  int default_index_ = 0;
  std::unique_ptr<GenerationPrecision> precision_;
  std::atomic<int> admin_pin_{-1};  // A variant index pinned by SetActiveVariant, or -1.
  std::atomic<int> reported_active_{-1};  // What tailcut_precision_active says.
  std::atomic<int64_t> switches_{0};

  std::mutex controller_mu_;
  std::condition_variable controller_wake_;
  bool controller_stop_ = false;
  std::thread controller_thread_;

  InFlightGate gate_;
  std::mutex stop_mu_;
  bool stopped_ = false;
};

}  // namespace tailcut
