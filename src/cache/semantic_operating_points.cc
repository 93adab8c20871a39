#include "cache/semantic_operating_points.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tailcut {
namespace {

using json = nlohmann::json;

constexpr std::string_view kRerankerFormat = "tailcut.semantic_reranker/1";

Status Invalid(const std::string& document, const std::string& what) {
  return Status::InvalidArgument(document + ": " + what);
}

// A non-empty string at `key` of `doc`.
Result<std::string> StringAt(const json& doc, const char* key, const std::string& document) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_string() || it->get<std::string>().empty()) {
    return Invalid(document, "\"" + std::string(key) + "\" must be a non-empty string");
  }
  return it->get<std::string>();
}

}  // namespace

double ProbabilityOfLogit(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

Result<double> SemanticDocumentNumber(const json& object, const char* key,
                                      const std::string& document, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return Invalid(document, where + "\"" + key + "\" is missing");
  if (!it->is_number()) {
    return Invalid(document, where + "\"" + key + "\" must be a number, not " + it->type_name());
  }
  const double v = it->get<double>();
  if (!std::isfinite(v)) return Invalid(document, where + "\"" + key + "\" is not finite");
  return v;
}

Result<SemanticOperatingPoints> SemanticOperatingPoints::FromJson(const json& doc,
                                                                  const std::string& document) {
  SemanticOperatingPoints table;
  table.document_ = document;
  auto points = doc.find("operating_points");
  if (points == doc.end() || !points->is_array() || points->empty()) {
    return Invalid(document, "\"operating_points\" must be a non-empty array");
  }
  for (size_t i = 0; i < points->size(); ++i) {
    const json& p = (*points)[i];
    const std::string where = "operating_points[" + std::to_string(i) + "] ";
    if (!p.is_object()) return Invalid(document, where + "must be an object");
    SemanticOperatingPoint point;
    struct Field {
      const char* key;
      double* out;
    };
    const Field fields[] = {{"max_wrong_hit_share", &point.max_wrong_hit_share},
                            {"threshold", &point.threshold},
                            {"hit_rate", &point.hit_rate},
                            {"wrong_hit_share", &point.wrong_hit_share}};
    for (const Field& field : fields) {
      auto value = SemanticDocumentNumber(p, field.key, document, where);
      if (!value.ok()) return value.status();
      if (*value < 0 || *value > 1) {
        return Invalid(document, where + "\"" + field.key + "\" must be in [0, 1]");
      }
      *field.out = *value;
    }
    table.points_.push_back(point);
  }
  auto default_share = SemanticDocumentNumber(doc, "default_max_wrong_hit_share", document, "");
  if (!default_share.ok()) return default_share.status();
  table.default_max_wrong_hit_share_ = *default_share;
  if (!table.For(*default_share).ok()) {
    return Invalid(document, "\"default_max_wrong_hit_share\" " + std::to_string(*default_share) +
                                 " has no operating point whose measured wrong-hit share is "
                                 "that low");
  }
  return table;
}

Result<SemanticOperatingPoint> SemanticOperatingPoints::For(double max_wrong_hit_share) const {
  if (!(max_wrong_hit_share >= 0 && max_wrong_hit_share <= 1)) {
    return Status::InvalidArgument("the accepted wrong-hit share must be in [0, 1], not " +
                                   std::to_string(max_wrong_hit_share));
  }
  const SemanticOperatingPoint* best = nullptr;
  double lowest = 1;
  double highest = 0;
  for (const SemanticOperatingPoint& p : points_) {
    lowest = std::min(lowest, p.wrong_hit_share);
    highest = std::max(highest, p.wrong_hit_share);
    if (p.wrong_hit_share > max_wrong_hit_share) continue;
    if (best == nullptr || p.hit_rate > best->hit_rate) best = &p;
  }
  if (best == nullptr) {
    return Status::NotFound("no operating point of the " + document_ +
                            " has a measured wrong-hit share of at most " +
                            std::to_string(max_wrong_hit_share) + "; its points measured " +
                            std::to_string(lowest) + " to " + std::to_string(highest));
  }
  return *best;
}

Result<SemanticRerankerDocument> SemanticRerankerDocument::FromJson(std::string_view text) {
  const std::string document = "semantic reranker operating points";
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return Invalid(document, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!doc.is_object()) return Invalid(document, "the document must be a JSON object");
  auto format = doc.find("format");
  if (format == doc.end() || !format->is_string() ||
      format->get<std::string>() != kRerankerFormat) {
    return Invalid(document, "\"format\" must be \"" + std::string(kRerankerFormat) + "\"");
  }
  SemanticRerankerDocument out;
  auto reranker_variant = StringAt(doc, "reranker_variant", document);
  if (!reranker_variant.ok()) return reranker_variant.status();
  out.reranker_variant = *reranker_variant;
  auto embedding_variant = StringAt(doc, "embedding_variant", document);
  if (!embedding_variant.ok()) return embedding_variant.status();
  out.embedding_variant = *embedding_variant;
  auto min_cosine = SemanticDocumentNumber(doc, "min_cosine", document, "");
  if (!min_cosine.ok()) return min_cosine.status();
  if (*min_cosine < -1 || *min_cosine > 1) {
    return Invalid(document, "\"min_cosine\" must be in [-1, 1]");
  }
  out.min_cosine = *min_cosine;
  auto points = SemanticOperatingPoints::FromJson(doc, document);
  if (!points.ok()) return points.status();
  out.points = std::move(points).value();
  return out;
}

Result<SemanticRerankerDocument> SemanticRerankerDocument::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound("cannot read the reranker's operating points '" + path +
                            "' (tools/export_cross_encoder.py writes them beside the model)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto doc = FromJson(text.str());
  if (!doc.ok()) return Status(doc.status().code(), "'" + path + "': " + doc.status().message());
  return doc;
}

}  // namespace tailcut
