// `tailcut semantic-pairs`: the features of the semantic output cache's decision policy for
// labelled text pairs. Reads JSON lines {"a": ..., "b": ..., "duplicate": 0|1} (the label is
// optional and passed through), embeds every distinct text once with the embedding model,
// in-process and exactly as the server does (fp32, L2-normalised), and writes one JSON line
// per pair: the pair's line number, its label, and every SemanticPairFeatures value under its
// name (the cosine among them). The pair is read as "ask a, then b": b is the query, a the
// cached prompt.
//
// tools/semantic_cache_eval.py trains and evaluates the verifier from this output, so the
// features have one implementation, the one the server runs. --verifier adds the
// probability of a weights document (or of the shipped one), which is how the tools check
// that a document they wrote loads here.
//
// Speed: texts are embedded in batches of similar token length (sorted first), so padding
// costs little; the progress and the rate go to stderr.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/semantic_verifier.h"
#include "cli/commands.h"

namespace tailcut::cli {
namespace {

struct SemanticPairsArgs {
  ModelOptions model;
  std::string input_file;  // Empty or "-" = stdin.
  std::string output_file;
  std::string embeddings_out;
  std::string verifier;  // A weights document, "default", or empty for none.
  size_t batch_size = 64;
};

struct Pair {
  size_t line = 0;  // 1-based line number in the input.
  size_t a_row = 0;
  size_t b_row = 0;
  std::optional<int> duplicate;
};

// The distinct texts of the input, each with its row in the embedding matrix.
struct Texts {
  std::vector<std::string> rows;
  std::unordered_map<std::string, size_t> row_of;

  size_t Add(std::string text) {
    auto [it, added] = row_of.try_emplace(text, rows.size());
    if (added) rows.push_back(std::move(text));
    return it->second;
  }
};

Result<std::string> ReadText(const nlohmann::json& obj, const char* field, const std::string& at) {
  auto it = obj.find(field);
  if (it == obj.end()) return Status::InvalidArgument(at + ": missing field \"" + field + "\"");
  if (!it->is_string()) {
    return Status::InvalidArgument(at + ": \"" + field + "\" must be a string, not " +
                                   it->type_name());
  }
  return it->get<std::string>();
}

Status ReadPairs(std::istream& in, const std::string& source, Texts* texts,
                 std::vector<Pair>* pairs) {
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // Blank lines.
    const std::string at = source + " line " + std::to_string(number);
    // nlohmann's parser rejects malformed UTF-8 inside strings, so every text is valid.
    nlohmann::json obj = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded()) return Status::InvalidArgument(at + ": not valid JSON (or not UTF-8)");
    if (!obj.is_object()) return Status::InvalidArgument(at + ": expected a JSON object");
    auto a = ReadText(obj, "a", at);
    if (!a.ok()) return a.status();
    auto b = ReadText(obj, "b", at);
    if (!b.ok()) return b.status();
    Pair pair;
    pair.line = number;
    if (auto d = obj.find("duplicate"); d != obj.end()) {
      if (d->is_boolean()) {
        pair.duplicate = d->get<bool>() ? 1 : 0;
      } else if (d->is_number_integer() && (d->get<int64_t>() == 0 || d->get<int64_t>() == 1)) {
        pair.duplicate = static_cast<int>(d->get<int64_t>());
      } else {
        return Status::InvalidArgument(at + ": \"duplicate\" must be 0, 1, true or false");
      }
    }
    pair.a_row = texts->Add(std::move(*a));
    pair.b_row = texts->Add(std::move(*b));
    pairs->push_back(pair);
  }
  if (in.bad()) return Status::Internal("error reading " + source);
  return Status::Ok();
}

// Embeds every text into `out` (rows.size() x dimensions, L2-normalised), shortest first in
// batches, so each batch pads to about its own length.
Status EmbedAll(const TextEmbeddingModel& model, const std::vector<std::string>& rows,
                size_t batch_size, std::vector<float>* out) {
  const size_t dims = static_cast<size_t>(model.dimensions());
  std::vector<std::vector<int64_t>> ids(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    auto enc = model.tokenizer().Encode(rows[i], EncodeOptions{});
    if (!enc.ok()) return enc.status();
    ids[i] = std::move(enc->ids);
  }
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return ids[x].size() < ids[y].size(); });

  out->assign(rows.size() * dims, 0.0f);
  std::vector<float> batch_out;
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  for (size_t first = 0; first < order.size(); first += batch_size) {
    const size_t end = std::min(order.size(), first + batch_size);
    std::vector<std::span<const int64_t>> spans;
    for (size_t k = first; k < end; ++k) spans.emplace_back(ids[order[k]]);
    batch_out.resize(spans.size() * dims);
    Status s = model.EmbedBatch(spans, batch_out.data());
    if (!s.ok()) return s;
    for (size_t k = 0; k < spans.size(); ++k) {
      std::span<float> row(batch_out.data() + k * dims, dims);
      NormalizeL2(row);
      std::copy(row.begin(), row.end(), out->begin() + order[first + k] * dims);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_report > std::chrono::seconds(15)) {
      last_report = now;
      std::cerr << "semantic-pairs: embedded " << end << " / " << order.size() << " texts\n";
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "semantic-pairs: embedded " << rows.size() << " distinct texts in " << seconds
            << " s (" << (seconds > 0 ? static_cast<double>(rows.size()) / seconds : 0)
            << " texts/s)\n";
  return Status::Ok();
}

// NumPy's .npy format, version 1.0: a float32 matrix readable with numpy.load().
Status WriteNpy(const std::string& path, const std::vector<float>& data, size_t rows, size_t cols) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return Status::InvalidArgument("cannot write '" + path + "': " + std::strerror(errno));
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', '\x01', '\x00'};
  out.write(magic, sizeof(magic));
  const uint16_t length = static_cast<uint16_t>(header.size());
  const char length_le[] = {static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
  out.write(length_le, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  // x86 and ARM Linux are little-endian, as '<f4' says.
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(float)));
  out.close();
  if (!out) return Status::Internal("error writing '" + path + "'");
  return Status::Ok();
}

