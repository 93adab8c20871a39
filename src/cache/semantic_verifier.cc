#include "cache/semantic_verifier.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>
#include <utility>

namespace tailcut {

namespace internal {
// Defined in the generated semantic_verifier_default.cc (src/cache/CMakeLists.txt).
std::string_view DefaultSemanticVerifierJson();
}  // namespace internal

namespace {

// Sorted, for binary search. Question words are left out: they have their own feature, and a
// "what" / "how" rewording should not count as a content difference twice.
constexpr std::string_view kStopWords[] = {
    "a",    "about", "all",   "am",    "an",     "and",   "any",   "are",  "as",   "at",    "be",
    "been", "being", "but",   "by",    "can",    "could", "did",   "do",   "does", "doing", "for",
    "from", "get",   "had",   "has",   "have",   "he",    "her",   "him",  "his",  "i",     "if",
    "in",   "into",  "is",    "it",    "its",    "me",    "might", "must", "my",   "of",    "on",
    "or",   "our",   "shall", "she",   "should", "so",    "some",  "than", "that", "the",   "their",
    "them", "then",  "there", "these", "they",   "this",  "those", "to",   "us",   "was",   "we",
    "were", "will",  "with",  "would", "you",    "your"};
constexpr std::string_view kQuestionWords[] = {"how", "what", "when",  "where", "which",
                                               "who", "whom", "whose", "why"};
// Apostrophes are dropped inside words, so "don't" arrives as "dont".
constexpr std::string_view kNegationWords[] = {
    "aint",  "arent",  "cannot",  "cant", "couldnt", "didnt",   "doesnt",  "dont",
    "hadnt", "hasnt",  "havent",  "isnt", "mustnt",  "neednt",  "neither", "never",
    "no",    "nobody", "none",    "nor",  "not",     "nothing", "nowhere", "shouldnt",
    "wasnt", "werent", "without", "wont", "wouldnt"};

// Word pairs where one text having one word and the other text the other (and not also the
// first) marks different questions: "advantages" against "disadvantages", "buy" against
// "sell". Compared on the words as written, before stemming.
constexpr std::pair<std::string_view, std::string_view> kAntonyms[] = {
    {"advantage", "disadvantage"},
    {"advantages", "disadvantages"},
    {"after", "before"},
    {"anonymously", "publicly"},
    {"bad", "good"},
    {"benefits", "drawbacks"},
    {"best", "worst"},
    {"better", "worse"},
    {"big", "small"},
    {"boy", "girl"},
    {"boys", "girls"},
    {"buy", "sell"},
    {"buying", "selling"},
    {"cheap", "expensive"},
    {"cold", "hot"},
    {"cons", "pros"},
    {"decrease", "increase"},
    {"difference", "similarity"},
    {"differences", "similarities"},
    {"differ", "similar"},
    {"different", "similar"},
    {"difficult", "easy"},
    {"east", "west"},
    {"end", "start"},
    {"export", "import"},
    {"failure", "success"},
    {"false", "true"},
    {"fast", "slow"},
    {"female", "male"},
    {"first", "last"},
    {"gain", "lose"},
    {"give", "receive"},
    {"given", "received"},
    {"happy", "sad"},
    {"hard", "easy"},
    {"hate", "love"},
    {"high", "low"},
    {"higher", "lower"},
    {"illegal", "legal"},
    {"learn", "teach"},
    {"least", "most"},
    {"less", "more"},
    {"lose", "win"},
    {"lost", "won"},
    {"man", "woman"},
    {"maximum", "minimum"},
    {"men", "women"},
    {"negative", "positive"},
    {"new", "old"},
    {"north", "south"},
    {"offline", "online"},
    {"old", "young"},
    {"poor", "rich"},
    {"private", "public"},
    {"right", "wrong"},
    {"start", "stop"},
    {"strengths", "weaknesses"},
    {"strong", "weak"},
};

static_assert(std::is_sorted(std::begin(kStopWords), std::end(kStopWords)));
static_assert(std::is_sorted(std::begin(kQuestionWords), std::end(kQuestionWords)));
static_assert(std::is_sorted(std::begin(kNegationWords), std::end(kNegationWords)));

bool Contains(std::span<const std::string_view> sorted, std::string_view word) {
  return std::binary_search(sorted.begin(), sorted.end(), word);
}

bool IsAsciiUpper(unsigned char c) {
  return c >= 'A' && c <= 'Z';
}
bool IsAsciiDigit(unsigned char c) {
  return c >= '0' && c <= '9';
}
bool IsWordByte(unsigned char c) {
  return c >= 0x80 || IsAsciiDigit(c) || (c >= 'a' && c <= 'z') || IsAsciiUpper(c);
}

// A light suffix stripper, so that "rankings" meets "ranking" and "studying" meets "study"
// when content words are compared: plural, then -ing / -ed / -ly, then a final e ("make",
// "making", "makes" -> "mak"). Deliberately crude (no dictionary): it only has to give the
// common inflections of one word one key, not to produce real stems.
std::string Stem(std::string w) {
  auto drop = [&w](size_t n) { w.resize(w.size() - n); };
  if (w.size() > 4 && w.ends_with("ies")) {
    drop(3);
    w.push_back('y');
  } else if (w.ends_with("sses")) {
    drop(2);
  } else if (w.size() > 4 && w.ends_with("es") &&
             (w.ends_with("shes") || w.ends_with("ches") || w.ends_with("xes") ||
              w.ends_with("zes"))) {
    drop(2);
  } else if (w.size() > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") &&
             !w.ends_with("is")) {
    drop(1);
  }
  if (w.size() >= 6 && w.ends_with("ing")) {
    drop(3);
  } else if (w.size() >= 5 && (w.ends_with("ed") || w.ends_with("ly"))) {
    drop(2);
  }
  if (w.size() > 3 && w.ends_with('e')) drop(1);
  return w;
}

struct Token {
  std::string lower;
  bool name_like = false;  // Capitalised mid-sentence, or capitals inside ("USA", "iPhone").
};

// Length in bytes of an apostrophe at `i` (ASCII ' or U+2019 ’), 0 if there is none.
size_t ApostropheAt(std::string_view s, size_t i) {
  if (s[i] == '\'') return 1;
  if (i + 2 < s.size() && static_cast<unsigned char>(s[i]) == 0xE2 &&
      static_cast<unsigned char>(s[i + 1]) == 0x80 &&
      static_cast<unsigned char>(s[i + 2]) == 0x99) {
    return 3;
  }
  return 0;
}

std::vector<Token> Tokenize(std::string_view s) {
  std::vector<Token> tokens;
  bool sentence_start = true;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t apostrophe = ApostropheAt(s, i);
    if (apostrophe == 0 && !IsWordByte(c)) {
      if (c == '.' || c == '?' || c == '!' || c == ':') sentence_start = true;
      ++i;
      continue;
    }
    if (apostrophe != 0) {  // Not inside a word (that case is consumed below): a separator.
      i += apostrophe;
      continue;
    }
    Token token;
    size_t uppers_after_first = 0;
    const bool first_upper = IsAsciiUpper(c);
    while (i < s.size()) {
      const auto b = static_cast<unsigned char>(s[i]);
      const size_t ap = ApostropheAt(s, i);
      if (ap != 0) {
        // Inside a word ("don't", "what's"): dropped, the word continues.
        if (i + ap < s.size() && IsWordByte(static_cast<unsigned char>(s[i + ap])) &&
            !token.lower.empty()) {
          i += ap;
          continue;
        }
        break;
      }
      if (!IsWordByte(b)) break;
      if (IsAsciiUpper(b)) {
        if (!token.lower.empty()) ++uppers_after_first;
        token.lower.push_back(static_cast<char>(b - 'A' + 'a'));
      } else {
        token.lower.push_back(static_cast<char>(b));
      }
      ++i;
    }
    // A capital at a sentence's start says nothing; "I" is always capitalised.
    token.name_like =
        uppers_after_first > 0 || (first_upper && !sentence_start && token.lower != "i");
    sentence_start = false;
    tokens.push_back(std::move(token));
  }
  return tokens;
}

std::vector<std::string> SortedUnique(std::vector<std::string> words) {
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

size_t IntersectionSize(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t n = 0;
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i < *j) {
      ++i;
    } else if (*j < *i) {
      ++j;
    } else {
      ++n;
      ++i;
      ++j;
    }
  }
  return n;
}

