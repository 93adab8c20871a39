#include "server/grpc/kserve_grpc_tensors.h"

#include <cstring>
#include <limits>
#include <string_view>

#include "server/kserve_api.h"
#include "server/kserve_binary.h"

namespace tailcut {
namespace {

using InputTensor = inference::ModelInferRequest::InferInputTensor;

// How many typed elements the input carries, over every contents field: the one that matches
// its datatype is read, and any other one set is a mistake worth naming.
size_t TypedElements(const inference::InferTensorContents& c) {
  return static_cast<size_t>(c.bool_contents_size()) + c.int_contents_size() +
         c.int64_contents_size() + c.uint_contents_size() + c.uint64_contents_size() +
         c.fp32_contents_size() + c.fp64_contents_size() + c.bytes_contents_size();
}

Result<Shape> ReadShape(const InputTensor& input, const std::string& where) {
  Shape shape;
  for (int64_t d : input.shape()) {
    if (d < 0) return Status::InvalidArgument(where + ": 'shape' must hold non-negative integers");
    shape.push_back(d);
  }
  if (!ElementCount(shape)) return Status::InvalidArgument(where + ": 'shape' overflows");
  return shape;
}

template <typename T, typename Field>
Status AppendIntegers(const Field& values, const std::string& where, std::vector<std::byte>* out) {
  for (const auto v : values) {
    if (static_cast<int64_t>(v) < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        static_cast<int64_t>(v) > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return Status::InvalidArgument(where + " holds " + std::to_string(v) +
                                     ", out of range for its datatype");
    }
    const T t = static_cast<T>(v);
    const auto* p = reinterpret_cast<const std::byte*>(&t);
    out->insert(out->end(), p, p + sizeof(T));
  }
  return Status::Ok();
}

template <typename T, typename Field>
void AppendAs(const Field& values, std::vector<std::byte>* out) {
  for (const auto v : values) {
    const T t = static_cast<T>(v);
    const auto* p = reinterpret_cast<const std::byte*>(&t);
    out->insert(out->end(), p, p + sizeof(T));
  }
}

// The typed contents field a datatype's elements are in, by the protocol's name.
std::string_view ContentsFieldFor(DataType type) {
  switch (type) {
    case DataType::kBool: return "bool_contents";
    case DataType::kUint8: return "uint_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return "int_contents";
    case DataType::kInt64: return "int64_contents";
    case DataType::kFp16: return "raw_input_contents (FP16 has no typed contents)";
    case DataType::kFp32: return "fp32_contents";
    case DataType::kFp64: return "fp64_contents";
    case DataType::kBytes:
      return "bytes_contents";
  }
  return "";
}

size_t FieldSize(const inference::InferTensorContents& c, DataType type) {
  switch (type) {
    case DataType::kBool: return static_cast<size_t>(c.bool_contents_size());
    case DataType::kUint8: return static_cast<size_t>(c.uint_contents_size());
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return static_cast<size_t>(c.int_contents_size());
    case DataType::kInt64: return static_cast<size_t>(c.int64_contents_size());
    case DataType::kFp16: return 0;
    case DataType::kFp32: return static_cast<size_t>(c.fp32_contents_size());
    case DataType::kFp64: return static_cast<size_t>(c.fp64_contents_size());
    case DataType::kBytes:
      return static_cast<size_t>(c.bytes_contents_size());
  }
  return 0;
}

}  // namespace

Result<std::vector<const std::string*>> GrpcRawInputs(const inference::ModelInferRequest& request) {
  std::vector<const std::string*> raw(static_cast<size_t>(request.inputs_size()), nullptr);
  if (request.raw_input_contents_size() == 0) return raw;
  if (request.raw_input_contents_size() != request.inputs_size()) {
    return Status::InvalidArgument(
        "raw_input_contents has " + std::to_string(request.raw_input_contents_size()) +
        " entries but the request has " + std::to_string(request.inputs_size()) +
        " inputs: give every input's elements there, one entry each, or none");
  }
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    if (input.has_contents() && TypedElements(input.contents()) > 0) {
      return Status::InvalidArgument("input '" + input.name() +
                                     "' has both contents and raw_input_contents; give one");
    }
    raw[static_cast<size_t>(i)] = &request.raw_input_contents(i);
  }
  return raw;
}

