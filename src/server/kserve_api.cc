#include "server/kserve_api.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "server/generation_sink.h"
#include "server/json_body.h"
#include "server/kserve_binary.h"
#include "server/kserve_generate_api.h"
#include "server/kserve_protocol_tensors.h"
#include "server/variant_json.h"

namespace tailcut {

namespace {

// Walks "data" (flat or nested arrays) in row-major order, calling `f` on each leaf. Arrays
// nested deeper than `max_depth` are an error. Iterative, not recursive: the body is client
// input, and a few megabytes of "[[[[..." would otherwise overflow the IO thread's stack.
template <typename F>
Status ForEachLeaf(const nlohmann::json& root, size_t max_depth, const std::string& where, F&& f) {
  struct Level {
    const nlohmann::json* array;
    size_t next;
  };
  std::vector<Level> stack;
  if (!root.is_array()) return f(root);
  stack.push_back({&root, 0});
  while (!stack.empty()) {
    Level& top = stack.back();
    if (top.next == top.array->size()) {
      stack.pop_back();
      continue;
    }
    const nlohmann::json& v = (*top.array)[top.next++];
    if (!v.is_array()) {
      Status s = f(v);
      if (!s.ok()) return s;
      continue;
    }
    if (stack.size() >= max_depth) {
      return Status::InvalidArgument(where + " is nested deeper than its shape's " +
                                     std::to_string(max_depth) + " dimensions");
    }
    stack.push_back({&v, 0});
  }
  return Status::Ok();
}

// A leaf for an error message: scalars as JSON, containers by type only (a nested object can
// be arbitrarily deep, and dumping it is recursive).
std::string LeafText(const nlohmann::json& v) {
  if (v.is_structured()) return JsonTypeName(v);
  return JsonTypeName(v) + " " + v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

template <typename T>
Status AppendInteger(const nlohmann::json& v, const std::string& where, std::vector<std::byte>* out) {
  bool in_range = false;
  T t{};
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    in_range = u <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    t = static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    in_range = i >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
               (i < 0 || static_cast<uint64_t>(i) <= static_cast<uint64_t>(std::numeric_limits<T>::max()));
    t = static_cast<T>(i);
  } else {
    return Status::InvalidArgument(where + " holds " + LeafText(v) +
                                   " where an integer is expected");
  }
  if (!in_range) {
    return Status::InvalidArgument(where + " holds " + v.dump() + ", out of range for its datatype");
  }
  const auto* p = reinterpret_cast<const std::byte*>(&t);
  out->insert(out->end(), p, p + sizeof(T));
  return Status::Ok();
}

template <typename T>
Status AppendFloat(const nlohmann::json& v, const std::string& where, std::vector<std::byte>* out) {
  if (!v.is_number()) {
    return Status::InvalidArgument(where + " holds " + JsonTypeName(v) +
                                   " where a number is expected");
  }
  const T t = static_cast<T>(v.get<double>());
  const auto* p = reinterpret_cast<const std::byte*>(&t);
  out->insert(out->end(), p, p + sizeof(T));
  return Status::Ok();
}

// A BYTES input's elements (encoded images, for a model that takes them): in binary, each
// prefixed by its 4-byte little-endian length (Triton's binary extension); in JSON, strings.
Result<Tensor> ReadBytesElements(Tensor t, nlohmann::json::const_iterator data,
                                 const nlohmann::json& input, const std::string_view* binary,
                                 int64_t count) {
  const std::string tw = "input '" + t.name + "'";
  int64_t seen = 0;
  if (binary) {
    auto elements = DecodeKServeBinaryStrings(*binary, t.name);
    if (!elements.ok()) return elements.status();
    t.elements = std::move(elements).value();
    seen = static_cast<int64_t>(t.elements.size());
  } else {
    if (data == input.end() || !data->is_array()) {
      return Status::InvalidArgument(tw + ": 'data' is required and must be an array");
    }
    const std::string vw = tw + " data";
    Status s = ForEachLeaf(*data, std::max<size_t>(1, t.shape.size()), vw,
                           [&](const nlohmann::json& v) -> Status {
                             if (++seen > count) return Status::Ok();  // Counted, reported below.
                             if (!v.is_string()) {
                               return Status::InvalidArgument(vw + " holds " + JsonTypeName(v) +
                                                              " where a string is expected");
                             }
                             t.elements.push_back(v.get<std::string>());
                             return Status::Ok();
                           });
    if (!s.ok()) return s;
  }
  if (seen != count) {
    return Status::InvalidArgument(tw + ": 'data' has " + std::to_string(seen) +
                                   " elements but shape " + ShapeToString(t.shape) + " needs " +
                                   std::to_string(count));
  }
  return t;
}

}  // namespace

Result<Tensor> ParseKServeTensor(const nlohmann::json& input, size_t index,
                                 const std::string_view* binary) {
  const std::string where = "inputs[" + std::to_string(index) + "]";
  if (!input.is_object()) return Status::InvalidArgument(where + " must be an object");
  Tensor t;
  auto name = input.find("name");
  if (name == input.end() || !name->is_string()) {
    return Status::InvalidArgument(where + ".name is required and must be a string");
  }
  t.name = name->get<std::string>();
  const std::string tw = "input '" + t.name + "'";
  auto shape = input.find("shape");
  if (shape == input.end() || !shape->is_array()) {
    return Status::InvalidArgument(tw + ": 'shape' is required and must be an array");
  }
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Status::InvalidArgument(tw + ": 'shape' must hold non-negative integers");
    }
    t.shape.push_back(d.get<int64_t>());
  }
  auto count = ElementCount(t.shape);
  if (!count) return Status::InvalidArgument(tw + ": 'shape' overflows");
  auto dtype = input.find("datatype");
  if (dtype == input.end() || !dtype->is_string()) {
    return Status::InvalidArgument(tw + ": 'datatype' is required and must be a string");
  }
  const std::string dt = dtype->get<std::string>();
  auto type = DataTypeFromName(dt);
  if (!type) {
    return Status::InvalidArgument(tw + ": datatype '" + dt +
                                   "' is not one of BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, "
                                   "FP32, FP64, BYTES");
  }
  t.type = *type;
  auto data = input.find("data");
  if (t.type == DataType::kBytes)
    return ReadBytesElements(std::move(t), data, input, binary, *count);
  if (binary) {
    // Triton's binary extension: the elements, little-endian, row-major, after the JSON.
    const auto want = static_cast<uint64_t>(*count) * DataTypeSize(t.type);
    // Compared without trusting the product: count * size can wrap around to the body's size.
    if (static_cast<uint64_t>(*count) > binary->size() / DataTypeSize(t.type) ||
        binary->size() != want) {
      return Status::InvalidArgument(tw + ": binary_data_size is " +
                                     std::to_string(binary->size()) + " bytes but shape " +
                                     ShapeToString(t.shape) + " of " + dt + " needs " +
                                     std::to_string(want));
    }
    const auto* p = reinterpret_cast<const std::byte*>(binary->data());
    t.data.assign(p, p + binary->size());
    return t;
  }
  if (data == input.end() || !data->is_array()) {
    return Status::InvalidArgument(tw + ": 'data' is required and must be an array");
  }
  // Bound the work before converting: a small shape with a huge nested "data" (or the
  // reverse) is refused by the element count check below anyway, but reserve() must not
  // trust the declared shape.
  t.data.reserve(std::min<int64_t>(*count, 1 << 20) * DataTypeSize(t.type));
  int64_t seen = 0;
  const std::string vw = tw + " data";
  const size_t max_depth = std::max<size_t>(1, t.shape.size());
  Status s = ForEachLeaf(*data, max_depth, vw, [&](const nlohmann::json& v) -> Status {
    if (++seen > *count) return Status::Ok();  // Counted, reported below.
    switch (t.type) {
      case DataType::kBool:
        if (!v.is_boolean()) {
          return Status::InvalidArgument(vw + " holds " + JsonTypeName(v) +
                                         " where a boolean is expected");
        }
        t.data.push_back(static_cast<std::byte>(v.get<bool>() ? 1 : 0));
        return Status::Ok();
      case DataType::kUint8: return AppendInteger<uint8_t>(v, vw, &t.data);
      case DataType::kInt8: return AppendInteger<int8_t>(v, vw, &t.data);
      case DataType::kInt16: return AppendInteger<int16_t>(v, vw, &t.data);
      case DataType::kInt32: return AppendInteger<int32_t>(v, vw, &t.data);
      case DataType::kInt64: return AppendInteger<int64_t>(v, vw, &t.data);
      case DataType::kFp32: return AppendFloat<float>(v, vw, &t.data);
      case DataType::kFp64: return AppendFloat<double>(v, vw, &t.data);
      case DataType::kFp16: {
        if (!v.is_number()) {
          return Status::InvalidArgument(vw + " holds " + JsonTypeName(v) +
                                         " where a number is expected");
        }
        const uint16_t h = FloatToHalf(static_cast<float>(v.get<double>()));
        const auto* p = reinterpret_cast<const std::byte*>(&h);
        t.data.insert(t.data.end(), p, p + 2);
        return Status::Ok();
      }
      case DataType::kBytes:
        break;  // Read above.
    }
    return Status::Internal("unhandled datatype");
  });
  if (!s.ok()) return s;
  if (seen != *count) {
    return Status::InvalidArgument(tw + ": 'data' has " + std::to_string(seen) +
                                   " elements but shape " + ShapeToString(t.shape) + " needs " +
                                   std::to_string(*count));
  }
  return t;
}