double Jaccard(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const size_t both = IntersectionSize(a, b);
  const size_t either = a.size() + b.size() - both;
  return either == 0 ? 1.0 : static_cast<double>(both) / static_cast<double>(either);
}

// Words of one text, sorted and deduplicated, by kind.
struct WordSets {
  std::vector<std::string> all;
  std::vector<std::string> content;           // Stemmed.
  std::vector<std::string> content_in_order;  // Stemmed, as they appear (repeats kept).
  std::vector<std::string> numbers;
  std::vector<std::string> question_words;
  std::vector<std::string> names;
  size_t token_count = 0;
  bool negated = false;
};

WordSets Analyse(std::string_view text) {
  WordSets w;
  std::vector<Token> tokens = Tokenize(text);
  w.token_count = tokens.size();
  for (Token& t : tokens) {
    const std::string& word = t.lower;
    if (Contains(kNegationWords, word)) w.negated = true;
    if (Contains(kQuestionWords, word)) {
      w.question_words.push_back(word);
    } else if (!Contains(kStopWords, word)) {
      w.content_in_order.push_back(Stem(word));
    }
    if (std::any_of(word.begin(), word.end(),
                    [](char ch) { return IsAsciiDigit(static_cast<unsigned char>(ch)); })) {
      w.numbers.push_back(word);
    }
    if (t.name_like) w.names.push_back(word);
    w.all.push_back(std::move(t.lower));
  }
  w.all = SortedUnique(std::move(w.all));
  w.content = SortedUnique(w.content_in_order);
  w.numbers = SortedUnique(std::move(w.numbers));
  w.question_words = SortedUnique(std::move(w.question_words));
  w.names = SortedUnique(std::move(w.names));
  return w;
}

