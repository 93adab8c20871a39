#include "core/batch_queue.h"

#include <algorithm>

namespace tailcut {

BatchQueue::BatchQueue(const BatchQueueOptions& options, const Clock& clock)
    : options_(options), clock_(clock) {}

Status BatchQueue::CheckAdmission(int64_t rows) const {
  // Only the request's first batch counts against the bound: the rest of a large request
  // waits behind nothing but itself, and counting it would refuse such a request for as
  // long as anything at all is queued. An empty queue takes anything: slow, not impossible.
  const int64_t first_batch =
      options_.max_batch_size > 0 ? std::min(rows, options_.max_batch_size) : rows;
  if (!tasks_.empty() && queued_rows_ + first_batch > options_.max_enqueued_rows) {
    return Status::ResourceExhausted("queue full: " + std::to_string(queued_rows_) + " of " +
                                     std::to_string(options_.max_enqueued_rows) +
                                     " rows queued, request needs " + std::to_string(rows));
  }
  return Status::Ok();
}

void BatchQueue::Push(std::unique_ptr<BatchTask> task) {
  queued_rows_ += task->rows();
  queued_tokens_ += task->rows() * task->length();
  tasks_.push_back(std::move(task));
}

Status BatchQueue::Enqueue(std::unique_ptr<BatchTask>& task) {
  Status admitted = CheckAdmission(task->rows());
  if (admitted.ok()) Push(std::move(task));
  return admitted;
}

bool BatchQueue::ReadyToForm(int64_t max_batch_tokens) const {
  if (tasks_.empty()) return false;
  if (queued_rows_ >= options_.max_batch_size) return true;
  if (max_batch_tokens > 0 && queued_tokens_ >= max_batch_tokens) return true;
  return clock_.NowMicros() >=
         tasks_.front()->enqueue_time_micros() + options_.batch_timeout_micros;
}

std::optional<int64_t> BatchQueue::NextReadyTimeMicros(int64_t max_batch_tokens) const {
  if (tasks_.empty()) return std::nullopt;
  if (ReadyToForm(max_batch_tokens)) return clock_.NowMicros();
  return tasks_.front()->enqueue_time_micros() + options_.batch_timeout_micros;
}

void BatchQueue::RemoveExpired(int64_t expected_batch_micros,
                               std::vector<std::unique_ptr<BatchTask>>* expired,
                               std::vector<std::unique_ptr<BatchTask>>* abandoned) {
  const int64_t finish_by = clock_.NowMicros() + expected_batch_micros;
  auto keep = tasks_.begin();
  for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
    const int64_t deadline = (*it)->deadline_micros();
    const bool late = deadline > 0 && deadline < finish_by;
    const bool ended = !late && abandoned && (*it)->abandoned();
    if (late || ended) {
      queued_rows_ -= (*it)->rows();
      queued_tokens_ -= (*it)->rows() * (*it)->length();
      (late ? expired : abandoned)->push_back(std::move(*it));
    } else {
      if (keep != it) *keep = std::move(*it);
      ++keep;
    }
  }
  tasks_.erase(keep, tasks_.end());
}

Batch BatchQueue::FormBatch(int64_t max_batch_tokens) {
  Batch batch;
  batch.formed_at_micros = clock_.NowMicros();
  if (tasks_.empty()) return batch;

  std::unique_ptr<BatchTask> anchor = std::move(tasks_.front());
  tasks_.pop_front();
  const uint64_t key = anchor->batch_key();
  const int64_t anchor_length = anchor->length();
  batch.rows = anchor->rows();
  batch.max_length = anchor_length;
  batch.tasks.push_back(std::move(anchor));

  // Candidates: compatible tasks in the window, nearest length first, oldest first on ties.
  struct Candidate {
    size_t index;
    int64_t distance;
  };
  std::vector<Candidate> candidates;
  const size_t window =
      std::min(tasks_.size(), static_cast<size_t>(std::max<int64_t>(0, options_.grouping_window)));
  if (batch.rows < options_.max_batch_size) {
    for (size_t i = 0; i < window; ++i) {
      if (tasks_[i]->batch_key() != key) continue;
      const int64_t d = tasks_[i]->length() - anchor_length;
      candidates.push_back({i, d < 0 ? -d : d});
    }
    std::stable_sort(
        candidates.begin(), candidates.end(),
        [](const Candidate& a, const Candidate& b) { return a.distance < b.distance; });
  }

  std::vector<size_t> chosen;
  for (const Candidate& c : candidates) {
    if (batch.rows >= options_.max_batch_size) break;
    const BatchTask& t = *tasks_[c.index];
    const int64_t rows = batch.rows + t.rows();
    const int64_t length = std::max(batch.max_length, t.length());
    if (rows > options_.max_batch_size) continue;
    if (max_batch_tokens > 0 && rows * length > max_batch_tokens) continue;
    batch.rows = rows;
    batch.max_length = length;
    chosen.push_back(c.index);
  }

  // Move the chosen tasks out in queue order, then close the gaps.
  std::sort(chosen.begin(), chosen.end());
  for (size_t index : chosen) batch.tasks.push_back(std::move(tasks_[index]));
  if (!chosen.empty()) {
    tasks_.erase(std::remove(tasks_.begin(), tasks_.end(), nullptr), tasks_.end());
  }
  for (const auto& t : batch.tasks) {
    queued_rows_ -= t->rows();
    queued_tokens_ -= t->rows() * t->length();
  }
  return batch;
}

std::vector<std::unique_ptr<BatchTask>> BatchQueue::TakeAll() {
  std::vector<std::unique_ptr<BatchTask>> all;
  for (auto& t : tasks_) all.push_back(std::move(t));
  tasks_.clear();
  queued_rows_ = 0;
  queued_tokens_ = 0;
  return all;
}

}  // namespace tailcut
