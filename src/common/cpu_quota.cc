#include "common/cpu_quota.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace tailcut {
namespace {

std::optional<long long> ParseInteger(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The smallest quota on the cgroup path of this process and its ancestors: a parent's limit
// binds its children too.
std::optional<double> CgroupQuotaCpus() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::optional<double> best;
  auto take = [&best](std::optional<double> q) {
    if (q && (!best || *q < *best)) best = q;
  };
  while (std::getline(in, line)) {
    // "<id>:<controllers>:<path>"; v2 is "0::<path>".
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    for (;;) {
      if (controllers.empty()) {
        take(ParseCgroupV2CpuMax(ReadFile("/sys/fs/cgroup" + path + "/cpu.max")));
      } else if (controllers.find("cpu") != std::string::npos) {
        for (const char* mount : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
          const std::string dir = std::string(mount) + path;
          take(ParseCgroupV1Quota(ReadFile(dir + "/cpu.cfs_quota_us"),
                                  ReadFile(dir + "/cpu.cfs_period_us")));
        }
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return best;
}

}  // namespace

std::optional<double> ParseCgroupV2CpuMax(std::string_view content) {
  const size_t space = content.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  if (content.substr(0, space) == "max") return std::nullopt;
  auto quota = ParseInteger(content.substr(0, space));
  auto period = ParseInteger(content.substr(space + 1));
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::optional<double> ParseCgroupV1Quota(std::string_view quota_us, std::string_view period_us) {
  auto quota = ParseInteger(quota_us);
  auto period = ParseInteger(period_us);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

int CpusFromQuota(double quota_cpus) {
  return std::max(1, static_cast<int>(std::ceil(quota_cpus - 1e-9)));
}

int AvailableCpus() {
  const unsigned hw = std::thread::hardware_concurrency();
  int cpus = hw == 0 ? 1 : static_cast<int>(hw);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    cpus = std::min(cpus, std::max(1, CPU_COUNT(&set)));
  }
  if (auto quota = CgroupQuotaCpus()) cpus = std::min(cpus, CpusFromQuota(*quota));
  return std::max(1, cpus);
}

}  // namespace tailcut