// Members of `x` missing from `y`.
size_t Missing(const std::vector<std::string>& x, const std::vector<std::string>& y) {
  return x.size() - IntersectionSize(x, y);
}

double Cap(size_t n, double cap) {
  return std::min(static_cast<double>(n), cap);
}

bool Has(const std::vector<std::string>& sorted, std::string_view word) {
  return std::binary_search(sorted.begin(), sorted.end(), word);
}

// One text has a word of an antonym pair and the other its counterpart, which the first
// lacks ("advantages" against "advantages and disadvantages" counts too).
bool AntonymMismatch(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  auto one_way = [](const std::vector<std::string>& p, const std::vector<std::string>& q,
                    std::string_view u,
                    std::string_view v) { return Has(p, u) && Has(q, v) && !Has(p, v); };
  for (const auto& [x, y] : kAntonyms) {
    if (one_way(a, b, x, y) || one_way(a, b, y, x) || one_way(b, a, x, y) || one_way(b, a, y, x)) {
      return true;
    }
  }
  return false;
}

// Share of the pairs of shared content words that the two texts put in opposite orders
// (Kendall's distance, by each word's first position): "Why is Messi better than Ronaldo?"
// against "... Ronaldo better than Messi?" is 1, a rewording that keeps the order 0.
double OrderSwap(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  auto first_positions = [](const std::vector<std::string>& words) {
    std::vector<std::pair<std::string_view, size_t>> first;
    for (size_t i = 0; i < words.size(); ++i) {
      const bool seen = std::any_of(first.begin(), first.end(),
                                    [&](const auto& e) { return e.first == words[i]; });
      if (!seen) first.emplace_back(words[i], i);
    }
    return first;  // In order of position.
  };
  const auto in_a = first_positions(a);
  const auto in_b = first_positions(b);
  std::vector<size_t> a_positions;  // Of the shared words, in b's order.
  for (const auto& [word, b_pos] : in_b) {
    for (const auto& [other, a_pos] : in_a) {
      if (other == word) {
        a_positions.push_back(a_pos);
        break;
      }
    }
  }
  const size_t n = a_positions.size();
  if (n < 2) return 0.0;
  size_t discordant = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) discordant += a_positions[i] > a_positions[j] ? 1 : 0;
  }
  return static_cast<double>(discordant) / static_cast<double>(n * (n - 1) / 2);
}

}  // namespace

