#include "engine/model_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>

namespace tailcut {
namespace fs = std::filesystem;

std::string_view ModelKindName(ModelKind kind) {
  switch (kind) {
    case ModelKind::kTextEmbedding:
      return "text-embedding";
    case ModelKind::kTensor:
      return "tensor";
    case ModelKind::kGenerative:
      return "generative";
    case ModelKind::kReranker:
      return "reranker";
  }
  return "tensor";
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

// The folder's *.gguf files, sorted.
std::vector<fs::path> GgufFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".gguf") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The GGUF file a generative model folder serves when model.yaml names none: its only one.
Result<std::string> OnlyGguf(const fs::path& dir, const std::string& where) {
  const std::vector<fs::path> files = GgufFiles(dir);
  if (files.empty()) return Status::NotFound(where + " holds no .gguf file");
  if (files.size() > 1) {
    return Status::InvalidArgument(where + " holds " + std::to_string(files.size()) +
                                   " .gguf files; name one with 'file:' in model.yaml");
  }
  return files.front().string();
}

// A generative model's one variant: its GGUF file, named after it (the quantisation is in the
// name, e.g. "SmolLM2-135M-Instruct.Q4_1").
VariantConfig GgufVariant(const std::string& file_path) {
  VariantConfig v;
  v.name = fs::path(file_path).stem().string();
  v.file_path = file_path;
  return v;
}

// Reads a three-number list (a per-channel mean or std).
Status ReadChannels(const YAML::Node& node, const char* key, const std::string& where,
                    bool positive, std::array<float, 3>* out) {
  const YAML::Node n = node[key];
  if (!n) return Status::Ok();
  const std::string bad = where + "." + key + " must be a list of 3 " +
                          (positive ? "positive numbers" : "numbers") + " (R, G, B)";
  if (!n.IsSequence() || n.size() != 3) return Status::InvalidArgument(bad);
  for (size_t i = 0; i < 3; ++i) {
    try {
      (*out)[i] = n[i].as<float>();
    } catch (const YAML::Exception&) {
      return Status::InvalidArgument(bad);
    }
    if (!std::isfinite((*out)[i]) || (positive && !((*out)[i] > 0.0f))) {
      return Status::InvalidArgument(bad);
    }
  }
  return Status::Ok();
}

// Reads and checks a tensor model.yaml's `image` mapping (ImageConfig).
Status ReadImageConfig(const YAML::Node& node, const std::string& file, ImageConfig* out) {
  const std::string where = "'" + file + "': image";
  if (!node.IsMap()) return Status::InvalidArgument(where + " must be a mapping");
  static const char* const kKnown[] = {"input",
                                       "resize_shorter_side_pixels",
                                       "crop_width_pixels",
                                       "crop_height_pixels",
                                       "mean",
                                       "std",
                                       "layout",
                                       "filter",
                                       "max_pixels"};
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>("");
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) return Status::InvalidArgument(where + "." + key + " is not a known key");
  }
  for (Status s :
       {ReadScalar(node, "input", file, &out->input),
        ReadScalar(node, "resize_shorter_side_pixels", file, &out->resize_shorter_side_pixels),
        ReadScalar(node, "crop_width_pixels", file, &out->crop_width_pixels),
        ReadScalar(node, "crop_height_pixels", file, &out->crop_height_pixels),
        ReadScalar(node, "layout", file, &out->layout),
        ReadScalar(node, "filter", file, &out->filter),
        ReadScalar(node, "max_pixels", file, &out->max_pixels),
        ReadChannels(node, "mean", where, /*positive=*/false, &out->mean),
        ReadChannels(node, "std", where, /*positive=*/true, &out->std)}) {
    if (!s.ok()) return s;
  }
  if (out->resize_shorter_side_pixels < 0) {
    return Status::InvalidArgument(where + ".resize_shorter_side_pixels must not be negative");
  }
  if (out->crop_width_pixels < 1 || out->crop_height_pixels < 1) {
    return Status::InvalidArgument(where +
                                   ": crop_width_pixels and crop_height_pixels must be "
                                   "at least 1");
  }
  if (out->layout != "nchw" && out->layout != "nhwc") {
    return Status::InvalidArgument(where + ".layout '" + out->layout +
                                   "' is not one of nchw, nhwc");
  }
  if (out->filter != "bicubic" && out->filter != "bilinear") {
    return Status::InvalidArgument(where + ".filter '" + out->filter +
                                   "' is not one of bicubic, bilinear");
  }
  if (out->max_pixels < 1) return Status::InvalidArgument(where + ".max_pixels must be positive");
  return Status::Ok();
}

