#include "server/kserve_binary.h"

#include <charconv>
#include <cstdint>
#include <cstring>

namespace tailcut {

Result<KServeBinaryBody> SplitKServeBinaryBody(std::string body, std::string_view header) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(header.data(), header.data() + header.size(), n);
  if (header.empty() || ec != std::errc() || end != header.data() + header.size()) {
    return Status::InvalidArgument("header Inference-Header-Content-Length must be a decimal "
                                   "byte count, got '" + std::string(header) + "'");
  }
  if (n > body.size()) {
    return Status::InvalidArgument("header Inference-Header-Content-Length says " +
                                   std::to_string(n) + " bytes but the body has " +
                                   std::to_string(body.size()));
  }
  KServeBinaryBody out;
  out.binary = body.substr(static_cast<size_t>(n));
  body.resize(static_cast<size_t>(n));
  out.json = std::move(body);
  return out;
}

Result<std::vector<std::optional<std::string_view>>> KServeBinaryInputs(
    const nlohmann::json& inputs, std::string_view binary) {
  std::vector<std::optional<std::string_view>> out(inputs.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& in = inputs[i];
    if (!in.is_object()) continue;  // The tensor parser names this error.
    auto params = in.find("parameters");
    if (params == in.end()) continue;
    const std::string where = "inputs[" + std::to_string(i) + "].parameters";
    if (!params->is_object()) return Status::InvalidArgument(where + " must be an object");
    auto size = params->find("binary_data_size");
    if (size == params->end()) continue;
    if (!size->is_number_unsigned()) {
      return Status::InvalidArgument(where + ".binary_data_size must be a non-negative integer");
    }
    if (in.contains("data")) {
      return Status::InvalidArgument("inputs[" + std::to_string(i) +
                                     "]: 'data' and parameters.binary_data_size are both given; "
                                     "send one");
    }
    const uint64_t k = size->get<uint64_t>();
    if (k > binary.size() - offset) {
      return Status::InvalidArgument(where + ".binary_data_size is " + std::to_string(k) +
                                     " bytes but only " + std::to_string(binary.size() - offset) +
                                     " follow the inference header");
    }
    out[i] = binary.substr(static_cast<size_t>(offset), static_cast<size_t>(k));
    offset += k;
  }
  if (offset != binary.size()) {
    return Status::InvalidArgument(std::to_string(binary.size() - offset) +
                                   " bytes after the inference header belong to no input "
                                   "(binary_data_size)");
  }
  return out;
}

Result<std::vector<std::string>> DecodeKServeBinaryStrings(std::string_view raw,
                                                           std::string_view tensor_name) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < raw.size()) {
    if (raw.size() - at < 4) {
      return Status::InvalidArgument("input '" + std::string(tensor_name) +
                                     "': binary data ends inside an element's 4-byte length");
    }
    const auto* b = reinterpret_cast<const unsigned char*>(raw.data() + at);
    const uint32_t len = static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
                         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
    at += 4;
    if (len > raw.size() - at) {
      return Status::InvalidArgument("input '" + std::string(tensor_name) + "': element " +
                                     std::to_string(out.size()) + " says " + std::to_string(len) +
                                     " bytes but only " + std::to_string(raw.size() - at) +
                                     " are left");
    }
    out.emplace_back(raw.substr(at, len));
    at += len;
  }
  return out;
}

std::string EncodeKServeBinaryString(std::string_view element) {
  std::string out;
  out.reserve(4 + element.size());
  const auto n = static_cast<uint32_t>(element.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xffu);
  out += element;
  return out;
}

void AppendKServeBinaryStrings(const std::vector<std::string>& elements, std::string* out) {
  for (const std::string& e : elements) *out += EncodeKServeBinaryString(e);
}

Result<KServeBinaryOutputs> KServeBinaryOutputs::Read(const nlohmann::json& body) {
  KServeBinaryOutputs out;
  auto flag = [](const nlohmann::json& object, const char* key,
                 const std::string& where) -> Result<std::optional<bool>> {
    auto params = object.find("parameters");
    if (params == object.end() || !params->is_object()) return std::optional<bool>();
    auto v = params->find(key);
    if (v == params->end()) return std::optional<bool>();
    if (!v->is_boolean()) {
      return Status::InvalidArgument(where + ".parameters." + key + " must be a boolean");
    }
    return std::optional<bool>(v->get<bool>());
  };
  auto all = flag(body, "binary_data_output", "the request");
  if (!all.ok()) return all.status();
  out.all_ = all->value_or(false);
  if (auto outputs = body.find("outputs"); outputs != body.end() && outputs->is_array()) {
    for (size_t i = 0; i < outputs->size(); ++i) {
      const auto& o = (*outputs)[i];
      if (!o.is_object()) continue;  // ReadOutputNames names this error.
      auto name = o.find("name");
      if (name == o.end() || !name->is_string()) continue;
      auto one = flag(o, "binary_data", "outputs[" + std::to_string(i) + "]");
      if (!one.ok()) return one.status();
      if (one->has_value()) (**one ? out.on_ : out.off_).insert(name->get<std::string>());
    }
  }
  return out;
}

bool KServeBinaryOutputs::Binary(const std::string& output) const {
  if (on_.contains(output)) return true;
  if (off_.contains(output)) return false;
  return all_;
}

void SetKServeResponseBody(std::string json, std::string binary, bool binary_outputs,
                           HttpResponse* res) {
  if (!binary_outputs) {
    res->body = std::move(json);
    return;
  }
  res->headers.emplace_back("Inference-Header-Content-Length", std::to_string(json.size()));
  res->content_type = "application/octet-stream";
  res->body = std::move(json);
  res->body += binary;
}

}  // namespace tailcut