const std::array<std::string_view, SemanticPairFeatures::kCount>& SemanticPairFeatures::Names() {
  static constexpr std::array<std::string_view, kCount> kNames = {
      "cosine",           "token_jaccard",     "token_containment",
      "content_jaccard",  "content_unmatched", "content_substituted",
      "number_mismatch",  "negation_mismatch", "question_word_mismatch",
      "entity_mismatch",  "length_ratio",      "length_diff_tokens",
      "antonym_mismatch", "order_swap"};
  return kNames;
}

std::array<double, SemanticPairFeatures::kCount> SemanticPairFeatures::Values() const {
  return {cosine,           token_jaccard,     token_containment,
          content_jaccard,  content_unmatched, content_substituted,
          number_mismatch,  negation_mismatch, question_word_mismatch,
          entity_mismatch,  length_ratio,      length_diff_tokens,
          antonym_mismatch, order_swap};
}

SemanticPairFeatures ExtractSemanticPairFeatures(std::string_view query, std::string_view cached,
                                                 double cosine) {
  const WordSets a = Analyse(query);
  const WordSets b = Analyse(cached);
  SemanticPairFeatures f;
  f.cosine = cosine;
  f.token_jaccard = Jaccard(a.all, b.all);
  const size_t shorter = std::min(a.all.size(), b.all.size());
  f.token_containment = shorter == 0 ? (a.all.size() == b.all.size() ? 1.0 : 0.0)
                                     : static_cast<double>(IntersectionSize(a.all, b.all)) /
                                           static_cast<double>(shorter);
  f.content_jaccard = Jaccard(a.content, b.content);
  const size_t content_only_a = Missing(a.content, b.content);
  const size_t content_only_b = Missing(b.content, a.content);
  f.content_unmatched = Cap(content_only_a + content_only_b, SemanticPairFeatures::kCountCap);
  f.content_substituted =
      Cap(std::min(content_only_a, content_only_b), SemanticPairFeatures::kCountCap);
  f.number_mismatch = Cap(Missing(a.numbers, b.numbers) + Missing(b.numbers, a.numbers),
                          SemanticPairFeatures::kCountCap);
  f.negation_mismatch = a.negated != b.negated ? 1.0 : 0.0;
  f.question_word_mismatch = a.question_words != b.question_words ? 1.0 : 0.0;
  // A name is missing when the other text does not have the word at all (in any case), so
  // "python" against "Python" is no mismatch.
  f.entity_mismatch =
      Cap(Missing(a.names, b.all) + Missing(b.names, a.all), SemanticPairFeatures::kCountCap);
  const size_t longer = std::max(a.token_count, b.token_count);
  f.length_ratio = longer == 0 ? 1.0
                               : static_cast<double>(std::min(a.token_count, b.token_count)) /
                                     static_cast<double>(longer);
  f.length_diff_tokens =
      Cap(longer - std::min(a.token_count, b.token_count), SemanticPairFeatures::kLengthDiffCap);
  f.antonym_mismatch = AntonymMismatch(a.all, b.all) ? 1.0 : 0.0;
  f.order_swap = OrderSwap(a.content_in_order, b.content_in_order);
  return f;
}

namespace {

using nlohmann::json;

constexpr std::string_view kFormat = "tailcut.semantic_verifier/1";

Status Invalid(const std::string& what) {
  return Status::InvalidArgument("semantic verifier weights: " + what);
}

// A finite number at `key` of `object`, described as `where` in errors.
Result<double> NumberAt(const json& object, const char* key, const std::string& where) {
  return SemanticDocumentNumber(object, key, "semantic verifier weights", where);
}

}  // namespace

