#include "config/engine_layout.h"

#include <gtest/gtest.h>

#include "common/cpu_quota.h"
#include "config/server_config.h"

namespace tailcut {
namespace {

TEST(EngineLayoutTest, DefaultIsAOneThreadWorkerPerCpu) {
  for (int cpus : {1, 2, 8}) {
    EngineLayout l = ResolveEngineLayout(cpus, 0, 0);
    EXPECT_EQ(l.batch_workers, cpus);
    EXPECT_EQ(l.intra_op_threads, 1);
  }
  EXPECT_EQ(ResolveEngineLayout(0, 0, 0).batch_workers, 1);  // Never none.
}

TEST(EngineLayoutTest, OneGivenCountFillsTheCpusWithTheOther) {
  EngineLayout l = ResolveEngineLayout(8, 2, 0);
  EXPECT_EQ(l.batch_workers, 2);
  EXPECT_EQ(l.intra_op_threads, 4);
  l = ResolveEngineLayout(8, 0, 2);
  EXPECT_EQ(l.batch_workers, 4);
  EXPECT_EQ(l.intra_op_threads, 2);
  l = ResolveEngineLayout(2, 0, 2);  // One worker with both CPUs, the earlier default.
  EXPECT_EQ(l.batch_workers, 1);
  l = ResolveEngineLayout(2, 0, 4);  // More threads than CPUs: still one worker.
  EXPECT_EQ(l.batch_workers, 1);
  l = ResolveEngineLayout(2, 3, 3);  // Both given: kept as they are.
  EXPECT_EQ(l.batch_workers, 3);
  EXPECT_EQ(l.intra_op_threads, 3);
}

TEST(EngineLayoutTest, AppliesToEngineAndEveryServable) {
  ServerConfig c;
  EXPECT_EQ(c.service.text.scheduler.num_workers, 0);  // Defaults leave the choice here.
  EXPECT_EQ(c.engine.intra_op_threads, 0);
  const EngineLayout l = ApplyEngineLayout(&c);
  EXPECT_EQ(l.cpus, AvailableCpus());
  EXPECT_EQ(c.service.text.scheduler.num_workers, l.batch_workers);
  EXPECT_EQ(c.service.tensor.scheduler.num_workers, l.batch_workers);
  EXPECT_EQ(c.engine.intra_op_threads, 1);
  EXPECT_EQ(l.batch_workers, l.cpus);
}

}  // namespace
}  // namespace tailcut
