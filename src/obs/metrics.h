// Metrics: counters, gauges and histograms with labels, and their Prometheus text
// exposition (format 0.0.4). Debian 12 ships no prometheus-cpp, and the part tailcut needs
// (three metric types, one text format) is small, so it lives here.
//
// Components declare their metrics once (a struct of references built from the registry)
// and keep pointers to labelled children on their hot paths: an update is then one relaxed
// atomic operation, and the registry's mutex is only taken to create a new label set.
//
// Cardinality: each family accepts at most `max_label_sets` label sets; further ones are
// folded into one child whose label values are all "other", so a hostile client sending
// random model names cannot grow memory without bound.
//
// Thread-safety: everything is safe to call from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tailcut {

class Counter {
 public:
  void Inc(double v = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Inc(double v = 1.0);
  void Dec(double v = 1.0) { Inc(-v); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);

  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Cumulative counts per bound, then +Inf.
  std::vector<uint64_t> CumulativeCounts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // One per bound plus +Inf.
  std::atomic<double> sum_{0.0};
  std::atomic<uint64_t> count_{0};
};

// Bucket bounds in seconds for request-stage latencies: 50 us .. 10 s, denser around the
// millisecond range where the SLO decisions are made.
std::vector<double> LatencyBucketsSeconds();
// LatencyBucketsSeconds() continued to 120 s (20, 30, 60, 120), for end-to-end times that
// may run long: a generation stream of thousands of tokens, or its wait for admission behind
// such streams. With the short buckets those would all land in +Inf past 10 s.
std::vector<double> LongLatencyBucketsSeconds();
// 1, 2, 4, ... up to `max` (for batch sizes and token counts).
std::vector<double> PowersOfTwoBuckets(double max);

enum class MetricType { kCounter, kGauge, kHistogram };

// All children of one metric name, keyed by label values.
template <typename M>
class Family {
 public:
  // The child for these label values (in the order of the family's label names); created on
  // first use. The reference stays valid for the registry's lifetime.
  M& WithLabels(const std::vector<std::string>& values);
  // For families without labels.
  M& Get() { return WithLabels({}); }

 private:
  friend class MetricsRegistry;
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> buckets, size_t max_label_sets);
  void Serialize(std::string* out, MetricType type) const;
  std::unique_ptr<M> Make() const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> buckets_;  // Histograms only.
  const size_t max_label_sets_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_;
};

struct MetricsRegistryOptions {
  // Most label sets per metric family before new ones fold into "other".
  size_t max_label_sets_per_family = 512;
};

class MetricsRegistry {
 public:
  explicit MetricsRegistry(MetricsRegistryOptions options = {}) : options_(options) {}

  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> buckets,
                                  std::vector<std::string> label_names = {});

  // Runs `hook` at the start of every Serialize(), to refresh gauges whose value is read
  // from elsewhere (queue depths, cache sizes) only when someone looks.
  void AddCollectHook(std::function<void()> hook);

  // Prometheus text exposition of every metric, in registration order.
  std::string Serialize() const;

 private:
  struct Entry {
    MetricType type;
    void* family;  // Family<Counter|Gauge|Histogram>*, owned by the matching vector below.
  };
  MetricsRegistryOptions options_;
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  std::vector<std::function<void()>> hooks_;
  std::vector<std::unique_ptr<Family<Counter>>> counters_;
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_;
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_;
};

// Escapes a label value for the text format (backslash, quote, newline).
std::string EscapeLabelValue(const std::string& v);

}  // namespace tailcut
