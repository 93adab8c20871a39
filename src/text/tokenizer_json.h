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
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "text/added_tokens.h"
#include "text/bert_normalizer.h"
#include "text/vocab.h"
#include "text/wordpiece_model.h"

namespace tailcut {

struct TokenizerSpec {
  BertNormalizerOptions normalizer;
  WordPieceConfig wordpiece;
  VocabEntries vocab;
  std::vector<AddedToken> added_tokens;
  std::vector<int64_t> prefix_ids;  // Post-processor ids before the text ([CLS]).
  std::vector<int64_t> suffix_ids;  // And after it ([SEP]).
  int64_t pad_id = 0;
};

// Reads and parses the file at `path`; every error message names the file.
Result<TokenizerSpec> ParseTokenizerJsonFile(const std::string& path);

// Parses tokenizer.json text; `source` names it in error messages.
Result<TokenizerSpec> ParseTokenizerJson(std::string_view json, const std::string& source);

}  // namespace tailcut
