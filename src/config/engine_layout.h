// Engine layout: how the CPUs this process may use (common/cpu_quota.h) are split between
// batch workers (batching.num_workers, per model) and ONNX Runtime's intra-op threads
// (engine.intra_op_threads, one pool shared by every session), when either is left at 0.
//
// The rule: one single-threaded batch worker per CPU. Batches of short texts parallelise
// poorly inside one inference (a 64 x 16-token batch spends much of its time in small
// per-layer ops and the pool's fork/join), while independent batches on separate cores
// scale linearly; on 2 CPUs two one-thread workers sustained +17 % more short-text requests
// at P99 <= 86 ms than one worker with both threads, and medium/mixed texts +0-5 %
// (BENCHMARKS.md, "Engine layout"). The price is a single batch's latency at low load, which
// stays well under the SLO because batches are bounded by batching.max_batch_tokens. With one
// count given, the other fills the CPUs (workers x threads = CPUs); both given are kept.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace tailcut {

struct ServerConfig;

struct EngineLayout {
  int cpus = 1;
  int batch_workers = 1;     // Per model.
  int intra_op_threads = 1;  // ONNX Runtime's shared pool.
  std::string rule;          // How it was chosen, for the start-up log.
};

// `requested_*` 0 = choose.
EngineLayout ResolveEngineLayout(int cpus, int requested_workers, int requested_threads);

// Resolves the layout for this process's CPUs and writes it into `config` (engine threads
// and every servable's worker count).
EngineLayout ApplyEngineLayout(ServerConfig* config);

}  // namespace tailcut