// Reads and checks the generation keys of a kind: generative model.yaml.
Status ReadGenerativeConfig(const YAML::Node& root, const std::string& file,
                            GenerativeConfig* out) {
  struct Key {
    const char* name;
    int* value;
    int min;
  };
  const Key keys[] = {
      {"context_tokens", &out->context_tokens, 0},
      {"max_sequences", &out->max_sequences, 1},
      {"batch_tokens", &out->batch_tokens, 1},
      {"prefill_chunk_tokens", &out->prefill_chunk_tokens, 1},
      {"max_step_millis_while_generating", &out->max_step_millis_while_generating, 0},
      {"min_prefill_tokens_per_step", &out->min_prefill_tokens_per_step, 1},
      {"target_time_to_first_token_millis", &out->target_time_to_first_token_millis, 0},
      {"inter_token_slo_millis", &out->inter_token_slo_millis, 0},
      {"slow_gaps_per_mille", &out->slow_gaps_per_mille, 0},
      {"max_waiting_requests", &out->max_waiting_requests, 1},
      {"max_queue_delay_millis", &out->max_queue_delay_millis, 0},
      {"decode_threads", &out->decode_threads, 1},
      {"batch_threads", &out->batch_threads, 1},
      {"thread_poll_level", &out->thread_poll_level, 0}};
  for (const Key& key : keys) {
    if (Status s = ReadScalar(root, key.name, file, key.value); !s.ok()) return s;
    if (*key.value < key.min) {
      return Status::InvalidArgument("'" + file + "': " + key.name + " must be at least " +
                                     std::to_string(key.min));
    }
  }
  std::string kv_cache = "per_sequence";
  if (Status s = ReadScalar(root, "kv_cache", file, &kv_cache); !s.ok()) return s;
  if (kv_cache == "per_sequence") {
    out->kv_cache_layout = KvCacheLayout::kPerSequence;
  } else if (kv_cache == "shared") {
    out->kv_cache_layout = KvCacheLayout::kShared;
  } else {
    return Status::InvalidArgument("'" + file + "': kv_cache '" + kv_cache +
                                   "' is not one of per_sequence, shared");
  }
  return Status::Ok();
}

