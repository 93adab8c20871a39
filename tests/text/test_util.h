// Helpers shared by the text module's tests: temporary files and the real model's location.
//
// Thread-safety: test-only; TempFile is not shared between threads.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace tailcut::testing {

// A file with the given contents, deleted when the object goes out of scope.
class TempFile {
 public:
  explicit TempFile(std::string_view contents, std::string_view suffix = ".json") {
    std::string pattern = (std::filesystem::temp_directory_path() / "tailcut_text_XXXXXX").string();
    pattern.append(suffix);
    const int fd = mkstemps(pattern.data(), static_cast<int>(suffix.size()));
    if (fd >= 0) close(fd);
    path_ = pattern;
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The all-MiniLM-L6-v2 folder: $TAILCUT_MODEL_DIR, else <repo>/models/all-MiniLM-L6-v2.
inline std::string ModelDir() {
  if (const char* env = std::getenv("TAILCUT_MODEL_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return std::string(TAILCUT_MODELS_DIR) + "/all-MiniLM-L6-v2";
}

inline std::string ModelTokenizerJson() {
  return ModelDir() + "/tokenizer.json";
}

}  // namespace tailcut::testing

namespace tailcut::testing {

// The pieces of a small BERT-like tokenizer.json; tests change one piece at a time.
struct TinyTokenizerJson {
  std::string normalizer =
      R"({"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
          "strip_accents": null, "lowercase": true})";
  std::string pre_tokenizer = R"({"type": "BertPreTokenizer"})";
  std::string model_type = "WordPiece";
  std::string vocab =
      R"({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "hello": 5, "world": 6,
          "!": 7, "un": 8, "##aff": 9, "##able": 10, "a": 11, "##a": 12, ",": 13, "cafe": 14,
          "\u4e2d": 15, "[": 16, "]": 17, "sep": 18})";
  std::string added_tokens =
      R"([{"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false,
           "normalized": false, "special": true},
          {"id": 1, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false,
           "normalized": false, "special": true},
          {"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false,
           "normalized": false, "special": true},
          {"id": 3, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false,
           "normalized": false, "special": true},
          {"id": 4, "content": "[MASK]", "single_word": false, "lstrip": false, "rstrip": false,
           "normalized": false, "special": true}])";
  std::string post_processor =
      R"({"type": "TemplateProcessing",
          "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
          "pair": [],
          "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                             "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}})";

  std::string Render() const {
    return R"({"version": "1.0", "truncation": {"max_length": 4}, "padding": null,
               "added_tokens": )" +
           added_tokens + R"(, "normalizer": )" + normalizer + R"(, "pre_tokenizer": )" +
           pre_tokenizer + R"(, "post_processor": )" + post_processor +
           R"(, "decoder": null, "model": {"type": ")" + model_type +
           R"(", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
               "max_input_chars_per_word": 100, "vocab": )" +
           vocab + "}}";
  }
};

}  // namespace tailcut::testing
