#include "server/variant_json.h"

namespace tailcut {

void AddVariantHeaders(const EmbedResult& result, HttpResponse* response) {
  response->headers.emplace_back("X-Tailcut-Variant", ServedVariants(result));
  response->headers.emplace_back("X-Tailcut-Cache-Hits", std::to_string(result.cache_hits));
}

nlohmann::json PrecisionJson(const ModelDescription& d) {
  nlohmann::json variants = nlohmann::json::array();
  for (const auto& v : d.variant_details) {
    auto optional = [](const std::optional<double>& x) {
      return x ? nlohmann::json(*x) : nlohmann::json(nullptr);
    };
    nlohmann::json item = {{"name", v.name},
                           {"precision", v.precision},
                           {"loaded", v.loaded},
                           {"file_digest", v.file_digest},
                           {"batch_invariant", v.batch_invariant},
                           {"fidelity_min_cosine", optional(v.fidelity_min_cosine)},
                           {"fidelity_recall_at_10", optional(v.fidelity_recall_at_10)},
                           {"interchangeable", v.interchangeable}};
    if (v.perplexity) item["perplexity"] = *v.perplexity;
    if (v.top1_agreement) item["top1_agreement"] = *v.top1_agreement;
    if (v.top1_accuracy) item["top1_accuracy"] = *v.top1_accuracy;
    if (!v.not_interchangeable_reason.empty()) {
      item["why_not_interchangeable"] = v.not_interchangeable_reason;
    }
    if (!v.error.empty()) item["error"] = v.error;
    variants.push_back(std::move(item));
  }
  return {{"vector_space", d.default_variant},
          {"active_variant", d.active_variant},
          {"policy", d.precision_policy},
          {"controller", d.precision_controller},
          {"switches", d.precision_switches},
          {"fidelity_floor",
           {{"min_cosine", d.fidelity_floor_min_cosine},
            {"recall_at_10", d.fidelity_floor_recall_at_10},
            {"waived", d.fidelity_floor_waived}}},
          {"top1_agreement_floor", d.top1_agreement_floor},
          {"variants", std::move(variants)}};
}

}  // namespace tailcut
