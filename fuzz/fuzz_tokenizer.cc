// Fuzz target: WordPieceTokenizer::Encode() on arbitrary bytes (invalid UTF-8 included) with
// the all-MiniLM-L6-v2 tokenizer.json, and options taken from the input's first two bytes.
//
// Input layout: byte 0 picks max_length_tokens (a few edge values, else the byte itself),
// byte 1 bit 0 sets truncate, the rest is the text. Byte 1 bit 1 makes it a pair instead
// (EncodePair, as a cross-encoder reads two texts): the rest is cut at its first 0x1F byte,
// or in the middle when there is none.
//
// Oracles: errors only where the contract allows them (a bad limit: InvalidArgument; too long
// without truncation: PayloadTooLarge); results start with [CLS] (101), end with [SEP] (102),
// fit the limit, hold only ids below the vocabulary size, and are a prefix of the same text
// encoded at the model's maximum (truncation cuts the end, and the early stop that skips
// normalising the rest of a long text must not change what comes before the cut). Pairs:
// [CLS] a [SEP] b [SEP] with token types 0 up to the first [SEP] and 1 after it; each text's
// pieces a prefix of its own encoding; a text kept whole when not cut, and a cut one keeping
// at least half of the room (longest_first).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "text/wordpiece_tokenizer.h"