namespace {

// JSON has no NaN or infinity; a model that emits them is broken, and writing some number in
// their place would hide it.
Status NonFiniteOutput(const Tensor& t, size_t index) {
  return Status::Internal("the model produced a non-finite value (NaN or infinity) in output '" +
                          t.name + "' at element " + std::to_string(index));
}

}  // namespace

Status CheckFiniteOutput(const Tensor& t) {
  if (t.type == DataType::kBytes) return Status::Ok();
  const size_t n = t.data.size() / DataTypeSize(t.type);
  switch (t.type) {
    case DataType::kFp32:
      if (auto i = FindNonFinite(std::span<const float>(t.As<float>(), n))) {
        return NonFiniteOutput(t, *i);
      }
      break;
    case DataType::kFp16:
      for (size_t i = 0; i < n; ++i) {
        // Exponent all ones: infinity or NaN.
        if ((t.As<uint16_t>()[i] & 0x7c00u) == 0x7c00u) return NonFiniteOutput(t, i);
      }
      break;
    case DataType::kFp64:
      if (auto i = FindNonFinite(std::span<const double>(t.As<double>(), n))) {
        return NonFiniteOutput(t, *i);
      }
      break;
    default: break;
  }
  return Status::Ok();
}

Status AppendKServeTensor(const Tensor& t, std::string* out, std::string* binary) {
  const bool bytes = t.type == DataType::kBytes;
  const size_t n = bytes ? t.elements.size() : t.data.size() / DataTypeSize(t.type);
  // Checked before anything is written, so a failure leaves `out` as it was.
  if (Status s = CheckFiniteOutput(t); !s.ok()) return s;
  *out += "{\"name\":";
  AppendJsonString(t.name, out);
  *out += ",\"datatype\":\"" + std::string(DataTypeName(t.type)) + "\",\"shape\":[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) *out += ',';
    *out += std::to_string(t.shape[i]);
  }
  if (bytes && binary) {
    const size_t before = binary->size();
    AppendKServeBinaryStrings(t.elements, binary);
    *out +=
        "],\"parameters\":{\"binary_data_size\":" + std::to_string(binary->size() - before) + "}}";
    return Status::Ok();
  }
  if (binary) {
    *out += "],\"parameters\":{\"binary_data_size\":" + std::to_string(t.data.size()) + "}}";
    binary->append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
    return Status::Ok();
  }
  *out += "],\"data\":";
  auto each = [&](auto&& write_one) {
    *out += '[';
    for (size_t i = 0; i < n; ++i) {
      if (i) *out += ',';
      write_one(i);
    }
    *out += ']';
  };
  switch (t.type) {
    case DataType::kFp32:
      AppendFloatArray(std::span<const float>(t.As<float>(), n), out);
      break;
    case DataType::kFp16: {
      std::vector<float> f(n);
      for (size_t i = 0; i < n; ++i) f[i] = HalfToFloat(t.As<uint16_t>()[i]);
      AppendFloatArray(f, out);
      break;
    }
    case DataType::kFp64:
      each([&](size_t i) {
        const double v = t.As<double>()[i];
        *out += nlohmann::json(v).dump();
      });
      break;
    case DataType::kBool: each([&](size_t i) { *out += t.As<uint8_t>()[i] ? "true" : "false"; }); break;
    case DataType::kUint8: each([&](size_t i) { *out += std::to_string(t.As<uint8_t>()[i]); }); break;
    case DataType::kInt8: each([&](size_t i) { *out += std::to_string(t.As<int8_t>()[i]); }); break;
    case DataType::kInt16: each([&](size_t i) { *out += std::to_string(t.As<int16_t>()[i]); }); break;
    case DataType::kInt32: each([&](size_t i) { *out += std::to_string(t.As<int32_t>()[i]); }); break;
    case DataType::kInt64: each([&](size_t i) { *out += std::to_string(t.As<int64_t>()[i]); }); break;
    case DataType::kBytes:
      each([&](size_t i) { AppendJsonString(t.elements[i], out); });
      break;
  }
  *out += '}';
  return Status::Ok();
}

