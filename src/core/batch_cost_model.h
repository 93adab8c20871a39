// BatchCostModel: how long a batch takes, fitted to the batches run most recently, and from
// it how long queued work takes to drain. BatchScheduler asks it once per request to decide
// admission by time (BatchSchedulerOptions::max_queue_delay_micros) and tells it every batch's
// measured run time.
//
// The model is  batch time = fixed_micros + micros_per_token x padded tokens:
//  - the fixed part (a session run's set-up, the worker's per-batch work outside the engine,
//    the answers it hands back) is what a cost per token alone leaves out: it makes a few
//    small batches look cheap when they queue and a stalled small batch look like a
//    catastrophically slow token;
//  - measured as the worker's wall time for the whole batch, so whatever else runs on the
//    machine (the IO threads, the client, a neighbour's build) is in it;
//  - fitted by exponentially weighted least squares, each new batch weighing 1 /
//    memory_batches, so a machine that gets slower is followed within a few batches. Under
//    overload every batch has about the same size and the slope is not identifiable; the
//    fit then keeps its last slope and moves the fixed part so that the line passes through
//    the recent batches: the size that is running is predicted from what that size just
//    took.
//
// A queue is drained in batches of at most max_batch_size rows and max_batch_tokens padded
// tokens; its padded tokens are its tokens x the padding measured in recent batches.
//
// Measured waits are fed back: the draining order is not the queue's (grouping by length
// lets a newer task of a closer length go before an older one, which then waits longer than
// the work ahead of it), and the machine can change while a task waits. ObserveWait() is
// told each task's estimated and actual wait; the 99th percentile of the difference (the
// wait margin, tracked by stochastic approximation) is what admission adds to its estimate,
// so that the admitted tasks' 99th percentile wait, not their mean, meets the bound.
//
// Thread-safety: none; BatchScheduler calls it under its mutex. Cheap: a few multiplications
// per call.
#pragma once

#include <cstdint>
#include <limits>

namespace tailcut {

struct BatchCostModelOptions {
  // Weight of each new batch in the fit, as 1 / this: older batches fade with a time
  // constant of about this many batches (under overload, batches of ~30 ms: a quarter of a
  // second). Lower follows a machine that slows down (a neighbour's build) sooner; higher
  // ignores one slow batch better.
  int64_t memory_batches = 8;
  // How far one task's wait moves the wait margin: up 0.99 x this when the task waited
  // longer than estimated plus the margin, down 0.01 x this otherwise. Larger follows
  // changes sooner and jitters more; about 1/200 of the queue-delay bound.
  int64_t margin_step_micros = 1000;
  // Where the wait margin starts, before any wait is observed, and the range it is held in
  // (the defaults: from 0, unbounded both ways). A user whose margin must never promise more
  // than its estimate (GenerationScheduler's step-time margin) holds it at 0 or above.
  int64_t initial_margin_micros = 0;
  int64_t min_margin_micros = std::numeric_limits<int64_t>::min();
  int64_t max_margin_micros = std::numeric_limits<int64_t>::max();
};

class BatchCostModel {
 public:
  explicit BatchCostModel(const BatchCostModelOptions& options = {});

  // A batch of `padded_tokens` (rows x longest length), `tokens` of them real, ran in
  // `micros`.
  void Observe(int64_t padded_tokens, int64_t tokens, int64_t micros);

  // Whether any batch has been observed; before that every prediction is 0.
  bool measured() const { return samples_ > 0; }
  int64_t samples() const { return samples_; }
  // Predicted run time of one batch of `padded_tokens`.
  int64_t BatchMicros(int64_t padded_tokens) const;
  // The most padded tokens one batch may hold to be predicted to run within `micros` (at
  // least 1: a batch of one short row is never refused); 0 = no bound known: batches of
  // different sizes have not yet told the fixed part from the cost per token (until then a
  // line through the origin would overstate small batches' cost per token and cut batches
  // too small).
  int64_t TokensWithin(int64_t micros) const;
  // Predicted time for one worker to run `rows` queued rows holding `tokens` (unpadded):
  // as many batches as the limits cut them into (0 = no limit), each with its fixed part.
  int64_t DrainMicros(int64_t rows, int64_t tokens, int64_t max_batch_size,
                      int64_t max_batch_tokens) const;

  // A task admitted with an estimated wait of `estimated_micros` started its batch after
  // `actual_micros`.
  void ObserveWait(int64_t estimated_micros, int64_t actual_micros);
  // The 99th percentile of actual minus estimated wait over recent tasks (may be negative:
  // the estimate was pessimistic); 0 before any wait has been observed.
  int64_t wait_margin_micros() const { return static_cast<int64_t>(margin_micros_); }

  double fixed_micros() const { return fixed_micros_; }
  double micros_per_token() const { return micros_per_token_; }
  // Padded tokens per real token in recent batches (>= 1).
  double padding() const { return padding_; }

 private:
  void Refit();

  double weight_;  // 1 / memory_batches.
  double margin_step_;
  double min_margin_micros_;
  double max_margin_micros_;
  double margin_micros_;
  int64_t samples_ = 0;
  // Exponentially weighted moments of x = padded tokens, y = micros.
  double mean_x_ = 0, mean_y_ = 0, mean_xx_ = 0, mean_xy_ = 0;
  double fixed_micros_ = 0;
  double micros_per_token_ = 0;
  bool slope_known_ = false;  // A fit with enough spread in x has set the slope.
  double padding_ = 1;
};

}  // namespace tailcut
