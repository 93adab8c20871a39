// `tailcut info`: what a model folder holds and how the engine will run it: inputs,
// outputs, versions and thread settings, as one JSON document.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/ort_environment.h"

namespace tailcut::cli {
namespace {

nlohmann::json DescribeSpecs(const std::vector<TensorSpec>& specs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : specs) {
    out.push_back({{"name", s.name}, {"datatype", DataTypeName(s.type)}, {"shape", s.shape}});
  }
  return out;
}

int RunInfo(const ModelOptions& options) {
  auto model = LoadTextModel(options);
  if (!model.ok()) {
    PrintError(model.status().message());
    return 1;
  }
  const TextEmbeddingModel& m = **model;
  const auto& c = m.config();
  nlohmann::json info = {
      {"tailcut_version", TAILCUT_VERSION},
      {"onnxruntime_version", OrtEnvironment::RuntimeVersion()},
      {"model",
       {{"name", c.name},
        {"kind", ModelKindName(c.kind)},
        {"folder", c.dir},
        {"file", c.file_path},
        {"file_digest_xxh3", m.session().file_digest()},
        {"tokenizer", c.tokenizer_path},
        {"vocab_size", m.tokenizer().vocab_size()},
        {"max_sequence_length", c.max_sequence_length},
        {"dimensions", m.dimensions()},
        {"normalize", c.normalize},
        {"inputs", DescribeSpecs(m.session().inputs())},
        {"outputs", DescribeSpecs(m.session().outputs())}}},
      {"threads",
       {{"intra_op", OrtEnvironment::Get().intra_op_threads()},
        {"inter_op", OrtEnvironment::Get().options().inter_op_threads},
        {"allow_spinning", OrtEnvironment::Get().options().allow_spinning}}},
  };
  std::cout << info.dump(2) << "\n";
  return 0;
}

}  // namespace

Runner AddInfoCommand(CLI::App& app) {
  auto options = std::make_shared<ModelOptions>();
  CLI::App* cmd =
      app.add_subcommand("info", "Describe a model: inputs, outputs, versions, threads");
  AddModelOptions(*cmd, *options);
  return [options] { return RunInfo(*options); };
}

}  // namespace tailcut::cli