// Reads a generative model.yaml's `precision` mapping (GenerativePrecisionConfig).
Status ReadGenerativePrecision(const YAML::Node& root, const std::string& file,
                               GenerativePrecisionConfig* out) {
  const YAML::Node node = root["precision"];
  if (!node) return Status::Ok();
  if (!node.IsMap()) return Status::InvalidArgument("'" + file + "': precision must be a mapping");
  for (const auto& kv : node) {
    static const char* const kKnown[] = {"mode",
                                         "prefill_variant",
                                         "degrade_at_prefill_percent",
                                         "restore_below_prefill_percent",
                                         "min_window_tokens",
                                         "window_seconds",
                                         "interval_millis",
                                         "min_dwell_millis",
                                         "max_perplexity_increase_ppm"};
    const std::string key = kv.first.as<std::string>("");
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) {
      return Status::InvalidArgument("'" + file + "': precision." + key + " is not a known key");
    }
  }
  for (Status s : {ReadScalar(node, "mode", file, &out->mode),
                   ReadScalar(node, "prefill_variant", file, &out->prefill_variant)}) {
    if (!s.ok()) return s;
  }
  if (out->mode != "prefill" && out->mode != "off") {
    return Status::InvalidArgument("'" + file + "': precision.mode '" + out->mode +
                                   "' is not one of prefill, off");
  }
  struct Key {
    const char* name;
    int64_t* value;
    int64_t min, max;
  };
  const Key keys[] = {{"degrade_at_prefill_percent", &out->degrade_at_prefill_percent, 0, 100},
                      {"restore_below_prefill_percent", &out->restore_below_prefill_percent, 0,
                       100},
                      {"min_window_tokens", &out->min_window_tokens, 0, INT64_MAX},
                      {"window_seconds", &out->window_seconds, 1, 3600},
                      {"interval_millis", &out->interval_millis, 1, 3'600'000},
                      {"min_dwell_millis", &out->min_dwell_millis, 0, INT64_MAX / 1000},
                      {"max_perplexity_increase_ppm", &out->max_perplexity_increase_ppm, 0,
                       INT64_MAX}};
  for (const Key& key : keys) {
    if (Status s = ReadScalar(node, key.name, file, key.value); !s.ok()) return s;
    if (*key.value < key.min || *key.value > key.max) {
      return Status::InvalidArgument("'" + file + "': precision." + key.name + " must be between " +
                                     std::to_string(key.min) + " and " + std::to_string(key.max));
    }
  }
  if (out->restore_below_prefill_percent > out->degrade_at_prefill_percent) {
    return Status::InvalidArgument("'" + file +
                                   "': precision.restore_below_prefill_percent must not exceed "
                                   "degrade_at_prefill_percent (the hysteresis band)");
  }
  return Status::Ok();
}

