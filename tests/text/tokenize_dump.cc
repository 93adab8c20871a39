// tokenize_dump: encodes texts with WordPieceTokenizer and prints the ids, so that Python
// tests and tools can compare them with Hugging Face `tokenizers`.
//
//   tokenize_dump --tokenizer PATH [--max-length N] [--no-truncate] [--pair]
//
// stdin: one base64-encoded text per line (arbitrary bytes, so invalid UTF-8 and newlines
// survive the trip); with --pair, two per line separated by a space, encoded as one pair
// (EncodePair). stdout: one JSON line per input, {"ids":[...],"truncated":false} (with --pair
// also "type_ids":[...]), or {"error":"..."} when encoding fails (only possible with
// --no-truncate, or --pair on a tokenizer without a pair form).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "text/wordpiece_tokenizer.h"

namespace {

int Base64Value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard alphabet, '=' padding optional. Returns false on a character outside it.
bool DecodeBase64(std::string_view in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  for (const char ch : in) {
    if (ch == '=') break;
    const int v = Base64Value(static_cast<unsigned char>(ch));
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

void AppendJsonString(std::string_view s, std::string& out) {
  out.push_back('"');
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out.append(buf);
    } else {
      out.push_back(ch);
    }
  }
  out.push_back('"');
}

int Usage() {
  std::fprintf(stderr,
               "usage: tokenize_dump --tokenizer PATH [--max-length N] [--no-truncate] [--pair]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  int max_length = tailcut::WordPieceTokenizer::kDefaultMaxLength;
  bool truncate = true;
  bool pair = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--tokenizer" && i + 1 < argc) {
      path = argv[++i];
    } else if (arg == "--max-length" && i + 1 < argc) {
      max_length = std::atoi(argv[++i]);
    } else if (arg == "--no-truncate") {
      truncate = false;
    } else if (arg == "--pair") {
      pair = true;
    } else {
      return Usage();
    }
  }
  if (path.empty()) return Usage();

  auto tokenizer = tailcut::WordPieceTokenizer::FromTokenizerJson(path, max_length);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenize_dump: %s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  tailcut::EncodeOptions options;
  options.truncate = truncate;

  std::ios::sync_with_stdio(false);
  std::string line;
  std::string text;
  std::string second;
  std::string out;
  size_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t space = pair ? line.find(' ') : std::string::npos;
    if (pair && space == std::string::npos) {
      std::fprintf(stderr, "tokenize_dump: line %zu is not two base64 texts\n", line_number);
      return 1;
    }
    const std::string_view first_field = std::string_view(line).substr(0, space);
    if (!DecodeBase64(first_field, text) ||
        (pair && !DecodeBase64(std::string_view(line).substr(space + 1), second))) {
      std::fprintf(stderr, "tokenize_dump: line %zu is not base64\n", line_number);
      return 1;
    }
    const auto encoding = pair ? (*tokenizer)->EncodePair(text, second, options)
                               : (*tokenizer)->Encode(text, options);
    out.clear();
    if (encoding.ok()) {
      out.append("{\"ids\":[");
      for (size_t k = 0; k < encoding->ids.size(); ++k) {
        if (k > 0) out.push_back(',');
        out.append(std::to_string(encoding->ids[k]));
      }
      out.push_back(']');
      if (pair) {
        out.append(",\"type_ids\":[");
        for (size_t k = 0; k < encoding->type_ids.size(); ++k) {
          if (k > 0) out.push_back(',');
          out.append(std::to_string(encoding->type_ids[k]));
        }
        out.push_back(']');
      }
      out.append(",\"truncated\":");
      out.append(encoding->truncated ? "true" : "false");
      out.append("}\n");
    } else {
      out.append("{\"error\":");
      AppendJsonString(encoding.status().ToString(), out);
      out.append("}\n");
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}