Result<SemanticVerifier> SemanticVerifier::FromJson(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999.
    // A trainer that let a NaN or an infinity through writes them as bare words (Python's
    // json does), which JSON cannot hold: say so rather than only where parsing stopped.
    const bool non_finite = text.find("NaN") != std::string_view::npos ||
                            text.find("Infinity") != std::string_view::npos;
    return Invalid(std::string("not valid JSON (") + e.what() + ")" +
                   (non_finite ? "; it seems to hold a non-finite number (NaN or Infinity), "
                                 "which means the training diverged"
                               : ""));
  }
  if (!doc.is_object()) return Invalid("the document must be a JSON object");
  auto format = doc.find("format");
  if (format == doc.end() || !format->is_string() || format->get<std::string>() != kFormat) {
    return Invalid("\"format\" must be \"" + std::string(kFormat) + "\"");
  }
  auto model = doc.find("model");
  if (model == doc.end() || !model->is_string() ||
      model->get<std::string>() != "logistic_regression") {
    return Invalid("\"model\" must be \"logistic_regression\" (the only kind this build knows)");
  }

  SemanticVerifier v;
  if (auto variant = doc.find("embedding_variant"); variant != doc.end()) {
    if (!variant->is_string() || variant->get<std::string>().empty()) {
      return Invalid("\"embedding_variant\" must be a non-empty string (a variant's name)");
    }
    v.embedding_variant_ = variant->get<std::string>();
  }
  auto bias = NumberAt(doc, "bias", "");
  if (!bias.ok()) return bias.status();
  v.bias_ = *bias;

  auto features = doc.find("features");
  if (features == doc.end() || !features->is_array() || features->empty()) {
    return Invalid("\"features\" must be a non-empty array");
  }
  const auto& names = SemanticPairFeatures::Names();
  for (size_t i = 0; i < features->size(); ++i) {
    const json& f = (*features)[i];
    const std::string where = "features[" + std::to_string(i) + "] ";
    if (!f.is_object()) return Invalid(where + "must be an object");
    auto name = f.find("name");
    if (name == f.end() || !name->is_string()) return Invalid(where + "needs a string \"name\"");
    Term term;
    term.name = name->get<std::string>();
    auto known = std::find(names.begin(), names.end(), term.name);
    if (known == names.end()) {
      return Invalid(where + "names unknown feature \"" + term.name + "\"");
    }
    term.feature = static_cast<size_t>(known - names.begin());
    for (const Term& t : v.terms_) {
      if (t.feature == term.feature) return Invalid(where + "repeats \"" + term.name + "\"");
    }
    auto mean = NumberAt(f, "mean", where);
    if (!mean.ok()) return mean.status();
    auto scale = NumberAt(f, "scale", where);
    if (!scale.ok()) return scale.status();
    auto weight = NumberAt(f, "weight", where);
    if (!weight.ok()) return weight.status();
    if (*scale <= 0) return Invalid(where + "\"scale\" must be positive");
    term.mean = *mean;
    term.scale = *scale;
    term.weight = *weight;
    v.terms_.push_back(std::move(term));
  }

  auto points = SemanticOperatingPoints::FromJson(doc, "semantic verifier weights");
  if (!points.ok()) return points.status();
  v.points_ = std::move(points).value();
  return v;
}

Result<SemanticVerifier> SemanticVerifier::Default() {
  return FromJson(internal::DefaultSemanticVerifierJson());
}

std::string_view SemanticVerifier::DefaultJson() {
  return internal::DefaultSemanticVerifierJson();
}

double SemanticVerifier::Probability(const SemanticPairFeatures& features) const {
  const auto values = features.Values();
  double z = bias_;
  for (const Term& t : terms_) z += t.weight * (values[t.feature] - t.mean) / t.scale;
  return ProbabilityOfLogit(z);
}

Result<SemanticVerifier::OperatingPoint> SemanticVerifier::OperatingPointFor(
    double max_wrong_hit_share) const {
  return points_.For(max_wrong_hit_share);
}

Result<double> SemanticVerifier::ThresholdFor(double max_wrong_hit_share) const {
  auto point = OperatingPointFor(max_wrong_hit_share);
  if (!point.ok()) return point.status();
  return point->threshold;
}

std::vector<std::string> SemanticVerifier::feature_names() const {
  std::vector<std::string> out;
  out.reserve(terms_.size());
  for (const Term& t : terms_) out.push_back(t.name);
  return out;
}

}  // namespace tailcut