namespace {

constexpr std::string_view kInferRoute = "/v2/models/{name}/infer";

// Checks the "shape" of a BYTES input of `texts` texts.
Status CheckTextShape(const nlohmann::json& input, size_t texts) {
  const std::string name =
      input.contains("name") && input["name"].is_string() ? input["name"].get<std::string>() : "";
  const std::string tw = "input '" + name + "'";
  auto shape = input.find("shape");
  if (shape == input.end() || !shape->is_array()) {
    return Status::InvalidArgument(tw + ": 'shape' is required and must be an array");
  }
  std::vector<int64_t> dims;
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Status::InvalidArgument(tw + ": 'shape' must hold non-negative integers");
    }
    dims.push_back(d.get<int64_t>());
  }
  auto count = ElementCount(dims);
  if (!count) return Status::InvalidArgument(tw + ": 'shape' overflows");
  if (static_cast<uint64_t>(*count) != texts) {
    return Status::InvalidArgument(tw + ": 'data' has " + std::to_string(texts) +
                                   " elements but shape " + ShapeToString(dims) + " needs " +
                                   std::to_string(*count));
  }
  return Status::Ok();
}

// The names in the request's optional "outputs": an array of objects with a string "name".
Result<std::vector<std::string>> ReadOutputNames(const nlohmann::json& body) {
  std::vector<std::string> names;
  auto outputs = body.find("outputs");
  if (outputs == body.end()) return names;
  if (!outputs->is_array()) {
    return Status::InvalidArgument("field 'outputs' must be an array of objects with a 'name', "
                                   "got " + JsonTypeName(*outputs));
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    const auto& o = (*outputs)[i];
    const auto name = o.is_object() ? o.find("name") : o.end();
    if (!o.is_object() || name == o.end() || !name->is_string()) {
      return Status::InvalidArgument("outputs[" + std::to_string(i) + "] needs a string 'name'" +
                                     (o.is_object() ? "" : ", got " + JsonTypeName(o)));
    }
    names.push_back(name->get<std::string>());
  }
  return names;
}

