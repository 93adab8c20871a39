#include "engine/model_config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

namespace tailcut {
namespace fs = std::filesystem;

std::string_view ModelKindName(ModelKind kind) {
  return kind == ModelKind::kTextEmbedding ? "text-embedding" : "tensor";
}

namespace {

// Reads an optional scalar, turning yaml-cpp's conversion errors into a Status.
template <typename T>
Status ReadScalar(const YAML::Node& root, const char* key, const std::string& file, T* out) {
  const YAML::Node node = root[key];
  if (!node) return Status::Ok();
  try {
    *out = node.as<T>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument("'" + file + "': key '" + key + "' has an invalid value");
  }
  return Status::Ok();
}

// The one variant of a model that lists none: the model file itself, its own reference.
VariantConfig ImplicitDefaultVariant(const std::string& file_path) {
  VariantConfig v;
  v.name = "fp32";
  v.precision = "fp32";
  v.file_path = file_path;
  v.batch_invariant = true;
  v.fidelity_min_cosine = 1.0;
  v.fidelity_recall_at_10 = 1.0;
  return v;
}

// Reads an optional measured fidelity in [lo, 1].
Status ReadFidelity(const YAML::Node& v, const char* key, const std::string& where, double lo,
                    std::optional<double>* out) {
  const YAML::Node node = v[key];
  if (!node) return Status::Ok();
  double value = 0;
  try {
    value = node.as<double>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument(where + ": '" + key + "' must be a number");
  }
  if (!(value >= lo && value <= 1.0)) {
    return Status::InvalidArgument(where + ": '" + key + "' must be between " +
                                   (lo < 0 ? "-1" : "0") + " and 1");
  }
  *out = value;
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> LoadModelConfig(const std::string& dir_arg) {
  std::error_code ec;
  const fs::path dir = fs::absolute(dir_arg, ec);
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound("model folder '" + dir_arg + "' does not exist");
  }
  ModelConfig config;
  config.dir = dir.string();
  config.name = dir.filename().string();
  config.file_path = (dir / "model.onnx").string();

  const fs::path yaml_path = dir / "model.yaml";
  if (!fs::exists(yaml_path, ec)) {
    if (!fs::exists(config.file_path, ec)) {
      return Status::NotFound("model folder '" + dir_arg +
                              "' has neither model.yaml nor model.onnx");
    }
    config.variants.push_back(ImplicitDefaultVariant(config.file_path));
    config.default_variant = "fp32";
    return config;  // A bare ONNX file: a tensor model.
  }

  const std::string file = yaml_path.string();
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("cannot parse '" + file + "': " + e.what());
  }
  if (!root.IsMap()) return Status::InvalidArgument("'" + file + "' is not a YAML mapping");

  std::string kind = "tensor", model_file = "model.onnx", tokenizer, pooling = "none";
  for (Status s :
       {ReadScalar(root, "name", file, &config.name), ReadScalar(root, "kind", file, &kind),
        ReadScalar(root, "file", file, &model_file),
        ReadScalar(root, "tokenizer", file, &tokenizer),
        ReadScalar(root, "max_sequence_length", file, &config.max_sequence_length),
        ReadScalar(root, "output", file, &config.output),
        ReadScalar(root, "pooling", file, &pooling),
        ReadScalar(root, "normalize", file, &config.normalize),
        ReadScalar(root, "dimensions", file, &config.dimensions),
        ReadScalar(root, "max_batch_size", file, &config.max_batch_size)}) {
    if (!s.ok()) return s;
  }

  if (kind == "text-embedding") {
    config.kind = ModelKind::kTextEmbedding;
  } else if (kind == "tensor") {
    config.kind = ModelKind::kTensor;
  } else {
    return Status::InvalidArgument("'" + file + "': kind '" + kind +
                                   "' is not one of text-embedding, tensor");
  }
  if (pooling == "none") {
    config.pooling = Pooling::kNone;
  } else if (pooling == "mean") {
    config.pooling = Pooling::kMean;
  } else if (pooling == "cls") {
    config.pooling = Pooling::kCls;
  } else {
    return Status::InvalidArgument("'" + file + "': pooling '" + pooling +
                                   "' is not one of none, mean, cls");
  }
  config.file_path = (dir / model_file).string();
  if (config.kind == ModelKind::kTextEmbedding) {
    if (tokenizer.empty()) {
      return Status::InvalidArgument("'" + file + "': a text-embedding model needs 'tokenizer'");
    }
    config.tokenizer_path = (dir / tokenizer).string();
  }
  if (config.max_sequence_length < 2) {
    return Status::InvalidArgument("'" + file + "': max_sequence_length must be at least 2");
  }
  if (config.max_batch_size < 0) {
    return Status::InvalidArgument("'" + file + "': max_batch_size must not be negative");
  }
  if (const YAML::Node variants = root["variants"]) {
    if (!variants.IsSequence() || variants.size() == 0) {
      return Status::InvalidArgument("'" + file + "': variants must be a non-empty list");
    }
    for (size_t i = 0; i < variants.size(); ++i) {
      const YAML::Node v = variants[i];
      const std::string where = "'" + file + "': variants[" + std::to_string(i) + "]";
      VariantConfig variant;
      std::string vfile;
      if (!v.IsMap()) return Status::InvalidArgument(where + " must be a mapping");
      for (Status st :
           {ReadScalar(v, "name", file, &variant.name), ReadScalar(v, "file", file, &vfile),
            ReadScalar(v, "precision", file, &variant.precision),
            ReadScalar(v, "batch_invariant", file, &variant.batch_invariant),
            ReadFidelity(v, "fidelity_min_cosine", where, -1.0, &variant.fidelity_min_cosine),
            ReadFidelity(v, "fidelity_recall_at_10", where, 0.0, &variant.fidelity_recall_at_10)}) {
        if (!st.ok()) return st;
      }
      if (variant.name.empty() || vfile.empty()) {
        return Status::InvalidArgument(where + " needs 'name' and 'file'");
      }
      if (variant.precision != "fp32" && variant.precision != "fp16" &&
          variant.precision != "int8") {
        return Status::InvalidArgument(where + ": precision '" + variant.precision +
                                       "' is not one of fp32, fp16, int8");
      }
      for (const auto& other : config.variants) {
        if (other.name == variant.name) {
          return Status::InvalidArgument(where + ": the name '" + variant.name + "' is used twice");
        }
      }
      variant.file_path = (dir / vfile).string();
      config.variants.push_back(std::move(variant));
    }
  } else {
    config.variants.push_back(ImplicitDefaultVariant(config.file_path));
  }
  if (Status st = ReadScalar(root, "default_variant", file, &config.default_variant); !st.ok()) {
    return st;
  }
  if (config.default_variant.empty()) config.default_variant = config.variants.front().name;
  bool found = false;
  for (const auto& v : config.variants) found = found || v.name == config.default_variant;
  if (!found) {
    return Status::InvalidArgument("'" + file + "': default_variant '" + config.default_variant +
                                   "' is not one of the variants");
  }
  for (const auto& v : config.variants) {
    if (v.name == config.default_variant) config.file_path = v.file_path;
  }
  if (config.name.empty()) return Status::InvalidArgument("'" + file + "': name is empty");
  return config;
}

}  // namespace tailcut
