// InFlightGate: counts the asynchronous work that still refers to an object, so that its
// owner can wait for all of it before the object goes away. A servable hands its `this` to
// callbacks that other threads run later (a Redis reply, another request's single-flight
// computation, a poll for another replica's value); destroying it while one is pending is a
// use-after-free. Instead, each piece of work holds a Pass for as long as anything of it can
// still call back (the pass is captured by its callbacks and released with the last copy of
// them), and the owner closes the gate and waits until every pass is gone.
//
//   auto pass = gate.Enter();          // null once the gate is closed: refuse the work
//   queue.Post([pass, this] { ... });  // the work keeps `this` valid while it lives
//   ...
//   gate.Close();                      // no new work
//   gate.WaitIdle();                   // every pass released: no callback refers to us
//
// Thread-safety: every method is safe from any thread. A Pass may be released on any thread,
// including inside a callback of the object it protects, but WaitIdle() must not be called
// while holding a pass (it would wait for itself). The gate must outlive its passes: call
// WaitIdle() before destroying it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace tailcut {

class InFlightGate {
 public:
  class Token;
  // Shared by everything that belongs to one piece of work; released with the last copy.
  using Pass = std::shared_ptr<const Token>;

  InFlightGate() = default;
  InFlightGate(const InFlightGate&) = delete;
  InFlightGate& operator=(const InFlightGate&) = delete;
  ~InFlightGate();

  // A pass for new work, or null once Close() has been called.
  Pass Enter();
  // Refuses new work from now on (passes already given stay valid).
  void Close();
  // Blocks until every pass has been released. Calls `on_slow(in_flight)` (if given) each
  // time `slow_millis` pass without the count reaching zero, so a leak is visible in logs
  // instead of a silent hang.
  void WaitIdle(int64_t slow_millis = 5000, void (*on_slow)(int64_t in_flight) = nullptr);
  int64_t in_flight() const;
  bool closed() const;

 private:
  void Leave();

  mutable std::mutex mutex_;
  std::condition_variable idle_;
  int64_t in_flight_ = 0;
  bool closed_ = false;
};

class InFlightGate::Token {
 public:
  explicit Token(InFlightGate* gate) : gate_(gate) {}
  ~Token() { gate_->Leave(); }
  Token(const Token&) = delete;
  Token& operator=(const Token&) = delete;

 private:
  InFlightGate* const gate_;
};

}  // namespace tailcut
