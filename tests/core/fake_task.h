// FakeTask: a BatchTask with settable size, length and deadline that records whether it
// was failed, for testing the batcher without a model.
#pragma once

#include <atomic>
#include <string>

#include "core/batch_task.h"

namespace tailcut::testing {

class FakeTask : public BatchTask {
 public:
  FakeTask(int id, int64_t length, int64_t enqueued, int64_t rows = 1, int64_t deadline = 0,
           uint64_t key = 0)
      : id_(id),
        length_(length),
        enqueued_(enqueued),
        rows_(rows),
        deadline_(deadline),
        key_(key) {}
  // Counts failures (and remembers the last code) in `failures`, which outlives the task.
  struct Failures {
    std::atomic<int> count{0};
    std::atomic<Status::Code> last{Status::Code::kOk};
  };
  void set_failures(Failures* failures) { failures_ = failures; }

  int64_t rows() const override { return rows_; }
  int64_t length() const override { return length_; }
  uint64_t batch_key() const override { return key_; }
  int64_t enqueue_time_micros() const override { return enqueued_; }
  int64_t deadline_micros() const override { return deadline_; }
  bool abandoned() const override { return abandoned_flag; }
  void Fail(const Status& status) override {
    failed_status = status;
    ++fail_count;
    if (failures_) {
      failures_->last = status.code();
      ++failures_->count;
    }
  }

  int id() const { return id_; }
  Status failed_status;
  int fail_count = 0;
  bool abandoned_flag = false;  // What abandoned() answers.

 private:
  int id_;
  int64_t length_, enqueued_, rows_, deadline_;
  uint64_t key_;
  Failures* failures_ = nullptr;
};

inline int IdOf(const std::unique_ptr<BatchTask>& t) {
  return static_cast<const FakeTask&>(*t).id();
}

}  // namespace tailcut::testing