Result<Tensor> TensorFromGrpcInput(const InputTensor& input, size_t index, const std::string* raw) {
  if (input.name().empty()) {
    return Status::InvalidArgument("inputs[" + std::to_string(index) + "].name is required");
  }
  const std::string where = "input '" + input.name() + "'";
  auto type = DataTypeFromName(input.datatype());
  if (!type) {
    return Status::InvalidArgument(where + ": datatype '" + input.datatype() +
                                   "' is not one of BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, "
                                   "FP32, FP64, BYTES");
  }
  auto shape = ReadShape(input, where);
  if (!shape.ok()) return shape.status();
  Tensor t;
  t.name = input.name();
  t.type = *type;
  t.shape = std::move(shape).value();
  if (t.type == DataType::kBytes) {
    auto elements = TextsFromGrpcInput(input, raw);  // The same checks, whatever the bytes are.
    if (!elements.ok()) return elements.status();
    t.elements = std::move(elements).value();
    return t;
  }
  const uint64_t count = static_cast<uint64_t>(*ElementCount(t.shape));
  if (raw) {
    // Compared without multiplying: count * size can wrap around to the raw size.
    const uint64_t want = count * DataTypeSize(t.type);
    if (count > raw->size() / DataTypeSize(t.type) || raw->size() != want) {
      return Status::InvalidArgument(where + ": raw_input_contents has " +
                                     std::to_string(raw->size()) + " bytes but shape " +
                                     ShapeToString(t.shape) + " of " + input.datatype() +
                                     " needs " + std::to_string(want));
    }
    const auto* p = reinterpret_cast<const std::byte*>(raw->data());
    t.data.assign(p, p + raw->size());
    return t;
  }
  const inference::InferTensorContents& c = input.contents();
  const size_t given = FieldSize(c, t.type);
  if (given != TypedElements(c)) {
    return Status::InvalidArgument(where + ": a " + input.datatype() + " tensor's elements go in " +
                                   std::string(ContentsFieldFor(t.type)) +
                                   ", but other contents fields are set");
  }
  if (given != count) {
    return Status::InvalidArgument(where + ": " + std::string(ContentsFieldFor(t.type)) + " has " +
                                   std::to_string(given) + " elements but shape " +
                                   ShapeToString(t.shape) + " needs " + std::to_string(count));
  }
  t.data.reserve(count * DataTypeSize(t.type));
  const std::string vw = where + " contents";
  switch (t.type) {
    case DataType::kBool: AppendAs<uint8_t>(c.bool_contents(), &t.data); break;
    case DataType::kUint8:
      for (uint32_t v : c.uint_contents()) {
        if (v > 255) {
          return Status::InvalidArgument(vw + " holds " + std::to_string(v) +
                                         ", out of range for its datatype");
        }
      }
      AppendAs<uint8_t>(c.uint_contents(), &t.data);
      break;
    case DataType::kInt8:
      if (Status s = AppendIntegers<int8_t>(c.int_contents(), vw, &t.data); !s.ok()) return s;
      break;
    case DataType::kInt16:
      if (Status s = AppendIntegers<int16_t>(c.int_contents(), vw, &t.data); !s.ok()) return s;
      break;
    case DataType::kInt32: AppendAs<int32_t>(c.int_contents(), &t.data); break;
    case DataType::kInt64: AppendAs<int64_t>(c.int64_contents(), &t.data); break;
    case DataType::kFp16: break;  // count == 0 here: no typed field, so nothing to copy.
    case DataType::kFp32: AppendAs<float>(c.fp32_contents(), &t.data); break;
    case DataType::kFp64: AppendAs<double>(c.fp64_contents(), &t.data); break;
    case DataType::kBytes:
      break;  // Read above.
  }
  return t;
}

Result<std::vector<std::string>> TextsFromGrpcInput(const InputTensor& input,
                                                    const std::string* raw) {
  const std::string where = "input '" + input.name() + "'";
  std::vector<std::string> texts;
  if (raw) {
    auto decoded = DecodeKServeBinaryStrings(*raw, input.name());
    if (!decoded.ok()) return decoded.status();
    texts = std::move(decoded).value();
  } else {
    const inference::InferTensorContents& c = input.contents();
    if (static_cast<size_t>(c.bytes_contents_size()) != TypedElements(c)) {
      return Status::InvalidArgument(where + ": a BYTES tensor's elements go in bytes_contents, "
                                     "but other contents fields are set");
    }
    texts.assign(c.bytes_contents().begin(), c.bytes_contents().end());
  }
  auto shape = ReadShape(input, where);
  if (!shape.ok()) return shape.status();
  const int64_t count = *ElementCount(*shape);
  if (static_cast<uint64_t>(count) != texts.size()) {
    return Status::InvalidArgument(where + ": it has " + std::to_string(texts.size()) +
                                   " elements but shape " + ShapeToString(*shape) + " needs " +
                                   std::to_string(count));
  }
  return texts;
}

Status AddGrpcOutput(const Tensor& t, inference::ModelInferResponse* response) {
  if (Status s = CheckFiniteOutput(t); !s.ok()) return s;
  auto* out = response->add_outputs();
  out->set_name(t.name);
  out->set_datatype(std::string(DataTypeName(t.type)));
  for (int64_t d : t.shape) out->add_shape(d);
  std::string* raw = response->add_raw_output_contents();
  if (t.type == DataType::kBytes) {
    AppendKServeBinaryStrings(t.elements, raw);
    return Status::Ok();
  }
  raw->assign(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return Status::Ok();
}

}  // namespace tailcut
