#include "text/wordpiece_tokenizer.h"

#include <algorithm>
#include <limits>
#include <span>

#include "text/utf8.h"

namespace tailcut {
namespace {

// Text is processed in spans cut just after ASCII whitespace. Cutting there is exact:
// whitespace ends a word, has combining class 0 (canonical reordering never crosses it), and
// every other step is per character. ASCII spans take the per-byte fast path even when other
// words of the text are not ASCII; spans for the general path are kept near kSpanBytes so its
// buffers stay small and a truncated encode stops soon after the limit.
constexpr size_t kSpanBytes = 4096;
constexpr std::string_view kAsciiWhitespace = " \t\n\r";
// Scratch buffers that grew past this (a huge request) are released afterwards, so one
// outlier does not pin memory in every worker thread.
constexpr size_t kScratchKeepBytes = size_t{1} << 20;

struct Span {
  size_t end;
  bool ascii;
};

Span NextSpan(std::string_view text, size_t pos) {
  const size_t n = text.size();
  const size_t first_non_ascii = FindNonAscii(text, pos);
  if (first_non_ascii == n) return {n, true};
  if (first_non_ascii > pos) {
    const size_t ws = text.find_last_of(kAsciiWhitespace, first_non_ascii - 1);
    if (ws != std::string_view::npos && ws >= pos) return {ws + 1, true};
  }
  // A general span: the word holding first_non_ascii, plus following words while they too
  // hold non-ASCII bytes.
  size_t end = first_non_ascii;
  for (;;) {
    const size_t ws = text.find_first_of(kAsciiWhitespace, end);
    if (ws == std::string_view::npos) return {n, false};
    end = ws + 1;
    if (end - pos >= kSpanBytes) return {end, false};
    const size_t next_non_ascii = FindNonAscii(text, end);
    if (next_non_ascii == n) return {end, false};
    const size_t next_ws = text.find_first_of(kAsciiWhitespace, end);
    if (next_ws != std::string_view::npos && next_ws < next_non_ascii) return {end, false};
    end = next_non_ascii;
  }
}

template <typename T>
void ReleaseIfHuge(T& buffer) {
  if (buffer.capacity() * sizeof(buffer[0]) > kScratchKeepBytes) T().swap(buffer);
}

}  // namespace

struct WordPieceTokenizer::Scratch {
  std::string repaired;              // The input with invalid UTF-8 replaced.
  std::vector<char32_t> normalized;  // Normalizer output for one span.
  std::vector<char32_t> stage;       // Normalizer scratch.
  std::string word;                  // One word in UTF-8.

