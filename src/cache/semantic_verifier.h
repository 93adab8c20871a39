// Semantic output cache: the decision whether a cached prompt found by nearest-neighbour search
// asks "the same question" as the incoming one, so that its generated answer may be reused.
//
// The embedding cosine alone makes that call poorly: on Quora Question Pairs the cosine
// threshold that reuses answers for 20 % of duplicate questions answers a different question
// in 12.5 % of its hits, because topically close questions that differ in one number, one
// name, one negation or the order of two words embed almost identically. So the decision takes
// a few cheap lexical features of the two texts next to the cosine (SemanticPairFeatures,
// computed here, in C++ only: the trainer, tools/semantic_cache_eval.py, gets them from
// `tailcut semantic-pairs`, so training and serving share one implementation) and a small
// trained model turns them into a probability that the two are duplicates (SemanticVerifier):
// 11.0 % wrong at that hit rate, and fewer wrong hits than the cosine at every hit rate a
// cache would run at. Much of what remains is label noise (docs/semantic-cache-evaluation.md).
//
// The operator states δ, the share of cache hits that may be wrong; the weights document
// carries a table of operating points (a probability threshold per δ, chosen on a calibration
// split, with the hit rate and wrong-hit share measured on a held-out test split), and
// ThresholdFor(δ) picks from it. data/semantic_verifier.json is the shipped document,
// compiled into the binary (Default()); docs/semantic-cache-evaluation.md has its numbers.
//
// Thread-safety: ExtractSemanticPairFeatures is a pure function. A SemanticVerifier is
// immutable after FromJson(); its const methods are safe to call concurrently.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cache/semantic_operating_points.h"
#include "common/status.h"

namespace tailcut {

// Features of a (query, cached prompt) pair. Texts are split into word tokens (runs of ASCII
// letters and digits, or non-ASCII bytes; an apostrophe inside a word is dropped, so "don't"
// and "dont" are one token) and compared lowercased. Counts are capped at kCountCap so one
// long text cannot dominate a linear model; the caps are constants, not options, because the
// trained weights are only valid for the features they were trained on.
struct SemanticPairFeatures {
  static constexpr size_t kCount = 14;
  static constexpr double kCountCap = 3;

  double cosine = 0;             // Cosine of the two texts' embeddings (given, not computed).
  double token_jaccard = 0;      // |A ∩ B| / |A ∪ B| over the token sets; 1 when both empty.
  double token_containment = 0;  // |A ∩ B| / min(|A|, |B|): one question inside the other.
  // Content words: tokens that are neither stop words nor question words, lightly stemmed
  // ("rankings" = "ranking").
  double content_jaccard = 0;         // Jaccard over the content words.
  double content_unmatched = 0;       // Content words in one text only (both ways), capped.
  double content_substituted = 0;     // min(only in A, only in B): words replaced, capped.
  double number_mismatch = 0;         // Number tokens (any digit) in one text only, capped.
  double negation_mismatch = 0;       // 1 when exactly one of the texts has a negation word.
  double question_word_mismatch = 0;  // 1 when the sets of wh-words (what, why, ...) differ.
  double entity_mismatch = 0;     // Name-like tokens of one text missing from the other, capped.
  double length_ratio = 0;        // Shorter / longer token count; 1 = same length, 0 = one empty.
  double length_diff_tokens = 0;  // |tokens(A) - tokens(B)|, capped at kLengthDiffCap.
  double antonym_mismatch = 0;    // 1 when one has "best" (say) and the other "worst" instead.
  double order_swap = 0;          // Share of shared content-word pairs in opposite orders, [0, 1].
  static constexpr double kLengthDiffCap = 20;

  // Feature names, in the order of Values(): the names the weights document uses.
  static const std::array<std::string_view, kCount>& Names();
  std::array<double, kCount> Values() const;
};

// Features of `query` (the incoming prompt) against `cached` (a cached prompt), given the
// cosine of their embeddings. Pure, deterministic and symmetric in the two texts; about 20 µs
// for question-sized texts (19.5 µs a pair over 5,000 QQP pairs, both texts analysed).
SemanticPairFeatures ExtractSemanticPairFeatures(std::string_view query, std::string_view cached,
                                                 double cosine);

class SemanticVerifier {
 public:
  // One row of the operating-point table (semantic_operating_points.h).
  using OperatingPoint = SemanticOperatingPoint;

  // Parses a weights document (format "tailcut.semantic_verifier/1", see
  // data/semantic_verifier.json). Every listed feature must be one of
  // SemanticPairFeatures::Names(); weights, means and scales must be finite, scales positive;
  // operating points need thresholds in [0, 1] and shares in [0, 1]; "embedding_variant", when
  // present, a non-empty string. Errors are
  // kInvalidArgument naming the field.
  static Result<SemanticVerifier> FromJson(std::string_view json);
  // The shipped document (data/semantic_verifier.json, compiled in at build time).
  static Result<SemanticVerifier> Default();
  // Its text, for tools that want to show or save it.
  static std::string_view DefaultJson();

  // Probability that the two texts are the same question (logistic regression over the
  // standardised features the document lists).
  double Probability(const SemanticPairFeatures& features) const;

  // The operating point for an accepted wrong-hit share δ: of the points whose measured
  // (test) wrong-hit share is at most δ, the one with the highest measured hit rate.
  // kInvalidArgument for δ outside [0, 1]; kNotFound, naming the table's range, when no
  // point is that safe.
  Result<OperatingPoint> OperatingPointFor(double max_wrong_hit_share) const;
  Result<double> ThresholdFor(double max_wrong_hit_share) const;
  // The δ the document recommends (its "default_max_wrong_hit_share"), and its point.
  double default_max_wrong_hit_share() const { return points_.default_max_wrong_hit_share(); }
  Result<OperatingPoint> DefaultOperatingPoint() const {
    return OperatingPointFor(points_.default_max_wrong_hit_share());
  }

  const std::vector<OperatingPoint>& operating_points() const { return points_.points(); }
  // The precision variant of the embedding model whose cosines the document was trained and
  // measured on (its optional "embedding_variant"; empty: the model's default). Its operating
  // points hold in that vector space only, so the server embeds queries with it.
  const std::string& embedding_variant() const { return embedding_variant_; }
  // Names of the features the model uses, in document order.
  std::vector<std::string> feature_names() const;

 private:
  struct Term {
    size_t feature = 0;  // Index into SemanticPairFeatures::Values().
    std::string name;
    double mean = 0;
    double scale = 1;
    double weight = 0;
  };

  std::vector<Term> terms_;
  double bias_ = 0;
  SemanticOperatingPoints points_;
  std::string embedding_variant_;
};

}  // namespace tailcut
