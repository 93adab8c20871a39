// `tailcut bench-engine`: the engine's own throughput and latency over a grid of batch sizes
// and sequence lengths, with no server in the way. This is the ceiling the server is
// measured against, so it runs the exact code path the server's inference workers run.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "engine/ort_environment.h"

namespace tailcut::cli {
namespace {

struct BenchArgs {
  ModelOptions model;
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64};
  std::vector<int> sequence_lengths = {16, 64, 128, 256};
  double seconds_per_cell = 2.0;
  bool json = false;
};

struct Cell {
  int batch = 0;
  int seq_len = 0;
  int iterations = 0;
  double sequences_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

int RunBench(const BenchArgs& args) {
  auto model = LoadTextModel(args.model);
  if (!model.ok()) {
    PrintError(model.status().message());
    return 1;
  }
  const TextEmbeddingModel& m = **model;
  std::mt19937 rng(42);
  // Ids drawn from the ordinary-word part of the vocabulary (past the special tokens), so the
  // embedding gathers touch memory the way real text does.
  const int64_t vocab = static_cast<int64_t>(m.tokenizer().vocab_size());
  std::uniform_int_distribution<int64_t> id(std::min<int64_t>(1000, vocab - 1), vocab - 1);

  std::vector<Cell> cells;
  for (int seq_len : args.sequence_lengths) {
    if (seq_len > m.config().max_sequence_length) continue;
    for (int batch : args.batch_sizes) {
      std::vector<std::vector<int64_t>> ids(batch, std::vector<int64_t>(seq_len));
      for (auto& row : ids) {
        for (auto& x : row) x = id(rng);
      }
      std::vector<std::span<const int64_t>> spans(ids.begin(), ids.end());
      std::vector<float> out(static_cast<size_t>(batch) * m.dimensions());
      // One untimed run per cell: the arena grows to the new shape outside the measurement.
      if (Status s = m.EmbedBatch(spans, out.data()); !s.ok()) {
        PrintError(s.message());
        return 1;
      }
      std::vector<double> ms;
      const auto start = std::chrono::steady_clock::now();
      double elapsed = 0;
      while (elapsed < args.seconds_per_cell || ms.size() < 5) {
        const auto t0 = std::chrono::steady_clock::now();
        if (Status s = m.EmbedBatch(spans, out.data()); !s.ok()) {
          PrintError(s.message());
          return 1;
        }
        const auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        elapsed = std::chrono::duration<double>(t1 - start).count();
      }
      Cell c{batch,
             seq_len,
             static_cast<int>(ms.size()),
             ms.size() * batch / elapsed,
             Percentile(ms, 0.5),
             Percentile(ms, 0.99)};
      cells.push_back(c);
      if (!args.json) {
        std::cerr << "batch " << batch << " x seq " << seq_len << ": " << std::fixed
                  << std::setprecision(1) << c.sequences_per_s << " seq/s\n";
      }
    }
  }

  if (args.json) {
    nlohmann::json out = {{"model", m.config().name},
                          {"onnxruntime_version", OrtEnvironment::RuntimeVersion()},
                          {"intra_op_threads", OrtEnvironment::Get().intra_op_threads()},
                          {"cells", nlohmann::json::array()}};
    for (const auto& c : cells) {
      out["cells"].push_back({{"batch", c.batch},
                              {"seq_len", c.seq_len},
                              {"iterations", c.iterations},
                              {"sequences_per_s", c.sequences_per_s},
                              {"p50_ms", c.p50_ms},
                              {"p99_ms", c.p99_ms}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "| batch | seq len | sequences/s | batch p50 ms | batch p99 ms |\n"
            << "|---:|---:|---:|---:|---:|\n";
  for (const auto& c : cells) {
    std::ostringstream line;
    line << std::fixed << "| " << c.batch << " | " << c.seq_len << " | " << std::setprecision(1)
         << c.sequences_per_s << " | " << std::setprecision(2) << c.p50_ms << " | " << c.p99_ms
         << " |";
    std::cout << line.str() << "\n";
  }
  return 0;
}

}  // namespace

Runner AddBenchEngineCommand(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench-engine", "Measure raw engine throughput over batch sizes x sequence lengths");
  AddModelOptions(*cmd, args->model);
  cmd->add_option("--batch-sizes", args->batch_sizes, "Batch sizes to measure")->delimiter(',');
  cmd->add_option("--seq-lens", args->sequence_lengths, "Sequence lengths (tokens) to measure")
      ->delimiter(',');
  cmd->add_option("--seconds", args->seconds_per_cell, "Seconds to run each cell");
  cmd->add_flag("--json", args->json, "Print JSON instead of a Markdown table");
  return [args] { return RunBench(*args); };
}

}  // namespace tailcut::cli
