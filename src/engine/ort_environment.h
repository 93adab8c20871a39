// OrtEnvironment: the one ONNX Runtime environment of the process, which owns the global
// intra-op and inter-op thread pools that every model session shares. Sharing one pool is
// what keeps several models (and several precision variants of one model) from
// oversubscribing a small machine: each session would otherwise start its own threads.
//
// Thread-safety: Init() must be called once before the first session is created (later
// calls with other options are refused); Get() is safe from any thread afterwards.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace tailcut {

struct OrtEnvironmentOptions {
  // Threads one inference may use (ONNX Runtime's intra-op pool, shared by all sessions).
  // 0 = the CPUs this process may use (common/cpu_quota.h: affinity and cgroup quota).
  // Fewer leaves cores to the IO and work-pool threads; more than that hurts.
  int intra_op_threads = 0;
  // Threads for running independent graph branches in parallel; 1 is right for transformer
  // encoders, whose graphs are chains.
  int inter_op_threads = 1;
  // Let pool threads spin for a while before sleeping. Spinning cuts the wake-up latency of
  // back-to-back batches but burns the cores the request threads need between batches.
  bool allow_spinning = false;
  // ONNX Runtime's own log threshold: 0 verbose .. 4 fatal.
  int log_severity = 3;
};

class OrtEnvironment {
 public:
  // Creates the environment; idempotent for identical options.
  static Status Init(const OrtEnvironmentOptions& options);
  // The environment; initialises it with default options if Init() was never called.
  static OrtEnvironment& Get();

  Ort::Env& env() { return env_; }
  const OrtEnvironmentOptions& options() const { return options_; }
  int intra_op_threads() const { return resolved_intra_op_threads_; }
  // ONNX Runtime's library version string, e.g. "1.30.0".
  static std::string RuntimeVersion();

 private:
  explicit OrtEnvironment(const OrtEnvironmentOptions& options);

  OrtEnvironmentOptions options_;
  int resolved_intra_op_threads_;
  Ort::Env env_;
};

}  // namespace tailcut
