// How many CPUs this process can really use, for sizing thread pools. A container or a
// systemd slice often gets a CPU quota (cgroup cpu.max / cfs_quota_us) or an affinity mask
// far below the machine's core count, and std::thread::hardware_concurrency() reports the
// machine: sizing from it oversubscribes the quota and every batch then waits for the
// scheduler's throttling, which is exactly a tail-latency spike.
//
// Thread-safety: pure functions; AvailableCpus() reads /proc and /sys on each call.
#pragma once

#include <optional>
#include <string_view>

namespace tailcut {

// min(affinity mask, cgroup quota rounded up, hardware_concurrency), at least 1.
int AvailableCpus();

// cgroup v2 cpu.max ("<quota> <period>" or "max <period>"): the quota in CPUs, or nothing
// when unlimited or malformed.
std::optional<double> ParseCgroupV2CpuMax(std::string_view content);
// cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us (-1 = unlimited).
std::optional<double> ParseCgroupV1Quota(std::string_view quota_us, std::string_view period_us);
// A fractional quota rounded up to whole CPUs (1.5 CPUs can keep 2 threads partly busy).
int CpusFromQuota(double quota_cpus);

}  // namespace tailcut
