// ModelRequestStats: one served model's answered inference requests, over every front-end
// (OpenAI, TEI, KServe), with the time their stages took: what KServe / Triton's statistics
// extension (GET /v2/models/{m}/stats) reports. Prometheus has the same figures as
// histograms; these are the running totals Triton's clients read.
//
// Thread-safety: Record() and Snapshot() are safe from any thread (relaxed atomics: a
// snapshot may see one request's counters half-added, as Triton's may).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/stage_timings.h"

namespace tailcut {

class ModelRequestStats {
 public:
  // A count and the total time of what it counts, in nanoseconds (Triton's StatisticDuration).
  struct Duration {
    int64_t count = 0;
    int64_t ns = 0;
  };
  struct Totals {
    Duration success;  // Answered 2xx: from the request read to the response ready.
    Duration fail;     // Answered with an error.
    // Of the successful ones, the stages (Triton's names): waiting in the batch queue;
    // tokenising and filling the batch's padded inputs; the model run; writing the answer.
    Duration queue, compute_input, compute_infer, compute_output;
    int64_t last_inference_unix_millis = 0;  // Wall clock of the last success; 0 = none.
  };

  // One answered request; `timings.total_micros` is its whole time.
  void Record(bool ok, const StageTimings& timings, int64_t unix_millis);
  Totals Snapshot() const;

 private:
  struct AtomicDuration {
    std::atomic<int64_t> count{0};
    std::atomic<int64_t> ns{0};
    void Add(int64_t micros);
    Duration Load() const;
  };
  AtomicDuration success_, fail_, queue_, compute_input_, compute_infer_, compute_output_;
  std::atomic<int64_t> last_unix_millis_{0};
};

}  // namespace tailcut
