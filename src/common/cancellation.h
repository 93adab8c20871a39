// Cancellation: a flag that says a request's answer is no longer wanted (its client closed
// the connection). The party that learns it (the HTTP server) sets it; the parties doing the
// request's work look at it at their own checkpoints (the batcher before running a row) and
// drop the work. Polled rather than called back, so nothing has to unregister a callback and
// no callback can outlive what it refers to: each side holds the flag by shared_ptr.
//
// Thread-safety: Cancel() and cancelled() are safe from any thread.
#pragma once

#include <atomic>
#include <memory>

namespace tailcut {

class Cancellation {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

// What the work side holds: it may look, not cancel. Null = never cancelled.
using CancellationFlag = std::shared_ptr<const Cancellation>;

inline bool IsCancelled(const CancellationFlag& flag) { return flag && flag->cancelled(); }

}  // namespace tailcut
