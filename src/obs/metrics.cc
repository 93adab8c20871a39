#include "obs/metrics.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tailcut {
namespace {

void AtomicAdd(std::atomic<double>& a, double v) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
  }
}

std::string FormatNumber(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string LabelText(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      const std::string& extra_name = "", const std::string& extra_value = "") {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ",";
    out += names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ",";
    out += extra_name + "=\"" + extra_value + "\"";
  }
  out += "}";
  return out;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Counter::Inc(double v) {
  if (v < 0) return;  // Counters only go up.
  AtomicAdd(value_, v);
}

void Gauge::Inc(double v) {
  AtomicAdd(value_, v);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01,
          0.015,   0.02,   0.03,    0.04,   0.05,  0.06,  0.075, 0.086, 0.1,    0.125,
          0.15,    0.2,    0.3,     0.5,    0.75,  1.0,   2.5,   5.0,   10.0};
}

std::vector<double> LongLatencyBucketsSeconds() {
  std::vector<double> buckets = LatencyBucketsSeconds();
  buckets.insert(buckets.end(), {20.0, 30.0, 60.0, 120.0});
  return buckets;
}

std::vector<double> PowersOfTwoBuckets(double max) {
  std::vector<double> b;
  for (double v = 1; v <= max; v *= 2) b.push_back(v);
  return b;
}

template <typename M>
Family<M>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> buckets, size_t max_label_sets)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      buckets_(std::move(buckets)),
      max_label_sets_(max_label_sets) {}

template <typename M>
std::unique_ptr<M> Family<M>::Make() const {
  if constexpr (std::is_same_v<M, Histogram>) {
    return std::make_unique<Histogram>(buckets_);
  } else {
    return std::make_unique<M>();
  }
}

template <typename M>
M& Family<M>::WithLabels(const std::vector<std::string>& values) {
  if (values.size() != label_names_.size()) {
    throw std::invalid_argument("metric " + name_ + ": wrong number of label values");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = children_.find(values);
  if (it != children_.end()) return *it->second;
  if (children_.size() >= max_label_sets_) {
    std::vector<std::string> other(values.size(), "other");
    auto& slot = children_[other];
    if (!slot) slot = Make();
    return *slot;
  }
  auto& slot = children_[values];
  slot = Make();
  return *slot;
}

template <typename M>
void Family<M>::Serialize(std::string* out, MetricType type) const {
  *out += "# HELP " + name_ + " " + help_ + "\n";
  *out += "# TYPE " + name_ + " " + TypeName(type) + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [values, metric] : children_) {
    if constexpr (std::is_same_v<M, Histogram>) {
      const auto counts = metric->CumulativeCounts();
      const auto& bounds = metric->upper_bounds();
      for (size_t i = 0; i <= bounds.size(); ++i) {
        const std::string le = i < bounds.size() ? FormatNumber(bounds[i]) : "+Inf";
        *out += name_ + "_bucket" + LabelText(label_names_, values, "le", le) + " " +
                std::to_string(counts[i]) + "\n";
      }
      *out += name_ + "_sum" + LabelText(label_names_, values) + " " + FormatNumber(metric->sum()) +
              "\n";
      // The +Inf bucket of the same snapshot, not count(): Observe() updates the bucket and
      // the count one after the other, so a scrape in between would show them unequal, which
      // the exposition format forbids (seen under ASan, where the window is wider).
      *out += name_ + "_count" + LabelText(label_names_, values) + " " +
              std::to_string(counts.back()) + "\n";
    } else {
      *out += name_ + LabelText(label_names_, values) + " " + FormatNumber(metric->value()) + "\n";
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Family<Counter>& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                             std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.emplace_back(new Family<Counter>(name, help, std::move(label_names), {},
                                             options_.max_label_sets_per_family));
  entries_.push_back({MetricType::kCounter, counters_.back().get()});
  return *counters_.back();
}

Family<Gauge>& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                         std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mutex_);
  gauges_.emplace_back(new Family<Gauge>(name, help, std::move(label_names), {},
                                         options_.max_label_sets_per_family));
  entries_.push_back({MetricType::kGauge, gauges_.back().get()});
  return *gauges_.back();
}

Family<Histogram>& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                                 std::vector<double> buckets,
                                                 std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mutex_);
  histograms_.emplace_back(new Family<Histogram>(
      name, help, std::move(label_names), std::move(buckets), options_.max_label_sets_per_family));
  entries_.push_back({MetricType::kHistogram, histograms_.back().get()});
  return *histograms_.back();
}

void MetricsRegistry::AddCollectHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  hooks_.push_back(std::move(hook));
}

std::string MetricsRegistry::Serialize() const {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hooks = hooks_;
  }
  for (const auto& hook : hooks) hook();
  std::string out;
  out.reserve(16 * 1024);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& e : entries_) {
    switch (e.type) {
      case MetricType::kCounter:
        static_cast<Family<Counter>*>(e.family)->Serialize(&out, e.type);
        break;
      case MetricType::kGauge:
        static_cast<Family<Gauge>*>(e.family)->Serialize(&out, e.type);
        break;
      case MetricType::kHistogram:
        static_cast<Family<Histogram>*>(e.family)->Serialize(&out, e.type);
        break;
    }
  }
  return out;
}

}  // namespace tailcut
