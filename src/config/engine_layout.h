// Engine layout: how the CPUs this process may use (common/cpu_quota.h) are split between
// batch workers (batching.num_workers, per model) and ONNX Runtime's intra-op threads
// (engine.intra_op_threads, one pool shared by every session), when either is left at 0.
//
// The rule: one batch worker that spreads each batch over every CPU. What the SLO sees is a
// batch's latency, and a worker with fewer threads runs its batch proportionally longer: on
// a slow 2-CPU machine one 4 x 128-token batch takes 92 ms with 2 threads and 166 ms with
// one, so two one-thread workers cannot hold P99 <= 86 ms on medium texts at any rate, while
// for short texts they add throughput (BENCHMARKS.md, "Engine layout"). Hence the default
// favours latency, and a short-text service asks for the other split with one count: given
// one, the other fills the CPUs (workers x threads = CPUs; `--threads 1` on 2 CPUs = two
// one-thread workers); both given are kept. Machines with more CPUs were not measured here:
// past the point where one batch stops scaling with threads, give batching.num_workers.
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
