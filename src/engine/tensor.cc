#include "engine/tensor.h"

#include <array>
#include <limits>
#include <utility>

namespace tailcut {
namespace {

constexpr std::array<std::pair<DataType, std::string_view>, 9> kNames = {{
    {DataType::kBool, "BOOL"},
    {DataType::kUint8, "UINT8"},
    {DataType::kInt8, "INT8"},
    {DataType::kInt16, "INT16"},
    {DataType::kInt32, "INT32"},
    {DataType::kInt64, "INT64"},
    {DataType::kFp16, "FP16"},
    {DataType::kFp32, "FP32"},
    {DataType::kFp64, "FP64"},
}};

}  // namespace

size_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kBool:
    case DataType::kUint8:
    case DataType::kInt8:
      return 1;
    case DataType::kInt16:
    case DataType::kFp16:
      return 2;
    case DataType::kInt32:
    case DataType::kFp32:
      return 4;
    case DataType::kInt64:
    case DataType::kFp64:
      return 8;
  }
  return 0;
}

std::string_view DataTypeName(DataType type) {
  for (const auto& [t, name] : kNames) {
    if (t == type) return name;
  }
  return "UNKNOWN";
}

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (const auto& [t, n] : kNames) {
    if (n == name) return t;
  }
  return std::nullopt;
}

std::optional<int64_t> ElementCount(const Shape& shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    count *= d;
  }
  return count;
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  out += "]";
  return out;
}

}  // namespace tailcut