void AppendNumber(double v, std::string* out) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof(buf), "%.9g", v);
  out->append(buf, static_cast<size_t>(n));
}

int RunSemanticPairs(const SemanticPairsArgs& args) {
  LogToStderr();
  std::optional<SemanticVerifier> verifier;
  if (!args.verifier.empty()) {
    Result<SemanticVerifier> loaded = Status::Internal("unset");
    if (args.verifier == "default") {
      loaded = SemanticVerifier::Default();
    } else {
      std::ifstream in(args.verifier, std::ios::binary);
      if (!in) {
        PrintError("cannot read '" + args.verifier + "': " + std::strerror(errno));
        return 1;
      }
      std::stringstream text;
      text << in.rdbuf();
      loaded = SemanticVerifier::FromJson(text.str());
    }
    if (!loaded.ok()) {
      PrintError(args.verifier + ": " + loaded.status().message());
      return 1;
    }
    verifier = std::move(*loaded);
  }

  Texts texts;
  std::vector<Pair> pairs;
  Status read;
  if (args.input_file.empty() || args.input_file == "-") {
    read = ReadPairs(std::cin, "stdin", &texts, &pairs);
  } else {
    std::ifstream in(args.input_file, std::ios::binary);
    if (!in) {
      PrintError("cannot read '" + args.input_file + "': " + std::strerror(errno));
      return 1;
    }
    read = ReadPairs(in, "'" + args.input_file + "'", &texts, &pairs);
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
  const size_t dims = static_cast<size_t>(m.dimensions());
  std::vector<float> embeddings;
  if (Status s = EmbedAll(m, texts.rows, args.batch_size, &embeddings); !s.ok()) {
    PrintError(s.message());
    return 1;
  }
  if (!args.embeddings_out.empty()) {
    if (Status s = WriteNpy(args.embeddings_out, embeddings, texts.rows.size(), dims); !s.ok()) {
      PrintError(s.message());
      return 1;
    }
  }

  std::ofstream file_out;
  if (!args.output_file.empty()) {
    file_out.open(args.output_file, std::ios::binary);
    if (!file_out) {
      PrintError("cannot write '" + args.output_file + "': " + std::strerror(errno));
      return 1;
    }
  }
  std::ostream& out = args.output_file.empty() ? std::cout : file_out;
  const auto& names = SemanticPairFeatures::Names();
  std::string line;
  std::chrono::steady_clock::duration extracting{};
  for (const Pair& p : pairs) {
    const float* a = embeddings.data() + p.a_row * dims;
    const float* b = embeddings.data() + p.b_row * dims;
    double dot = 0;
    for (size_t k = 0; k < dims; ++k) dot += static_cast<double>(a[k]) * b[k];
    const auto start = std::chrono::steady_clock::now();
    const SemanticPairFeatures f =
        ExtractSemanticPairFeatures(texts.rows[p.b_row], texts.rows[p.a_row], dot);
    extracting += std::chrono::steady_clock::now() - start;
    line = "{\"line\":" + std::to_string(p.line);
    if (p.duplicate) line += ",\"duplicate\":" + std::to_string(*p.duplicate);
    line += ",\"a_row\":" + std::to_string(p.a_row) + ",\"b_row\":" + std::to_string(p.b_row);
    line += ",\"features\":{";
    const auto values = f.Values();
    for (size_t k = 0; k < values.size(); ++k) {
      if (k) line += ',';
      line += '"';
      line += names[k];
      line += "\":";
      AppendNumber(values[k], &line);
    }
    line += '}';
    if (verifier) {
      line += ",\"probability\":";
      AppendNumber(verifier->Probability(f), &line);
    }
    line += "}\n";
    out << line;
  }
  out.flush();
  if (!out) {
    PrintError("error writing the output");
    return 1;
  }
  // The serving path pays this per candidate, so it is worth seeing.
  const double extract_us = std::chrono::duration<double, std::micro>(extracting).count();
  std::cerr << "semantic-pairs: features of " << pairs.size() << " pairs in " << extract_us / 1000.0
            << " ms (" << (pairs.empty() ? 0.0 : extract_us / static_cast<double>(pairs.size()))
            << " us per pair)\n";
  return 0;
}

}  // namespace

Runner AddSemanticPairsCommand(CLI::App& app) {
  auto args = std::make_shared<SemanticPairsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "semantic-pairs",
      "Features of the semantic cache's decision policy for JSON-lines text pairs "
      "{\"a\", \"b\", \"duplicate\"} (query b against cached a), one JSON line per pair");
  AddModelOptions(*cmd, args->model);
  cmd->add_option("-i,--input", args->input_file, "JSON-lines pairs; default (or -) stdin");
  cmd->add_option("-o,--output", args->output_file, "Write the JSON lines here, not stdout");
  cmd->add_option("--embeddings-out", args->embeddings_out,
                  "Also write the distinct texts' normalised embeddings as a float32 .npy "
                  "matrix; each output line's a_row / b_row index it");
  cmd->add_option("--verifier", args->verifier,
                  "Add each pair's duplicate probability from this weights document, or "
                  "'default' for the shipped one");
  cmd->add_option("--batch", args->batch_size, "Texts per inference batch")
      ->check(CLI::Range(1, 1024));
  return [args] { return RunSemanticPairs(*args); };
}

}  // namespace tailcut::cli
