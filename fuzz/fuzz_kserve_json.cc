// Fuzz target: the body of POST /v2/models/{name}/infer (KServe v2 JSON tensors), sent to the
// fake text-embedding model (BYTES input of texts) and to the fake tensor model (typed tensors
// through ParseKServeTensor, echoed back through AppendKServeTensor).
//
// Extra oracle: every input tensor that ParseKServeTensor() accepts must survive
// AppendKServeTensor() -> JSON -> ParseKServeTensor() unchanged (finite values; JSON cannot
// carry the others), which checks the integer range checks and the FP16 conversions against
// each other; and the same through the binary extension (binary_data_size and the raw bytes).
//
// The body is also sent framed for Triton's binary extension: its first byte picks where the
// inference header ends (Inference-Header-Content-Length), the rest is the inputs' bytes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/json_route_target.h"
#include "server/kserve_api.h"

namespace {

using tailcut::DataType;
using tailcut::Tensor;
using tailcut::fuzz::Check;

// Whether every element is finite (integers and booleans always are).
bool AllFinite(const Tensor& t) {
  if (t.type == DataType::kBytes) return true;
  const size_t n = t.data.size() / tailcut::DataTypeSize(t.type);
  for (size_t i = 0; i < n; ++i) {
    switch (t.type) {
      case DataType::kFp16:
        if (!std::isfinite(tailcut::HalfToFloat(t.As<uint16_t>()[i]))) return false;
        break;
      case DataType::kFp32:
        if (!std::isfinite(t.As<float>()[i])) return false;
        break;
      case DataType::kFp64:
        if (!std::isfinite(t.As<double>()[i])) return false;
        break;
      default:
        return true;
    }
  }
  return true;
}

// Element-wise equality; floats by value, so -0 and 0 (JSON writes "-0", read back as the
// integer 0) compare equal.
bool SameData(const Tensor& a, const Tensor& b) {
  if (a.type == DataType::kBytes) return a.elements == b.elements && b.data.empty();
  if (a.data.size() != b.data.size()) return false;
  const size_t n = a.data.size() / tailcut::DataTypeSize(a.type);
  for (size_t i = 0; i < n; ++i) {
    switch (a.type) {
      case DataType::kFp16:
        if (tailcut::HalfToFloat(a.As<uint16_t>()[i]) != tailcut::HalfToFloat(b.As<uint16_t>()[i]))
          return false;
        break;
      case DataType::kFp32:
        if (a.As<float>()[i] != b.As<float>()[i]) return false;
        break;
      case DataType::kFp64:
        if (a.As<double>()[i] != b.As<double>()[i]) return false;
        break;
      default:
        return std::memcmp(a.data.data(), b.data.data(), a.data.size()) == 0;
    }
  }
  return true;
}

void CheckTensorRoundTrip(const nlohmann::json& body) {
  if (!body.is_object()) return;
  auto inputs = body.find("inputs");
  if (inputs == body.end() || !inputs->is_array()) return;
  for (size_t i = 0; i < inputs->size(); ++i) {
    auto parsed = tailcut::ParseKServeTensor((*inputs)[i], i);
    if (!parsed.ok() || !AllFinite(*parsed)) continue;
    std::string text;
    Check(tailcut::AppendKServeTensor(*parsed, &text).ok(),
          "AppendKServeTensor refused a finite tensor");
    const auto written = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    Check(!written.is_discarded(), "AppendKServeTensor wrote invalid JSON");
    auto again = tailcut::ParseKServeTensor(written, i);
    Check(again.ok(), "a tensor AppendKServeTensor wrote does not parse back");
    Check(
        again->name == parsed->name && again->type == parsed->type && again->shape == parsed->shape,
        "a tensor's name, datatype or shape changed in a round trip");
    Check(SameData(*parsed, *again), "a tensor's values changed in a round trip");

    std::string header, bytes;
    Check(tailcut::AppendKServeTensor(*parsed, &header, &bytes).ok(),
          "AppendKServeTensor refused a finite tensor in binary");
    const auto binary_json = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
    Check(!binary_json.is_discarded(), "AppendKServeTensor wrote an invalid binary header");
    Check(binary_json["parameters"]["binary_data_size"] == bytes.size(),
          "binary_data_size disagrees with the bytes written");
    const std::string_view raw(bytes);
    auto from_binary = tailcut::ParseKServeTensor(binary_json, i, &raw);
    Check(from_binary.ok(), "a tensor written in binary does not parse back");
    Check(from_binary->shape == parsed->shape && SameData(*parsed, *from_binary),
          "a tensor changed in a binary round trip");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tailcut::fuzz::HttpHarness harness;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  tailcut::fuzz::PostJson(harness, {"/v2/models/all-MiniLM-L6-v2/infer", "/v2/models/echo/infer"},
                          body);
  CheckTensorRoundTrip(nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false));
  if (size > 1) {
    const std::string_view framed = body.substr(1);
    const std::string length = std::to_string(data[0] % (framed.size() + 1));
    tailcut::fuzz::PostJson(harness,
                            {"/v2/models/all-MiniLM-L6-v2/infer", "/v2/models/echo/infer"},
                            framed, "Inference-Header-Content-Length", length);
  }
  return 0;
}
