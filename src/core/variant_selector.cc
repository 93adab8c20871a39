#include "core/variant_selector.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/variant_eligibility.h"

namespace tailcut {

VariantSelector::VariantSelector(const ModelConfig& config, std::vector<bool> loaded,
                                 const PrecisionPolicy& policy, const ServableMetrics& metrics)
    : config_(config), loaded_(std::move(loaded)), policy_(policy), metrics_(metrics) {}

Result<std::unique_ptr<VariantSelector>> VariantSelector::Create(const ModelConfig& config,
                                                                 std::vector<bool> loaded,
                                                                 const PrecisionPolicy& policy,
                                                                 const ServableMetrics& metrics,
                                                                 const Clock& clock) {
  std::unique_ptr<VariantSelector> s(
      new VariantSelector(config, std::move(loaded), policy, metrics));
  int active = s->Find(config.default_variant);
  for (size_t i = 0; active < 0 && i < s->loaded_.size(); ++i) {
    if (s->loaded_[i]) active = static_cast<int>(i);
  }
  if (active < 0) {
    return Status::NotFound("model '" + config.name + "': no precision variant loaded");
  }
  const auto name = [&](int i) { return config.variants[static_cast<size_t>(i)].name; };
  if (name(active) != config.default_variant) {
    spdlog::warn("model '{}': default variant '{}' is unavailable; serving '{}'", config.name,
                 config.default_variant, name(active));
  }
  s->active_ = active;
  for (size_t i = 0; i < s->loaded_.size(); ++i) {
    metrics.precision_active->WithLabels({config.name, config.variants[i].name})
        .Set(static_cast<int>(i) == active ? 1 : 0);
  }
  if (policy.mode == "off") {
    s->note_ = "off by configuration (precision.mode off)";
    return s;
  }
  s->accurate_ = s->Find(policy.accurate_variant);
  std::string why;
  if (s->accurate_ >= 0) {
    s->fast_ = SelectFastVariant(config.variants, s->loaded_, s->accurate_, policy, &why);
  }
  if (s->accurate_ < 0) {
    s->note_ = "off: no loaded variant matches accurate_variant '" + policy.accurate_variant + "'";
  } else if (s->fast_ < 0) {
    s->note_ =
        "off: no fast variant is interchangeable with '" + name(s->accurate_) + "' (" + why + ")";
  } else {
    s->controller_ = std::make_unique<PrecisionController>(policy, clock);
    s->SetActive(s->accurate_, "controller start: accurate variant");
    s->note_ = policy.mode + ": " + name(s->accurate_) + " <-> " + name(s->fast_);
  }
  if (!s->controller_) {
    s->accurate_ = s->fast_ = -1;
    // The operator asked for a controller: say why there is none. A model with one variant
    // has nothing to move between, and says so only in its description.
    if (config.variants.size() > 1) {
      spdlog::warn("model '{}': precision controller {}", config.name, s->note_);
    }
  }
  return s;
}

int VariantSelector::Find(const std::string& key) const {
  for (size_t i = 0; i < loaded_.size(); ++i) {
    if (loaded_[i] && config_.variants[i].name == key) return static_cast<int>(i);
  }
  // A precision alias picks the first loaded variant of that precision (listed best first).
  for (size_t i = 0; i < loaded_.size(); ++i) {
    if (loaded_[i] && config_.variants[i].precision == key) return static_cast<int>(i);
  }
  return -1;
}

Result<int> VariantSelector::Choose(const std::string& pin) const {
  if (pin.empty()) return active();
  const int found = Find(pin);
  if (found >= 0) return found;
  std::string names;
  for (size_t i = 0; i < loaded_.size(); ++i) {
    if (!loaded_[i]) continue;
    const VariantConfig& v = config_.variants[i];
    names += (names.empty() ? "" : ", ") + v.name + " (" + v.precision + ")";
  }
  return Status::InvalidArgument("model '" + config_.name + "' has no precision variant '" + pin +
                                 "'; available: " + names);
}

Status VariantSelector::Pin(const std::string& name) {
  if (name.empty()) {
    pinned_ = false;
    return Status::Ok();
  }
  auto index = Choose(name);
  if (!index.ok()) return index.status();
  pinned_ = true;
  SetActive(*index, "pinned by an administrator");
  return Status::Ok();
}

void VariantSelector::Tick(const LoadSignals& signals) {
  if (!controller_ || pinned_) return;
  if (controller_->Update(signals)) {
    SetActive(controller_->on_fast() ? fast_ : accurate_, controller_->last_reason());
  }
}

void VariantSelector::SetActive(int index, const std::string& reason) {
  std::lock_guard<std::mutex> lock(set_mutex_);
  const int before = active_.exchange(index);
  if (before == index) return;
  const std::string& from = config_.variants[static_cast<size_t>(before)].name;
  const std::string& to = config_.variants[static_cast<size_t>(index)].name;
  ++switches_;
  metrics_.precision_switches->WithLabels({config_.name, to}).Inc();
  metrics_.precision_active->WithLabels({config_.name, from}).Set(0);
  metrics_.precision_active->WithLabels({config_.name, to}).Set(1);
  spdlog::info("model '{}': serving variant '{}' instead of '{}' ({})", config_.name, to, from,
               reason);
}

void VariantSelector::Describe(const std::vector<std::string>& digests,
                               const std::vector<std::string>& errors, ModelDescription* d) const {
  for (size_t i = 0; i < loaded_.size(); ++i) {
    const VariantConfig& v = config_.variants[i];
    if (loaded_[i]) d->variants.push_back(v.name);
    // The references: the controller's accurate end, and the variant that defines the
    // model's outputs (model.yaml default_variant).
    const bool is_reference = static_cast<int>(i) == accurate_ || v.name == config_.default_variant;
    d->variant_details.push_back(DescribeVariant(
        v, loaded_[i], i < errors.size() ? errors[i] : "", i < digests.size() ? digests[i] : "",
        is_reference ? Status::Ok() : CheckInterchangeable(v, policy_)));
  }
  d->active_variant = config_.variants[static_cast<size_t>(active())].name;
  d->default_variant = config_.default_variant;
  d->precision_controller = note_;
  d->precision_policy = !controller_ ? "off" : pinned_ ? "pinned" : policy_.mode;
  d->precision_switches = switches_.load();
  d->fidelity_floor_min_cosine = static_cast<double>(policy_.min_fidelity_cosine_ppm) / 1e6;
  d->fidelity_floor_recall_at_10 = static_cast<double>(policy_.min_fidelity_recall_at_10_ppm) / 1e6;
  d->fidelity_floor_waived = policy_.allow_below_fidelity_floor;
  d->top1_agreement_floor = static_cast<double>(policy_.min_top1_agreement_ppm) / 1e6;
}

LoadSignals MeasureLoad(const LatencyWindow& latency, int64_t busy_micros, int64_t wall_micros,
                        int workers, int64_t accurate_cost, int64_t fast_cost) {
  LoadSignals s;
  const int64_t capacity = std::max<int64_t>(1, wall_micros) * std::max(1, workers);
  s.utilization = std::min(1.0, static_cast<double>(busy_micros) / static_cast<double>(capacity));
  s.request_rate_per_s = latency.RatePerSecond();
  s.p99_micros = latency.PercentileMicros(0.99);
  s.samples = latency.Count();
  ReadSystemMemory(&s.memory_used_fraction, &s.memory_free_bytes);
  if (accurate_cost > 0 && fast_cost > 0) {
    s.accurate_slowdown = static_cast<double>(accurate_cost) / static_cast<double>(fast_cost);
  }
  return s;
}

}  // namespace tailcut
