#include "server/model_request_stats.h"

namespace tailcut {

void ModelRequestStats::AtomicDuration::Add(int64_t micros) {
  count.fetch_add(1, std::memory_order_relaxed);
  ns.fetch_add(micros * 1000, std::memory_order_relaxed);
}

ModelRequestStats::Duration ModelRequestStats::AtomicDuration::Load() const {
  return {count.load(std::memory_order_relaxed), ns.load(std::memory_order_relaxed)};
}

void ModelRequestStats::Record(bool ok, const StageTimings& timings, int64_t unix_millis) {
  if (!ok) {
    fail_.Add(timings.total_micros);
    return;
  }
  success_.Add(timings.total_micros);
  queue_.Add(timings.queue_micros);
  compute_input_.Add(timings.tokenize_micros + timings.preprocess_micros + timings.batch_micros);
  // A generation's model time is its prefill and decode; an embedding's, its batch's run.
  compute_infer_.Add(timings.infer_micros + timings.prefill_micros + timings.decode_micros);
  compute_output_.Add(timings.serialize_micros);
  last_unix_millis_.store(unix_millis, std::memory_order_relaxed);
}

ModelRequestStats::Totals ModelRequestStats::Snapshot() const {
  Totals t;
  t.success = success_.Load();
  t.fail = fail_.Load();
  t.queue = queue_.Load();
  t.compute_input = compute_input_.Load();
  t.compute_infer = compute_infer_.Load();
  t.compute_output = compute_output_.Load();
  t.last_inference_unix_millis = last_unix_millis_.load(std::memory_order_relaxed);
  return t;
}

}  // namespace tailcut