  void Trim() {
    ReleaseIfHuge(repaired);
    ReleaseIfHuge(normalized);
    ReleaseIfHuge(stage);
    ReleaseIfHuge(word);
  }
};

WordPieceTokenizer::Scratch& WordPieceTokenizer::ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromTokenizerJson(
    const std::string& path, int max_length_tokens) {
  Result<TokenizerSpec> spec = ParseTokenizerJsonFile(path);
  if (!spec.ok()) return spec.status();
  return FromSpec(*spec, max_length_tokens, path);
}

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromVocabTxt(
    const std::string& path, int max_length_tokens, bool lowercase) {
  Result<VocabEntries> vocab = ReadVocabTxt(path);
  if (!vocab.ok()) return vocab.status();
  TokenizerSpec spec;
  spec.normalizer = {true, true, lowercase, lowercase};
  spec.vocab = std::move(vocab).value();
  int64_t cls = -1;
  int64_t sep = -1;
  for (const char* token : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    const auto it = std::find_if(spec.vocab.begin(), spec.vocab.end(),
                                 [token](const auto& e) { return e.first == token; });
    if (it == spec.vocab.end()) continue;
    spec.added_tokens.push_back({token, it->second});
    if (it->first == "[CLS]") cls = it->second;
    if (it->first == "[SEP]") sep = it->second;
    if (it->first == "[PAD]") spec.pad_id = it->second;
  }
  if (cls < 0 || sep < 0) {
    return Status::InvalidArgument("vocab file '" + path + "' has no [CLS] or no [SEP] token");
  }
  spec.prefix_ids = {cls};
  spec.suffix_ids = {sep};
  spec.pair = BertPairTemplate(cls, sep);
  return FromSpec(spec, max_length_tokens, path);
}

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromSpec(
    const TokenizerSpec& spec, int max_length_tokens, const std::string& source) {
  const size_t specials = spec.prefix_ids.size() + spec.suffix_ids.size();
  if (max_length_tokens <= 0 || static_cast<size_t>(max_length_tokens) <= specials) {
    return Status::InvalidArgument(
        "tokenizer '" + source + "': max length " + std::to_string(max_length_tokens) +
        " leaves no room for text after " + std::to_string(specials) + " special tokens");
  }
  Result<WordPieceModel> model = WordPieceModel::Create(spec.vocab, spec.wordpiece);
  if (!model.ok()) {
    return Status(model.status().code(), "tokenizer '" + source + "': " + model.status().message());
  }
  const BertNormalizer normalizer(spec.normalizer);
  Result<AsciiFastPath> ascii = AsciiFastPath::Build(normalizer);
  if (!ascii.ok()) return ascii.status();
  return std::unique_ptr<WordPieceTokenizer>(new WordPieceTokenizer(
      spec, std::move(model).value(), std::move(ascii).value(), max_length_tokens));
}

WordPieceTokenizer::WordPieceTokenizer(const TokenizerSpec& spec, WordPieceModel model,
                                       AsciiFastPath ascii, int max_length)
    : normalizer_(spec.normalizer),
      ascii_(ascii),
      model_(std::move(model)),
      added_tokens_(spec.added_tokens),
      added_token_list_(spec.added_tokens),
      prefix_ids_(spec.prefix_ids),
      suffix_ids_(spec.suffix_ids),
      pair_(spec.pair),
      max_length_(max_length),
      pad_id_(spec.pad_id) {
  vocab_size_ = model_.vocab_size();
  for (const AddedToken& t : added_token_list_) {
    if (model_.TokenToId(t.content) == VocabMap::kNotFound) ++vocab_size_;
  }
}

int64_t WordPieceTokenizer::TokenToId(std::string_view token) const {
  for (const AddedToken& t : added_token_list_) {
    if (t.content == token) return t.id;
  }
  return model_.TokenToId(token);
}

bool WordPieceTokenizer::EncodeText(std::string_view text, Scratch& scratch,
                                    std::vector<int64_t>& out, size_t stop_at) const {
  const auto on_ascii_word = [&](std::string_view word) {
    model_.TokenizeWord(word, word.size(), out);
    return out.size() < stop_at;
  };
  const auto on_word = [&](std::span<const char32_t> word) {
    scratch.word.clear();
    for (const char32_t cp : word) AppendUtf8(cp, scratch.word);
    model_.TokenizeWord(scratch.word, word.size(), out);
    return out.size() < stop_at;
  };
  for (size_t pos = 0; pos < text.size();) {
    const Span span = NextSpan(text, pos);
    const std::string_view chunk = text.substr(pos, span.end - pos);
    if (span.ascii) {
      ascii_.ForEachWord(chunk, scratch.word, on_ascii_word);
    } else {
      normalizer_.Normalize(chunk, scratch.normalized, scratch.stage);
      pre_tokenizer_.ForEachWord(scratch.normalized, on_word);
    }
    if (out.size() >= stop_at) return false;
    pos = span.end;
  }
  return true;
}

Result<size_t> WordPieceTokenizer::LimitFor(const EncodeOptions& options, size_t specials) const {
  if (options.max_length_tokens < 0) {
    return Status::InvalidArgument("max_length_tokens must be >= 0, got " +
                                   std::to_string(options.max_length_tokens));
  }
  const size_t limit = static_cast<size_t>(options.max_length_tokens == 0
                                               ? max_length_
                                               : std::min(options.max_length_tokens, max_length_));
  if (limit < specials) {
    return Status::InvalidArgument("max_length_tokens " + std::to_string(limit) +
                                   " is smaller than the " + std::to_string(specials) +
                                   " special tokens");
  }
  return limit;
}

void WordPieceTokenizer::EncodePieces(std::string_view utf8, Scratch& scratch,
                                      std::vector<int64_t>& out, size_t stop_at) const {
  std::string_view text = utf8;
  if (!ScanUtf8(text).valid) {
    scratch.repaired.clear();
    AppendUtf8Replacing(text, scratch.repaired);
    text = scratch.repaired;
  }
  if (added_tokens_.empty()) {
    EncodeText(text, scratch, out, stop_at);
  } else {
    added_tokens_.Split(
        text, [&](std::string_view run) { return EncodeText(run, scratch, out, stop_at); },
        [&](int64_t id) {
          out.push_back(id);
          return out.size() < stop_at;
        });
  }
}

Result<Encoding> WordPieceTokenizer::Encode(std::string_view utf8,
                                            const EncodeOptions& options) const {
  const size_t specials = num_special_tokens();
  const Result<size_t> limit = LimitFor(options, specials);
  if (!limit.ok()) return limit.status();
  const size_t budget = *limit - specials;  // Pieces of text that fit.

  Scratch& scratch = ThreadScratch();
  Encoding encoding;
  std::vector<int64_t>& ids = encoding.ids;
  ids.reserve(std::min(utf8.size(), budget + 1) + specials);
  ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  // One piece past the budget is enough to know the text is too long, to cut it or to refuse
  // it: a 4 MiB text costs no more to refuse than one just over the limit.
  EncodePieces(utf8, scratch, ids, prefix_ids_.size() + budget + 1);
  scratch.Trim();

  const size_t pieces = ids.size() - prefix_ids_.size();
  if (pieces > budget) {
    if (!options.truncate) {
      return Status::PayloadTooLarge(
          "input is longer than the model allows: more than the limit of " +
          std::to_string(*limit) +
          " tokens (special tokens included); shorten it, or ask for "
          "truncation");
    }
    ids.resize(prefix_ids_.size() + budget);
    encoding.truncated = true;
  }
  ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return encoding;
}

Result<Encoding> WordPieceTokenizer::EncodePair(std::string_view first, std::string_view second,
                                                const EncodeOptions& options) const {
  if (!pair_) {
    return Status::InvalidArgument(
        "this tokenizer has no pair form (its tokenizer.json post_processor has no \"pair\" "
        "template of the form specials A specials B specials), so it cannot encode text pairs");
  }
  const PairTemplate& t = *pair_;
  const size_t specials = t.num_special_tokens();
  const Result<size_t> limit = LimitFor(options, specials);
  if (!limit.ok()) return limit.status();
  const size_t budget = *limit - specials;

  Scratch& scratch = ThreadScratch();
  std::vector<int64_t> a;
  std::vector<int64_t> b;
  // As in Encode(), a piece past the budget says enough, except in one case below.
  EncodePieces(first, scratch, a, budget + 1);
  EncodePieces(second, scratch, b, budget + 1);
  bool truncated = false;
  if (a.size() + b.size() > budget) {
    if (!options.truncate) {
      scratch.Trim();
      return Status::PayloadTooLarge(
          "the pair is longer than the model allows: more than the limit "
          "of " +
          std::to_string(*limit) +
          " tokens (special tokens included); shorten the texts, or "
          "ask for truncation");
    }
    // HF's longest_first: the longer text is cut first; once both are over half of the room,
    // the shorter keeps budget / 2 and the longer the rest (the second text counts as the
    // longer on a tie). Capped lengths decide that except when both texts are over the whole
    // budget and it is odd: then the longer keeps the extra token, so measure both in full.
    if (a.size() > budget && b.size() > budget && budget % 2 == 1) {
      a.clear();
      b.clear();
      EncodePieces(first, scratch, a, std::numeric_limits<size_t>::max());
      EncodePieces(second, scratch, b, std::numeric_limits<size_t>::max());
    }
    const bool first_longer = a.size() > b.size();
    const size_t shorter = std::min(first_longer ? b.size() : a.size(), budget / 2);
    const size_t longer = budget - shorter;
    a.resize(first_longer ? longer : shorter);
    b.resize(first_longer ? shorter : longer);
    truncated = true;
  }
  scratch.Trim();

  Encoding encoding;
  encoding.truncated = truncated;
  std::vector<int64_t>& ids = encoding.ids;
  std::vector<int64_t>& types = encoding.type_ids;
  ids.reserve(a.size() + b.size() + specials);
  types.reserve(ids.capacity());
  const auto append = [&](const std::vector<int64_t>& part, int64_t type) {
    ids.insert(ids.end(), part.begin(), part.end());
    types.insert(types.end(), part.size(), type);
  };
  const auto append_specials = [&](const std::vector<int64_t>& part,
                                   const std::vector<int64_t>& part_types) {
    ids.insert(ids.end(), part.begin(), part.end());
    types.insert(types.end(), part_types.begin(), part_types.end());
  };
  append_specials(t.before_a_ids, t.before_a_types);
  append(a, t.a_type);
  append_specials(t.between_ids, t.between_types);
  append(b, t.b_type);
  append_specials(t.after_b_ids, t.after_b_types);
  return encoding;
}

}  // namespace tailcut