// The outputs the request asks to classify (KServe's classification extension): an output's
// "parameters": {"classification": k}, k a positive integer.
Result<std::vector<OutputClassification>> ReadClassifications(const nlohmann::json& body) {
  std::vector<OutputClassification> out;
  auto outputs = body.find("outputs");
  if (outputs == body.end()) return out;  // ReadOutputNames checked the rest.
  for (const auto& o : *outputs) {
    auto params = o.find("parameters");
    if (params == o.end()) continue;
    const std::string name = o["name"].get<std::string>();
    if (!params->is_object()) {
      return Status::InvalidArgument("output '" + name + "': 'parameters' must be an object");
    }
    auto k = params->find("classification");
    if (k == params->end()) continue;
    if (!k->is_number_integer() || k->get<int64_t>() < 1 || k->get<int64_t>() > (1 << 30)) {
      return Status::InvalidArgument("output '" + name +
                                     "': parameters.classification must be a positive integer "
                                     "(the number of classes), got " +
                                     k->dump());
    }
    out.push_back({name, static_cast<int32_t>(k->get<int64_t>())});
  }
  return out;
}

// Text models over KServe: one BYTES input of texts -> "embedding" FP32 [n, dim].
// `raw`: the texts in binary (kserve_binary.h), instead of "data".
void InferText(ApiContext& ctx, const HttpExchangePtr& exchange, const nlohmann::json& body,
               const ModelDescription& d, const std::string& id,
               const std::vector<std::string>& outputs, const KServeBinaryOutputs& binary_outputs,
               const std::optional<std::string_view>& raw, StageTimings timings,
               int64_t deadline) {
  const std::string& model = d.name;
  const auto& inputs = body["inputs"];
  if (inputs.size() != 1) {
    return ctx.FinishError(exchange, kInferRoute, model, OneBytesInputError(d), ErrorStyle::kKServe,
                           timings);
  }
  const auto& in = inputs[0];
  // Look "datatype" up by hand: json::value() throws (and would end the process) when the
  // client sent a non-string there.
  const auto datatype = in.is_object() ? in.find("datatype") : in.end();
  if (!in.is_object() || datatype == in.end() || !datatype->is_string() ||
      datatype->get_ref<const std::string&>() != "BYTES") {
    return ctx.FinishError(exchange, kInferRoute, model,
                           Status::InvalidArgument("inputs[0] of a text-embedding model must have "
                                                   "datatype BYTES (texts)"),
                           ErrorStyle::kKServe, timings);
  }
  if (auto name = in.find("name"); name == in.end() || !name->is_string()) {
    return ctx.FinishError(exchange, kInferRoute, model,
                           Status::InvalidArgument("inputs[0].name is required and must be a "
                                                   "string"),
                           ErrorStyle::kKServe, timings);
  }
  if (Status s = CheckRequestedOutputs(d, outputs); !s.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, s, ErrorStyle::kKServe, timings);
  }
  EmbedRequest req;
  req.model = model;
  auto texts = raw ? DecodeKServeBinaryStrings(*raw, in["name"].get<std::string>())
                   : ReadStringOrStringArray(in, "data");
  if (!texts.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, texts.status(), ErrorStyle::kKServe,
                           timings);
  }
  req.inputs = std::move(texts).value();
  // "shape" is required by the protocol and must describe "data" (e.g. [n] or [n, 1]); a
  // mismatch means the client built a different request than it meant to.
  Status shape = CheckTextShape(in, req.inputs.size());
  if (!shape.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, shape, ErrorStyle::kKServe, timings);
  }
  if (auto params = body.find("parameters"); params != body.end() && params->is_object()) {
    auto normalize = ReadOptionalBool(*params, "normalize");
    auto truncate = ReadOptionalBool(*params, "truncate");
    auto precision = ReadOptionalString(*params, "precision");
    for (const Status& s : {normalize.status(), truncate.status(), precision.status()}) {
      if (!s.ok()) return ctx.FinishError(exchange, kInferRoute, model, s, ErrorStyle::kKServe, timings);
    }
    req.normalize = *normalize;
    req.truncate = truncate->value_or(true);
    req.precision = precision->value_or("");
  }
  req.timings = timings;
  req.deadline_micros = deadline;
  const bool binary = binary_outputs.Binary("embedding");
  ctx.Embed(*exchange, std::move(req), [&ctx, exchange, model, id,
                                        binary](Result<EmbedResult> r) {
    if (!r.ok()) {
      return ctx.FinishError(exchange, kInferRoute, model, r.status(), ErrorStyle::kKServe);
    }
    const int64_t start = ctx.clock().NowMicros();
    const Tensor out = EmbeddingTensor(*r);
    HttpResponse res;
    res.body = "{\"model_name\":";
    AppendJsonString(r->model, &res.body);
    res.body += ",\"model_version\":\"1\"";
    if (!id.empty()) {
      res.body += ",\"id\":";
      AppendJsonString(id, &res.body);
    }
    res.body += ",\"parameters\":{\"variant\":";
    AppendJsonString(ServedVariants(*r), &res.body);
    res.body += "},\"outputs\":[";
    std::string tail;
    if (Status s = AppendKServeTensor(out, &res.body, binary ? &tail : nullptr); !s.ok()) {
      return ctx.FinishError(exchange, kInferRoute, r->model, s, ErrorStyle::kKServe, r->timings);
    }
    res.body += "]}";
    SetKServeResponseBody(std::move(res.body), std::move(tail), binary, &res);
    AddVariantHeaders(*r, &res);
    StageTimings t = r->timings;
    t.serialize_micros = ctx.clock().NowMicros() - start;
    ctx.Finish(exchange, kInferRoute, r->model, std::move(res), t);
  });
}

