// Micro-benchmark of WordPieceTokenizer::Encode on the real all-MiniLM-L6-v2 tokenizer.
// One benchmark iteration encodes one text, so the reported time per iteration is the time
// per text; items_per_second is texts per second, tokens/text the mean output length.
//
//   TAILCUT_MODEL_DIR=<model folder> build/bench/tokenizer_bench
//
// Inputs: real Quora questions from <repo>/../shared/data/qqp/pairs.jsonl.gz (short, mostly
// ASCII), passages glued from them (about 1.5 KB, cut at 256 tokens), and multilingual
// sentences (accents, CJK, Hangul, Cyrillic, emoji) that take the general Unicode path.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "text/wordpiece_tokenizer.h"

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

const tailcut::WordPieceTokenizer& Tokenizer() {
  static const std::unique_ptr<tailcut::WordPieceTokenizer> tokenizer = [] {
    const std::string dir =
        EnvOr("TAILCUT_MODEL_DIR", std::string(TAILCUT_SOURCE_DIR) + "/models/all-MiniLM-L6-v2");
    auto t = tailcut::WordPieceTokenizer::FromTokenizerJson(dir + "/tokenizer.json");
    if (!t.ok()) {
      std::fprintf(stderr, "tokenizer_bench: %s\n", t.status().ToString().c_str());
      std::exit(1);
    }
    return std::move(t).value();
  }();
  return *tokenizer;
}

// Up to `limit` distinct questions, in file order.
const std::vector<std::string>& Questions(size_t limit = 5000) {
  static const std::vector<std::string> questions = [limit] {
    const std::string path = EnvOr(
        "TAILCUT_QQP_PATH", std::string(TAILCUT_SOURCE_DIR) + "/../shared/data/qqp/pairs.jsonl.gz");
    // Decompressing through gzip keeps zlib out of the build; this is a benchmark, not the
    // serving path.
    const std::string command = "gzip -dc '" + path + "'";
    FILE* pipe = popen(command.c_str(), "r");
    std::vector<std::string> out;
    std::set<std::string> seen;
    std::string line;
    char buf[4096];
    while (pipe != nullptr && out.size() < limit && std::fgets(buf, sizeof buf, pipe) != nullptr) {
      line += buf;
      if (line.empty() || line.back() != '\n') continue;
      const auto row = nlohmann::json::parse(line, nullptr, false);
      line.clear();
      if (!row.is_object()) continue;
      for (const char* key : {"a", "b"}) {
        if (row.contains(key) && row[key].is_string() && seen.insert(row[key]).second) {
          out.push_back(row[key].get<std::string>());
        }
      }
    }
    if (pipe != nullptr) pclose(pipe);
    if (out.empty()) {
      std::fprintf(stderr, "tokenizer_bench: no questions read from %s\n", path.c_str());
      std::exit(1);
    }
    return out;
  }();
  return questions;
}

const std::vector<std::string>& Passages() {
  static const std::vector<std::string> passages = [] {
    std::vector<std::string> out;
    std::string p;
    for (const auto& q : Questions()) {
      p += q;
      p += ' ';
      if (p.size() >= 1500) {
        out.push_back(std::move(p));
        p.clear();
      }
    }
    return out;
  }();
  return passages;
}

const std::vector<std::string>& Multilingual() {
  static const std::vector<std::string> texts = [] {
    const std::vector<std::string> parts = {
        "Qu'est-ce qui rend la cr\u00E8me br\u00FBl\u00E9e si d\u00E9licieuse ?",
        "\u00BFPor qu\u00E9 el se\u00F1or Pe\u00F1a habla tan r\u00E1pido?",
        "\u5982\u4F55\u5B66\u4E60\u673A\u5668\u5B66\u4E60\uFF1F",
        "\u6771\u4EAC\u3067\u4E00\u756A\u304A\u3044\u3057\u3044\u30E9\u30FC\u30E1\u30F3\u306F"
        "\uFF1F",
        "\uD55C\uAD6D\uC5B4\uB97C \uBC30\uC6B0\uB294 \uAC00\uC7A5 \uC88B\uC740 \uBC29\uBC95\uC740?",
        "\u041F\u043E\u0447\u0435\u043C\u0443 \u043D\u0435\u0431\u043E "
        "\u0433\u043E\u043B\u0443\u0431\u043E\u0435?",
        "Why do people love \U0001F600 and \U0001F44D\U0001F3FD so much?",
        "Was ist der Unterschied zwischen Stra\u00DFe und Gasse?",
    };
    std::vector<std::string> out;
    for (size_t i = 0; i < 512; ++i) out.push_back(parts[i % parts.size()]);
    return out;
  }();
  return texts;
}

void Run(benchmark::State& state, const std::vector<std::string>& texts) {
  const auto& tokenizer = Tokenizer();
  const tailcut::EncodeOptions options;
  size_t i = 0;
  size_t tokens = 0;
  for (auto _ : state) {
    auto encoding = tokenizer.Encode(texts[i], options);
    benchmark::DoNotOptimize(encoding);
    tokens += encoding->ids.size();
    if (++i == texts.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["tokens/text"] =
      static_cast<double>(tokens) / static_cast<double>(state.iterations());
}

void BM_QqpQuestions(benchmark::State& state) {
  Run(state, Questions());
}
void BM_Passages1500B(benchmark::State& state) {
  Run(state, Passages());
}
void BM_Multilingual(benchmark::State& state) {
  Run(state, Multilingual());
}

BENCHMARK(BM_QqpQuestions);
BENCHMARK(BM_Passages1500B);
BENCHMARK(BM_Multilingual);

}  // namespace

BENCHMARK_MAIN();