namespace {

using tailcut::fuzz::Check;

const tailcut::WordPieceTokenizer& Tokenizer() {
  static const std::unique_ptr<tailcut::WordPieceTokenizer> tokenizer = [] {
    // The default model's file, as scripts/setup.sh exports it; overridable for other trees.
    const char* env = std::getenv("TAILCUT_FUZZ_TOKENIZER_JSON");
    const std::string path =
        env ? env : std::string(TAILCUT_SOURCE_DIR) + "/models/all-MiniLM-L6-v2/tokenizer.json";
    auto t = tailcut::WordPieceTokenizer::FromTokenizerJson(path);
    if (!t.ok()) {
      std::fprintf(stderr, "fuzz_tokenizer: %s (run scripts/setup.sh)\n",
                   t.status().ToString().c_str());
      std::abort();
    }
    return std::move(t).value();
  }();
  return *tokenizer;
}

int MaxLengthFromByte(uint8_t b) {
  switch (b) {
    case 0:
      return 0;  // The model's maximum.
    case 1:
      return -1;
    case 2:
      return 1;  // Fewer than the two special tokens.
    case 3:
      return 2;  // Room for no text at all.
    case 4:
      return 256;
    case 5:
      return 257;  // Clamped to the maximum.
    case 6:
      return 100000;
    default:
      return b;
  }
}

// The pieces of `text` alone (no [CLS] / [SEP]), at the model's maximum.
std::vector<int64_t> PiecesAlone(const tailcut::WordPieceTokenizer& tok, std::string_view text) {
  auto alone = tok.Encode(text, tailcut::EncodeOptions{});
  Check(alone.ok(), "encoding with truncation at the model maximum must not fail");
  return std::vector<int64_t>(alone->ids.begin() + 1, alone->ids.end() - 1);
}

void CheckPair(const tailcut::WordPieceTokenizer& tok, std::string_view text,
               const tailcut::EncodeOptions& options, int limit) {
  size_t cut = text.find('\x1f');
  const std::string_view first =
      text.substr(0, cut == std::string_view::npos ? text.size() / 2 : cut);
  const std::string_view second =
      text.substr(cut == std::string_view::npos ? first.size() : first.size() + 1);
  auto result = tok.EncodePair(first, second, options);
  if (options.max_length_tokens < 0 || limit < 3) {
    Check(!result.ok() && result.status().code() == tailcut::Status::Code::kInvalidArgument,
          "a bad max_length_tokens must be InvalidArgument for a pair");
    return;
  }
  const std::vector<int64_t> a = PiecesAlone(tok, first);
  const std::vector<int64_t> b = PiecesAlone(tok, second);
  if (!result.ok()) {
    Check(!options.truncate && result.status().code() == tailcut::Status::Code::kPayloadTooLarge,
          "only an over-long pair without truncation may fail");
    Check(a.size() + b.size() + 3 > static_cast<size_t>(limit),
          "PayloadTooLarge for a pair that fits");
    return;
  }
  const auto& ids = result->ids;
  const auto& types = result->type_ids;
  Check(ids.size() >= 3 && ids.size() <= static_cast<size_t>(limit),
        "a pair's size is out of bounds");
  Check(types.size() == ids.size(), "a type id for every id");
  Check(ids.front() == 101 && ids.back() == 102, "a pair must be [CLS] ... [SEP]");
  // Where the first text ends: the type ids say it (0 up to and including the middle [SEP]).
  size_t ones = 0;
  while (ones < types.size() && types[types.size() - 1 - ones] == 1) ++ones;
  Check(
      ones >= 1 && std::all_of(types.begin(), types.end() - ones, [](int64_t t) { return t == 0; }),
      "type ids must be 0s then 1s");
  const size_t kept_a = ids.size() - ones - 2;
  const size_t kept_b = ones - 1;
  Check(ids[1 + kept_a] == 102, "the first text must end with [SEP]");
  Check(kept_a <= a.size() && std::equal(ids.begin() + 1, ids.begin() + 1 + kept_a, a.begin()),
        "the first text's pieces are not a prefix of its own encoding");
  Check(kept_b <= b.size() && std::equal(ids.begin() + 2 + kept_a, ids.end() - 1, b.begin()),
        "the second text's pieces are not a prefix of its own encoding");
  const size_t budget = static_cast<size_t>(limit) - 3;
  if (!result->truncated) {
    Check(kept_a == a.size() && kept_b == b.size(), "an uncut pair lost pieces");
    return;
  }
  Check(options.truncate, "truncated although truncation is off");
  Check(kept_a + kept_b == budget, "a cut pair must fill the limit exactly");
  Check(kept_a == a.size() || kept_a >= budget / 2, "a cut first text keeps under half the room");
  Check(kept_b == b.size() || kept_b >= budget / 2, "a cut second text keeps under half the room");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = Tokenizer();
  if (size < 2) return 0;
  tailcut::EncodeOptions options;
  options.max_length_tokens = MaxLengthFromByte(data[0]);
  options.truncate = data[1] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const int max = tok.max_length();
  const int limit = options.max_length_tokens == 0 ? max : std::min(options.max_length_tokens, max);
  if (data[1] & 2) {
    CheckPair(tok, text, options, limit);
    return 0;
  }
  const int64_t cls = tok.TokenToId("[CLS]");
  const int64_t sep = tok.TokenToId("[SEP]");
  Check(cls == 101 && sep == 102, "[CLS] and [SEP] are 101 and 102 in this vocabulary");

  auto result = tok.Encode(text, options);
  if (options.max_length_tokens < 0 || limit < 2) {
    Check(!result.ok() && result.status().code() == tailcut::Status::Code::kInvalidArgument,
          "a bad max_length_tokens must be InvalidArgument");
    return 0;
  }
  // The reference: the whole text at the model's maximum, truncated.
  auto full = tok.Encode(text, tailcut::EncodeOptions{});
  Check(full.ok(), "encoding with truncation at the model maximum must not fail");
  const auto& ref = full->ids;

  if (!result.ok()) {
    Check(!options.truncate && result.status().code() == tailcut::Status::Code::kPayloadTooLarge,
          "only an over-long text without truncation may fail");
    // Too long for `limit`: the reference has more pieces than fit, or was cut itself.
    Check(full->truncated || ref.size() > static_cast<size_t>(limit),
          "PayloadTooLarge for a text that fits");
    return 0;
  }
  const auto& ids = result->ids;
  Check(ids.size() >= 2 && ids.front() == cls && ids.back() == sep, "ids must be [CLS] ... [SEP]");
  Check(ids.size() <= static_cast<size_t>(limit), "more ids than the limit");
  for (int64_t id : ids) {
    Check(id >= 0 && static_cast<size_t>(id) < tok.vocab_size(), "an id outside the vocabulary");
  }
  Check(!result->truncated || ids.size() == static_cast<size_t>(limit),
        "a truncated encoding must fill the limit exactly");
  Check(options.truncate || !result->truncated, "truncated although truncation is off");
  // Pieces (without [SEP]) must be a prefix of the reference's; all of them when not cut.
  const size_t pieces = ids.size() - 1;
  Check(pieces <= ref.size() - 1 && std::equal(ids.begin(), ids.begin() + pieces, ref.begin()),
        "the encoding is not a prefix of the text's encoding at the model maximum");
  if (!result->truncated) Check(ids == ref, "an uncut encoding differs from the reference");
  return 0;
}