// Generative models over KServe infer, as Triton's LLM backends take it: one BYTES input
// "text_input" holding one prompt, generate's parameters (kserve_generate_api.h) in the
// request's "parameters", and the whole answer as the BYTES output "text_output" (streamed
// answers come from generate_stream). `raw`: the prompt in binary, instead of "data".
void InferGenerative(ApiContext& ctx, const HttpExchangePtr& exchange, const nlohmann::json& body,
                     const ModelDescription& d, const std::string& id,
                     const std::vector<std::string>& outputs,
                     const KServeBinaryOutputs& binary_outputs,
                     const std::optional<std::string_view>& raw, int64_t parse_start,
                     int64_t deadline) {
  const std::string& model = d.name;
  auto fail = [&](const Status& s) {
    ctx.FinishError(exchange, kInferRoute, model, s, ErrorStyle::kKServe);
  };
  const auto& inputs = body["inputs"];
  const auto& in = inputs[0];
  const auto datatype = in.is_object() ? in.find("datatype") : in.end();
  if (inputs.size() != 1 || !in.is_object() || datatype == in.end() || !datatype->is_string() ||
      datatype->get_ref<const std::string&>() != "BYTES" || !in.contains("name") ||
      !in["name"].is_string()) {
    return fail(OneBytesInputError(d));
  }
  if (Status s = CheckRequestedOutputs(d, outputs); !s.ok()) return fail(s);
  auto texts = raw ? DecodeKServeBinaryStrings(*raw, in["name"].get<std::string>())
                   : ReadStringOrStringArray(in, "data");
  if (!texts.ok()) return fail(texts.status());
  if (Status s = CheckTextShape(in, texts->size()); !s.ok()) return fail(s);
  if (texts->size() != 1) {
    return fail(Status::InvalidArgument("a generative model takes one prompt per request, got " +
                                        std::to_string(texts->size())));
  }
  GenerateRequest req;
  req.model = model;
  req.prompt = std::move((*texts)[0]);
  if (auto params = body.find("parameters"); params != body.end()) {
    if (Status s = ReadKServeGenerateParameters(*params, false, &req); !s.ok()) return fail(s);
  }
  req.received_micros = exchange->received_micros();
  req.deadline_micros = deadline;
  const int64_t parse_micros = ctx.clock().NowMicros() - parse_start;
  req.timings.parse_micros = parse_micros;
  const bool binary = binary_outputs.Binary("text_output");
  auto sink = std::make_shared<CollectingGenerationSink>(
      ctx, false, parse_micros, [&ctx, exchange, model, id, binary](Result<GeneratedText> r) {
        if (!r.ok()) {
          return ctx.FinishError(exchange, kInferRoute, model, r.status(), ErrorStyle::kKServe);
        }
        const int64_t start = ctx.clock().NowMicros();
        HttpResponse res;
        res.body = "{\"model_name\":";
        AppendJsonString(r->start.model, &res.body);
        res.body += ",\"model_version\":\"1\"";
        if (!id.empty()) {
          res.body += ",\"id\":";
          AppendJsonString(id, &res.body);
        }
        res.body += ",\"parameters\":{\"variant\":";
        AppendJsonString(r->start.variant, &res.body);
        res.body += "},\"outputs\":[{\"name\":\"text_output\",\"datatype\":\"BYTES\",\"shape\":[1],";
        std::string tail;
        if (binary) {
          tail = EncodeKServeBinaryString(r->text);
          res.body += "\"parameters\":{\"binary_data_size\":" + std::to_string(tail.size()) + "}}]}";
        } else {
          res.body += "\"data\":[";
          AppendJsonString(r->text, &res.body);
          res.body += "]}]}";
        }
        SetKServeResponseBody(std::move(res.body), std::move(tail), binary, &res);
        if (!r->start.variant.empty()) res.headers.emplace_back("X-Tailcut-Variant", r->start.variant);
        StageTimings t = r->timings;
        t.serialize_micros = ctx.clock().NowMicros() - start;
        const std::string server_timing = GenerationServerTiming(t);
        ctx.Finish(exchange, kInferRoute, r->start.model, std::move(res), t, server_timing);
      });
  ctx.Generate(*exchange, std::move(req), std::move(sink));
}

