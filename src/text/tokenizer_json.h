// Parsing Hugging Face tokenizer.json into what WordPieceTokenizer needs.
//
// Only the pipeline WordPieceTokenizer reproduces exactly is accepted: BertNormalizer (or none),
// BertPreTokenizer, WordPiece, TemplateProcessing / BertProcessing (or none), and added tokens
// that match raw text (normalized=false, no lstrip/rstrip/single_word). Anything else is refused
// with a Status naming the file and the unsupported thing, rather than tokenizing differently
// from HF. The file's "truncation" and "padding" sections are ignored on purpose: the server
// decides the length limit, and padding happens at batching, not per text.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "text/added_tokens.h"
#include "text/bert_normalizer.h"
#include "text/vocab.h"
#include "text/wordpiece_model.h"

namespace tailcut {

// The post-processor's form for a pair of texts (A, B): for BERT, [CLS] A [SEP] B [SEP] with
// token type 0 up to the first [SEP] and 1 after it. Each special id carries its own type.
struct PairTemplate {
  std::vector<int64_t> before_a_ids, before_a_types;
  std::vector<int64_t> between_ids, between_types;
  std::vector<int64_t> after_b_ids, after_b_types;
  int64_t a_type = 0;
  int64_t b_type = 1;

  size_t num_special_tokens() const {
    return before_a_ids.size() + between_ids.size() + after_b_ids.size();
  }
};

struct TokenizerSpec {
  BertNormalizerOptions normalizer;
  WordPieceConfig wordpiece;
  VocabEntries vocab;
  std::vector<AddedToken> added_tokens;
  std::vector<int64_t> prefix_ids;  // Post-processor ids before the text ([CLS]).
  std::vector<int64_t> suffix_ids;  // And after it ([SEP]).
  // Absent when the file has no pair form (no post-processor, or a TemplateProcessing without
  // a "pair" template of the form specials* A specials* B specials*): single texts only.
  std::optional<PairTemplate> pair;
  int64_t pad_id = 0;
};

// [CLS] A [SEP] B [SEP], types 0 0 0 1 1: BertProcessing's pair form, and classic BERT's.
PairTemplate BertPairTemplate(int64_t cls_id, int64_t sep_id);

// Reads and parses the file at `path`; every error message names the file.
Result<TokenizerSpec> ParseTokenizerJsonFile(const std::string& path);

// Parses tokenizer.json text; `source` names it in error messages.
Result<TokenizerSpec> ParseTokenizerJson(std::string_view json, const std::string& source);

}  // namespace tailcut
