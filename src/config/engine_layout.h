// Engine layout: how the CPUs this process may use (common/cpu_quota.h) are split between
// batch workers (batching.num_workers, per model) and ONNX Runtime's intra-op threads
// (engine.intra_op_threads, one pool shared by every session), when either is left at 0.
//
// The rule: a one-thread batch worker per CPU. Each batch runs on one core, with no barrier
// after every operator waiting for whichever thread the I/O thread or a client preempted,
// and a long text holds one worker while the others keep serving the short ones queued
// behind it (no head-of-line blocking). What used to argue for one worker with every CPU, a
// batch's latency (a 4 x 128-token batch took 166 ms on one thread against 92 ms on two),
// is bounded now by the batch time cut-off (BatchSchedulerOptions::max_batch_micros), which
// scales each worker's batches to its own speed. Measured on 2 vCPUs with QQP questions of
// natural length, P99 <= 86 ms, three interleaved repeats (BENCHMARKS.md, "Tail latency on
// natural traffic"): 430 req/s for two one-thread workers against 310 for one two-thread
// worker, both with the cut-off (180 for the earlier defaults), and no workload lost. Given
// one of the two counts, the other fills the CPUs (workers x threads = CPUs; `--threads 2` on
// 2 CPUs = the earlier one worker with both); both given are kept. On one CPU both rules are
// one worker with one thread. Machines with more than 2 CPUs were not measured here (this
// one has 2; taskset can only take CPUs away).
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
