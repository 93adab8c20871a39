// `tailcut embed`: embeds texts given as arguments or on stdin (one per line) and prints one
// JSON object per line. For scripting and for checking a model without starting a server.
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "server/json_body.h"
#include "text/utf8.h"

namespace tailcut::cli {
namespace {

// Offset of the first byte that is not part of well-formed UTF-8, if any. The tokenizer
// itself accepts broken bytes (replacing them, as the Python reference does), but a command
// reading texts from a file should tell its user that the file is not what they think.
std::optional<size_t> FindInvalidUtf8(std::string_view s) {
  if (ScanUtf8(s).valid) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    char32_t cp;
    const size_t n = DecodeUtf8Char(p + i, s.size() - i, &cp);
    const bool literal_fffd = n == 3 && p[i] == 0xEF && p[i + 1] == 0xBF && p[i + 2] == 0xBD;
    if (cp == kReplacementChar && !literal_fffd) return i;
    i += n;
  }
  return std::nullopt;
}

struct EmbedArgs {
  ModelOptions model;
  std::vector<std::string> texts;
  std::string input_file;
  bool no_normalize = false;
};

// Reads one text per line; a trailing '\r' is dropped so Windows files work.
Status ReadLines(std::istream& in, const std::string& source, std::vector<std::string>* out) {
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (auto bad = FindInvalidUtf8(line)) {
      return Status::InvalidArgument(source + " line " + std::to_string(number) +
                                     " is not valid UTF-8 (byte " + std::to_string(*bad + 1) + ")");
    }
    out->push_back(std::move(line));
  }
  if (in.bad()) return Status::Internal("error reading " + source);
  return Status::Ok();
}

int RunEmbed(const EmbedArgs& args) {
  std::vector<std::string> texts;
  for (size_t i = 0; i < args.texts.size(); ++i) {
    if (auto bad = FindInvalidUtf8(args.texts[i])) {
      PrintError("argument " + std::to_string(i + 1) + " is not valid UTF-8 (byte " +
                 std::to_string(*bad + 1) + ")");
      return 1;
    }
    texts.push_back(args.texts[i]);
  }
  Status read;
  if (!args.input_file.empty()) {
    std::ifstream in(args.input_file, std::ios::binary);
    if (!in) {
      PrintError("cannot read '" + args.input_file + "': " + std::strerror(errno));
      return 1;
    }
    read = ReadLines(in, "'" + args.input_file + "'", &texts);
  } else if (texts.empty()) {
    read = ReadLines(std::cin, "stdin", &texts);
  }
  if (!read.ok()) {
    PrintError(read.message());
    return 1;
  }

  auto model = LoadTextModel(args.model);
  if (!model.ok()) {
    PrintError(model.status().message());
    return 1;
  }
  const TextEmbeddingModel& m = **model;
  const bool normalize = m.config().normalize && !args.no_normalize;

  // Batches bound memory for long inputs while keeping the engine efficient.
  constexpr size_t kBatch = 32;
  std::vector<float> flat;
  for (size_t start = 0; start < texts.size(); start += kBatch) {
    const size_t end = std::min(texts.size(), start + kBatch);
    std::vector<std::vector<int64_t>> ids;
    for (size_t i = start; i < end; ++i) {
      auto enc = m.tokenizer().Encode(texts[i], EncodeOptions{});
      if (!enc.ok()) {
        PrintError(enc.status().message());
        return 1;
      }
      ids.push_back(std::move(enc->ids));
    }
    std::vector<std::span<const int64_t>> spans(ids.begin(), ids.end());
    flat.resize(spans.size() * m.dimensions());
    Status s = m.EmbedBatch(spans, flat.data());
    if (!s.ok()) {
      PrintError(s.message());
      return 1;
    }
    for (size_t i = 0; i < spans.size(); ++i) {
      std::span<float> row(flat.data() + i * m.dimensions(), m.dimensions());
      if (normalize) NormalizeL2(row);
      std::string line = "{\"index\":" + std::to_string(start + i) +
                         ",\"tokens\":" + std::to_string(spans[i].size()) + ",\"embedding\":";
      AppendFloatArray(row, &line);
      line += "}\n";
      std::cout << line;
    }
  }
  std::cout.flush();
  return 0;
}

}  // namespace

Runner AddEmbedCommand(CLI::App& app) {
  auto args = std::make_shared<EmbedArgs>();
  CLI::App* cmd = app.add_subcommand(
      "embed", "Embed texts (arguments, --input file, or stdin: one text per line) as JSON lines");
  AddModelOptions(*cmd, args->model);
  cmd->add_option("texts", args->texts, "Texts to embed; none = read stdin");
  cmd->add_option("-i,--input", args->input_file, "Read texts from this file, one per line");
  cmd->add_flag("--no-normalize", args->no_normalize, "Print embeddings without L2 normalisation");
  return [args] { return RunEmbed(*args); };
}

}  // namespace tailcut::cli
