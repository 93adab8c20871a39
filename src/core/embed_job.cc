#include "core/embed_job.h"

#include <algorithm>
#include <cstring>

#include "engine/text_embedding_model.h"

namespace tailcut {

EmbedJob::EmbedJob(EmbedResult result, size_t pending, bool normalize, EmbedCallback done)
    : result_(std::move(result)),
      pending_(pending),
      normalize_(normalize),
      done_(std::move(done)) {}

void EmbedJob::SetRow(size_t index, std::span<const float> row) {
  std::memcpy(result_.embeddings.data() + index * result_.dimensions, row.data(),
              row.size() * sizeof(float));
}

void EmbedJob::CompleteItem(size_t index, std::span<const float> row, int64_t queue_micros,
                            int64_t batch_micros, int64_t infer_micros) {
  if (finished()) return;
  if (on_row_) on_row_(index, row);
  float* dst = result_.embeddings.data() + index * result_.dimensions;
  std::memcpy(dst, row.data(), row.size() * sizeof(float));
  if (normalize_) NormalizeL2(std::span<float>(dst, row.size()));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& t = result_.timings;
    t.queue_micros = std::max(t.queue_micros, queue_micros);
    t.batch_micros = std::max(t.batch_micros, batch_micros);
    t.infer_micros = std::max(t.infer_micros, infer_micros);
  }
  // acq_rel: the last finisher must see every other worker's row writes.
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
}

void EmbedJob::Fail(const Status& status) {
  if (finished_.exchange(true, std::memory_order_acq_rel)) return;
  done_(status);
}

void EmbedJob::FinishIfComplete() {
  if (pending_.load(std::memory_order_acquire) == 0) Finish();
}

void EmbedJob::Finish() {
  if (finished_.exchange(true, std::memory_order_acq_rel)) return;
  done_(std::move(result_));
}

}  // namespace tailcut