// Reads a generative model.yaml's `variants` list: GGUF files with a free-form precision (the
// GGUF weight type) and an optional measured perplexity.
Status ReadGenerativeVariants(const YAML::Node& variants, const fs::path& dir,
                              const std::string& file, std::vector<VariantConfig>* out) {
  if (!variants.IsSequence() || variants.size() == 0) {
    return Status::InvalidArgument("'" + file + "': variants must be a non-empty list");
  }
  for (size_t i = 0; i < variants.size(); ++i) {
    const YAML::Node v = variants[i];
    const std::string where = "'" + file + "': variants[" + std::to_string(i) + "]";
    if (!v.IsMap()) return Status::InvalidArgument(where + " must be a mapping");
    VariantConfig variant;
    std::string vfile;
    for (Status st : {ReadScalar(v, "name", file, &variant.name),
                      ReadScalar(v, "file", file, &vfile),
                      ReadScalar(v, "precision", file, &variant.precision)}) {
      if (!st.ok()) return st;
    }
    if (variant.name.empty() || vfile.empty()) {
      return Status::InvalidArgument(where + " needs 'name' and 'file'");
    }
    if (const YAML::Node ppl = v["perplexity"]) {
      double value = 0;
      try {
        value = ppl.as<double>();
      } catch (const YAML::Exception&) {
        return Status::InvalidArgument(where + ": 'perplexity' must be a number");
      }
      if (!(value >= 1.0)) return Status::InvalidArgument(where + ": 'perplexity' must be >= 1");
      variant.perplexity = value;
    }
    for (const auto& other : *out) {
      if (other.name == variant.name) {
        return Status::InvalidArgument(where + ": the name '" + variant.name + "' is used twice");
      }
    }
    // A sequence's tokens never depend on other sequences' (KvCacheLayout::kPerSequence).
    variant.batch_invariant = true;
    variant.file_path = (dir / vfile).string();
    out->push_back(std::move(variant));
  }
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
    if (fs::exists(config.file_path, ec)) {
      config.variants.push_back(ImplicitDefaultVariant(config.file_path));
      config.default_variant = "fp32";
      return config;  // A bare ONNX file: a tensor model.
    }
    auto gguf = OnlyGguf(dir, "model folder '" + dir_arg + "'");
    if (!gguf.ok()) {
      if (gguf.status().code() != Status::Code::kNotFound) return gguf.status();
      return Status::NotFound("model folder '" + dir_arg +
                              "' has neither model.yaml nor model.onnx nor a .gguf file");
    }
    config.kind = ModelKind::kGenerative;  // A bare GGUF file: a generative model.
    config.file_path = *gguf;
    config.variants.push_back(GgufVariant(config.file_path));
    config.default_variant = config.variants.front().name;
    return config;
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
  } else if (kind == "generative") {
    config.kind = ModelKind::kGenerative;
  } else if (kind == "reranker") {
    config.kind = ModelKind::kReranker;
    // A score is not a direction: scaling a one-element output to unit length would turn
    // every logit into +1 or -1.
    if (root["normalize"] && config.normalize) {
      return Status::InvalidArgument("'" + file +
                                     "': a reranker's scores cannot be normalized "
                                     "(normalize: true)");
    }
    config.normalize = false;
  } else {
    return Status::InvalidArgument("'" + file + "': kind '" + kind +
                                   "' is not one of text-embedding, tensor, generative, reranker");
  }
  if (config.kind == ModelKind::kGenerative) {
    // The embedding keys (tokenizer, pooling...) do not apply: the GGUF file holds its own
    // vocabulary. Variants are other GGUF files of the same weights (another quantisation).
    if (Status s = ReadGenerativeConfig(root, file, &config.generation); !s.ok()) return s;
    if (Status s = ReadGenerativePrecision(root, file, &config.generation.precision); !s.ok()) {
      return s;
    }
    if (const YAML::Node variants = root["variants"]) {
      if (root["file"]) {
        return Status::InvalidArgument("'" + file +
                                       "': give the GGUF files in 'variants' or 'file', not both");
      }
      if (Status s = ReadGenerativeVariants(variants, dir, file, &config.variants); !s.ok()) {
        return s;
      }
      if (Status s = ReadScalar(root, "default_variant", file, &config.default_variant);
          !s.ok()) {
        return s;
      }
      if (config.default_variant.empty()) config.default_variant = config.variants.front().name;
      bool found = false;
      for (const auto& v : config.variants) {
        if (v.name == config.default_variant) {
          found = true;
          config.file_path = v.file_path;
        }
      }
      if (!found) {
        return Status::InvalidArgument("'" + file + "': default_variant '" +
                                       config.default_variant + "' is not one of the variants");
      }
      if (config.name.empty()) return Status::InvalidArgument("'" + file + "': name is empty");
      return config;
    }
    if (root["file"]) {
      config.file_path = (dir / model_file).string();
    } else {
      auto gguf = OnlyGguf(dir, "'" + file + "'");
      if (!gguf.ok()) return gguf.status().code() == Status::Code::kNotFound
                                 ? Status::InvalidArgument(gguf.status().message())
                                 : gguf.status();
      config.file_path = *gguf;
    }
    config.variants.push_back(GgufVariant(config.file_path));
    config.default_variant = config.variants.front().name;
    if (config.name.empty()) return Status::InvalidArgument("'" + file + "': name is empty");
    return config;
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
  if (const YAML::Node image = root["image"]) {
    if (config.kind != ModelKind::kTensor) {
      return Status::InvalidArgument("'" + file + "': 'image' is for kind: tensor models");
    }
    config.image.emplace();
    if (Status s = ReadImageConfig(image, file, &*config.image); !s.ok()) return s;
  }
  std::string labels;
  if (Status s = ReadScalar(root, "labels", file, &labels); !s.ok()) return s;
  if (!labels.empty()) {
    if (config.kind != ModelKind::kTensor) {
      return Status::InvalidArgument("'" + file + "': 'labels' is for kind: tensor models");
    }
    config.labels_path = (dir / labels).string();
  }
  if (IsTextModel(config.kind)) {
    if (tokenizer.empty()) {
      return Status::InvalidArgument("'" + file + "': a " +
                                     std::string(ModelKindName(config.kind)) +
                                     " model needs 'tokenizer'");
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
            ReadFidelity(v, "fidelity_recall_at_10", where, 0.0, &variant.fidelity_recall_at_10),
            ReadFidelity(v, "top1_agreement", where, 0.0, &variant.top1_agreement),
            ReadFidelity(v, "top1_accuracy", where, 0.0, &variant.top1_accuracy)}) {
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
