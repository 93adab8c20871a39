// The operating-point table of a semantic-cache decision (the verifier's, the reranker's): for
// each accepted wrong-hit share δ, the score threshold chosen on a calibration split and what
// it measured on pairs used for nothing else, and the choice of a threshold for an operator's
// δ. Both documents carry the table in one shape ("operating_points",
// "default_max_wrong_hit_share"); this reads it and chooses from it.
//
// Also: SemanticRerankerDocument, the reranker policy's document
// (tools/calibrate_cross_encoder.py, format "tailcut.semantic_reranker/1").
//
// Thread-safety: immutable after parsing; const methods are safe to call concurrently.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tailcut {

// One row: hit_rate = duplicate pairs that hit / duplicate pairs; wrong_hit_share =
// non-duplicate pairs that hit / all pairs that hit.
struct SemanticOperatingPoint {
  double max_wrong_hit_share = 0;  // δ the threshold was chosen for (calibration split).
  double threshold = 0;            // Reuse the cached answer when the score >= this.
  double hit_rate = 0;             // Measured on the held-out test split.
  double wrong_hit_share = 0;      // Measured on the held-out test split.
};

class SemanticOperatingPoints {
 public:
  // Reads doc's "operating_points" (a non-empty array of objects with the four fields, each in
  // [0, 1]) and "default_max_wrong_hit_share" (which must have a point). `document` names the
  // document in errors (kInvalidArgument: "<document>: <what is wrong>").
  static Result<SemanticOperatingPoints> FromJson(const nlohmann::json& doc,
                                                  const std::string& document);

  // Of the points whose measured (test) wrong-hit share is at most δ, the one with the highest
  // measured hit rate. kInvalidArgument for δ outside [0, 1]; kNotFound, naming the table's
  // range, when no point is that safe.
  Result<SemanticOperatingPoint> For(double max_wrong_hit_share) const;
  double default_max_wrong_hit_share() const { return default_max_wrong_hit_share_; }
  const std::vector<SemanticOperatingPoint>& points() const { return points_; }

 private:
  std::string document_;
  std::vector<SemanticOperatingPoint> points_;
  double default_max_wrong_hit_share_ = 0;
};

// The probability a decision's logit stands for, 1 / (1 + e^-z), computed so that neither
// branch overflows exp() for a large |z|.
double ProbabilityOfLogit(double z);

// A finite number at `key` of `object`; errors are kInvalidArgument "<document>: <where>"key"
// ...". For the documents' other fields.
Result<double> SemanticDocumentNumber(const nlohmann::json& object, const char* key,
                                      const std::string& document, const std::string& where);

// The reranker policy's document: under semantic.policy "reranker" a candidate whose cosine is
// at least min_cosine is scored by the reranker (the probability sigmoid(logit) of (query,
// cached prompt)), and reused when that reaches the threshold the operator's δ picks.
struct SemanticRerankerDocument {
  // kInvalidArgument naming the field ("format" must be "tailcut.semantic_reranker/1"; the
  // variants non-empty strings; min_cosine in [-1, 1]).
  static Result<SemanticRerankerDocument> FromJson(std::string_view text);
  // FromJson of a file; kNotFound naming the path when it cannot be read.
  static Result<SemanticRerankerDocument> Load(const std::string& path);

  std::string reranker_variant;   // The variant the points were measured with.
  std::string embedding_variant;  // The embedding variant the cosines were measured in.
  double min_cosine = 0;          // Candidates below it are never scored.
  SemanticOperatingPoints points;
};

}  // namespace tailcut
