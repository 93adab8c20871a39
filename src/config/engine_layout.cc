#include "config/engine_layout.h"

#include <algorithm>

#include "common/cpu_quota.h"
#include "config/server_config.h"

namespace tailcut {

EngineLayout ResolveEngineLayout(int cpus, int requested_workers, int requested_threads) {
  EngineLayout l;
  l.cpus = std::max(1, cpus);
  if (requested_workers > 0 && requested_threads > 0) {
    l.batch_workers = requested_workers;
    l.intra_op_threads = requested_threads;
    l.rule = "as configured";
  } else if (requested_workers > 0) {
    l.batch_workers = requested_workers;
    l.intra_op_threads = std::max(1, l.cpus / requested_workers);
    l.rule = "threads fill the CPUs between the configured workers";
  } else if (requested_threads > 0) {
    l.intra_op_threads = requested_threads;
    l.batch_workers = std::max(1, l.cpus / requested_threads);
    l.rule = "workers fill the CPUs at the configured threads each";
  } else {
    l.batch_workers = l.cpus;
    l.intra_op_threads = 1;
    l.rule = "a one-thread worker per CPU";
  }
  return l;
}

EngineLayout ApplyEngineLayout(ServerConfig* config) {
  const EngineLayout l = ResolveEngineLayout(
      AvailableCpus(), config->service.text.scheduler.num_workers, config->engine.intra_op_threads);
  config->engine.intra_op_threads = l.intra_op_threads;
  config->service.text.scheduler.num_workers = l.batch_workers;
  config->service.tensor.scheduler.num_workers = l.batch_workers;
  return l;
}

}  // namespace tailcut
