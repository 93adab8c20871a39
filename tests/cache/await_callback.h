// Await: runs an asynchronous client call and waits for its callback's value, for the Redis
// client tests (standalone and cluster). Throws if the callback does not come within the
// timeout, so a lost callback fails the test instead of hanging it.
//
// Thread-safety: the callback may run on any thread; Await blocks the calling one.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <utility>

namespace tailcut {

// Scheduling slack allowed on top of a call's deadline: generous for sanitizer builds on 2
// shared cores.
inline constexpr int64_t kSlackMillis = 100;

// Runs `start(callback)` and waits for the callback's value.
template <typename T, typename F>
T Await(F&& start, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto p = std::make_shared<std::promise<T>>();
  auto f = p->get_future();
  start([p](T v) { p->set_value(std::move(v)); });
  if (f.wait_for(timeout) != std::future_status::ready) {
    throw std::runtime_error("callback not called within the timeout");
  }
  return f.get();
}

}  // namespace tailcut
