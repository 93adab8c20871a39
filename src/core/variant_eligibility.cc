#include "core/variant_eligibility.h"

#include <cstdio>

namespace tailcut {
namespace {

std::string Figure(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", value);
  return buf;
}

}  // namespace

Status CheckInterchangeable(const VariantConfig& variant, const PrecisionPolicy& policy) {
  if (!variant.batch_invariant) {
    return Status::FailedPrecondition(
        "variant '" + variant.name +
        "' is not batch-invariant (its vectors depend on their batch-mates)");
  }
  if (policy.allow_below_fidelity_floor) return Status::Ok();
  if (variant.top1_agreement) {  // A classifier: its users read classes, not vectors.
    const double floor = static_cast<double>(policy.min_top1_agreement_ppm) / 1e6;
    if (*variant.top1_agreement < floor) {
      return Status::FailedPrecondition("variant '" + variant.name +
                                        "' agrees with fp32's top-1 on " +
                                        Figure(*variant.top1_agreement) +
                                        " of the check images, under the floor " + Figure(floor));
    }
    return Status::Ok();
  }
  const double min_cosine = static_cast<double>(policy.min_fidelity_cosine_ppm) / 1e6;
  const double min_recall = static_cast<double>(policy.min_fidelity_recall_at_10_ppm) / 1e6;
  if (!variant.fidelity_min_cosine || !variant.fidelity_recall_at_10) {
    return Status::FailedPrecondition("variant '" + variant.name +
                                      "' has no measured fidelity to fp32 in model.yaml");
  }
  if (*variant.fidelity_min_cosine < min_cosine) {
    return Status::FailedPrecondition("variant '" + variant.name + "' has min cosine " +
                                      Figure(*variant.fidelity_min_cosine) +
                                      " to fp32, under the floor " + Figure(min_cosine));
  }
  if (*variant.fidelity_recall_at_10 < min_recall) {
    return Status::FailedPrecondition("variant '" + variant.name + "' has recall@10 " +
                                      Figure(*variant.fidelity_recall_at_10) +
                                      ", under the floor " + Figure(min_recall));
  }
  return Status::Ok();
}

int SelectFastVariant(const std::vector<VariantConfig>& variants, const std::vector<bool>& loaded,
                      int accurate, const PrecisionPolicy& policy, std::string* why) {
  why->clear();
  // An exact name wins over a precision alias, as in request pins.
  bool by_name = false;
  for (const auto& v : variants) by_name = by_name || v.name == policy.fast_variant;
  for (size_t i = 0; i < variants.size(); ++i) {
    const VariantConfig& v = variants[i];
    if (by_name ? v.name != policy.fast_variant : v.precision != policy.fast_variant) continue;
    std::string reason;
    if (static_cast<int>(i) == accurate) {
      reason = "variant '" + v.name + "' is the accurate variant itself";
    } else if (i >= loaded.size() || !loaded[i]) {
      reason = "variant '" + v.name + "' failed to load";
    } else if (Status s = CheckInterchangeable(v, policy); !s.ok()) {
      reason = s.message();
    } else {
      return static_cast<int>(i);
    }
    *why += (why->empty() ? "" : "; ") + reason;
  }
  if (why->empty()) why->assign("no variant matches '" + policy.fast_variant + "'");
  return -1;
}

Status CheckPerplexityWithin(const VariantConfig& variant, const VariantConfig& reference,
                             int64_t max_increase_ppm) {
  if (!reference.perplexity) {
    return Status::FailedPrecondition("the default variant '" + reference.name +
                                      "' has no measured perplexity in model.yaml");
  }
  if (!variant.perplexity) {
    return Status::FailedPrecondition("variant '" + variant.name +
                                      "' has no measured perplexity in model.yaml");
  }
  const double bound =
      *reference.perplexity * (1.0 + static_cast<double>(max_increase_ppm) / 1e6);
  if (*variant.perplexity > bound) {
    return Status::FailedPrecondition(
        "variant '" + variant.name + "' has perplexity " + Figure(*variant.perplexity) +
        ", above the bound " + Figure(bound) + " (default '" + reference.name + "' " +
        Figure(*reference.perplexity) + " + " +
        Figure(static_cast<double>(max_increase_ppm) / 1e4) + " %)");
  }
  return Status::Ok();
}

VariantDescription DescribeVariant(const VariantConfig& variant, bool loaded, std::string error,
                                   std::string file_digest, const Status& eligibility) {
  VariantDescription d;
  d.name = variant.name;
  d.precision = variant.precision;
  d.loaded = loaded;
  d.error = std::move(error);
  d.file_digest = std::move(file_digest);
  d.batch_invariant = variant.batch_invariant;
  d.fidelity_min_cosine = variant.fidelity_min_cosine;
  d.fidelity_recall_at_10 = variant.fidelity_recall_at_10;
  d.perplexity = variant.perplexity;
  d.top1_agreement = variant.top1_agreement;
  d.top1_accuracy = variant.top1_accuracy;
  d.interchangeable = eligibility.ok();
  if (!eligibility.ok()) d.not_interchangeable_reason = eligibility.message();
  return d;
}

}  // namespace tailcut