void HandleInfer(ApiContext& ctx, const HttpExchangePtr& exchange) {
  const int64_t parse_start = ctx.clock().NowMicros();
  const std::string model = exchange->params["name"];
  auto described = ctx.api().DescribeModel(model);
  if (!described.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, described.status(), ErrorStyle::kKServe);
  }
  std::string raw_body = exchange->TakeBody();  // Not held while the request waits.
  std::string binary;  // The inputs' bytes after the JSON (Triton's binary extension).
  const HttpRequest& http = exchange->request();
  if (auto h = http.find("Inference-Header-Content-Length"); h != http.end()) {
    auto split = SplitKServeBinaryBody(std::move(raw_body),
                                       std::string_view(h->value().data(), h->value().size()));
    if (!split.ok()) {
      return ctx.FinishError(exchange, kInferRoute, model, split.status(), ErrorStyle::kKServe);
    }
    raw_body = std::move(split->json);
    binary = std::move(split->binary);
  }
  auto body = ParseJsonObject(std::move(raw_body));
  if (!body.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, body.status(), ErrorStyle::kKServe);
  }
  auto inputs = body->find("inputs");
  if (inputs == body->end() || !inputs->is_array() || inputs->empty()) {
    return ctx.FinishError(exchange, kInferRoute, model,
                           Status::InvalidArgument("field 'inputs' is required and must be a "
                                                   "non-empty array"),
                           ErrorStyle::kKServe);
  }
  auto raw_inputs = KServeBinaryInputs(*inputs, binary);
  if (!raw_inputs.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, raw_inputs.status(), ErrorStyle::kKServe);
  }
  auto binary_outputs = KServeBinaryOutputs::Read(*body);
  if (!binary_outputs.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, binary_outputs.status(),
                           ErrorStyle::kKServe);
  }
  std::string id;
  if (auto it = body->find("id"); it != body->end()) {
    if (!it->is_string()) {
      return ctx.FinishError(exchange, kInferRoute, model,
                             Status::InvalidArgument("field 'id' must be a string"),
                             ErrorStyle::kKServe);
    }
    id = it->get<std::string>();
  }
  auto deadline = ctx.DeadlineFromHeaders(*exchange);
  if (!deadline.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, deadline.status(), ErrorStyle::kKServe);
  }
  int64_t deadline_micros = *deadline;
  // Triton's request parameter: timeout in microseconds.
  if (auto params = body->find("parameters"); params != body->end()) {
    if (!params->is_object()) {
      return ctx.FinishError(exchange, kInferRoute, model,
                             Status::InvalidArgument("field 'parameters' must be an object"),
                             ErrorStyle::kKServe);
    }
    auto timeout = ReadOptionalInt(*params, "timeout");
    if (!timeout.ok() || (timeout->has_value() && **timeout <= 0)) {
      return ctx.FinishError(
          exchange, kInferRoute, model,
          Status::InvalidArgument("parameters.timeout must be a positive integer (microseconds)"),
          ErrorStyle::kKServe);
    }
    if (timeout->has_value()) {
      // Saturate: a timeout of centuries is no deadline, not a signed overflow into the past.
      const int64_t received = exchange->received_micros();
      deadline_micros = **timeout > std::numeric_limits<int64_t>::max() -
                                        std::max<int64_t>(received, 0)
                            ? std::numeric_limits<int64_t>::max()
                            : received + **timeout;
    }
  }
  // Checked for every model kind: a malformed field is an error even where it has no effect.
  auto outputs = ReadOutputNames(*body);
  if (!outputs.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, outputs.status(), ErrorStyle::kKServe);
  }
  if (described->kind == "generative") {
    return InferGenerative(ctx, exchange, *body, *described, id, *outputs, *binary_outputs,
                           (*raw_inputs)[0], parse_start, deadline_micros);
  }
  StageTimings timings;
  if (described->kind == "text-embedding") {
    timings.parse_micros = ctx.clock().NowMicros() - parse_start;
    return InferText(ctx, exchange, *body, *described, id, *outputs, *binary_outputs,
                     (*raw_inputs)[0], timings, deadline_micros);
  }

  TensorRequest req;
  req.model = described->name;
  for (size_t i = 0; i < inputs->size(); ++i) {
    const auto& raw = (*raw_inputs)[i];
    auto t = ParseKServeTensor((*inputs)[i], i, raw ? &*raw : nullptr);
    if (!t.ok()) {
      return ctx.FinishError(exchange, kInferRoute, model, t.status(), ErrorStyle::kKServe);
    }
    req.inputs.push_back(std::move(t).value());
  }
  auto classifications = ReadClassifications(*body);
  if (!classifications.ok()) {
    return ctx.FinishError(exchange, kInferRoute, model, classifications.status(),
                           ErrorStyle::kKServe);
  }
  req.outputs = std::move(outputs).value();
  req.classifications = std::move(classifications).value();
  if (auto params = body->find("parameters"); params != body->end()) {  // An object (above).
    auto precision = ReadOptionalString(*params, "precision");
    if (!precision.ok()) {
      return ctx.FinishError(exchange, kInferRoute, model, precision.status(), ErrorStyle::kKServe);
    }
    req.precision = precision->value_or("");
  }
  req.received_micros = exchange->received_micros();
  req.deadline_micros = deadline_micros;
  req.timings.parse_micros = ctx.clock().NowMicros() - parse_start;
  ctx.Infer(*exchange, std::move(req), [&ctx, exchange, model, id,
                                        binary_outputs = std::move(binary_outputs).value()](
                                           Result<TensorResult> r) {
    if (!r.ok()) {
      return ctx.FinishError(exchange, kInferRoute, model, r.status(), ErrorStyle::kKServe);
    }
    const int64_t start = ctx.clock().NowMicros();
    HttpResponse res;
    res.body = "{\"model_name\":";
    AppendJsonString(r->model, &res.body);
    res.body += ",\"model_version\":\"1\"";
    if (!id.empty()) {
      res.body += ",\"id\":";
      AppendJsonString(id, &res.body);
    }
    res.body += ",\"parameters\":{\"variant\":";
    AppendJsonString(r->variant, &res.body);
    res.body += "},\"outputs\":[";
    res.headers.emplace_back("X-Tailcut-Variant", r->variant);
    std::string tail;
    bool binary = false;
    for (size_t i = 0; i < r->outputs.size(); ++i) {
      if (i) res.body += ',';
      const bool this_binary = binary_outputs.Binary(r->outputs[i].name);
      binary = binary || this_binary;
      if (Status s = AppendKServeTensor(r->outputs[i], &res.body, this_binary ? &tail : nullptr);
          !s.ok()) {
        return ctx.FinishError(exchange, kInferRoute, r->model, s, ErrorStyle::kKServe,
                               r->timings);
      }
    }
    res.body += "]}";
    SetKServeResponseBody(std::move(res.body), std::move(tail), binary, &res);
    StageTimings t = r->timings;
    t.serialize_micros = ctx.clock().NowMicros() - start;
    ctx.Finish(exchange, kInferRoute, r->model, std::move(res), t);
  });
}

}  // namespace

void AddKServeRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/v2", [&ctx](const HttpExchangePtr& ex) {
    HttpResponse res;
    res.body = nlohmann::json{{"name", "tailcut"}, {"version", TAILCUT_VERSION},
                              {"extensions", nlohmann::json::array()}}
                   .dump();
    ctx.Finish(ex, "/v2", "", std::move(res), {});
  });
  router.Add("GET", "/v2/health/live", [&ctx](const HttpExchangePtr& ex) {
    HttpResponse res;
    res.body = "{\"live\":true}";
    ctx.Finish(ex, "/v2/health/live", "", std::move(res), {});
  });
  router.Add("GET", "/v2/health/ready", [&ctx](const HttpExchangePtr& ex) {
    HttpResponse res;
    const bool ready = ctx.api().Ready();
    res.status = ready ? 200 : 503;
    res.body = ready ? "{\"ready\":true}" : "{\"ready\":false,\"error\":\"not ready\"}";
    ctx.Finish(ex, "/v2/health/ready", "", std::move(res), {});
  });
  router.Add("POST", std::string(kInferRoute),
             [&ctx](const HttpExchangePtr& ex) { HandleInfer(ctx, ex); });
}

}  // namespace tailcut
