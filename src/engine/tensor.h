// Tensor: a named, typed, shaped block of bytes that crosses the boundary between protocol
// front-ends (KServe v2 JSON tensors) and the ONNX Runtime engine, plus the data-type
// vocabulary shared by both.
//
// Thread-safety: plain value types; no internal synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tailcut {

// kBytes: KServe's BYTES, elements of any length (encoded images in, classification labels
// out); the engine itself never takes or gives one.
enum class DataType { kBool, kUint8, kInt8, kInt16, kInt32, kInt64, kFp16, kFp32, kFp64, kBytes };

// Bytes per element; 0 for kBytes, whose elements vary in length.
size_t DataTypeSize(DataType type);
// KServe v2 / Triton names: "BOOL", "UINT8", ..., "FP16", "FP32", "FP64", "BYTES".
std::string_view DataTypeName(DataType type);
std::optional<DataType> DataTypeFromName(std::string_view name);

// Shape with -1 for a dimension that is dynamic (only in specs, never in a concrete tensor).
using Shape = std::vector<int64_t>;

// Number of elements of a concrete shape; nullopt if a dimension is negative or it overflows.
std::optional<int64_t> ElementCount(const Shape& shape);
std::string ShapeToString(const Shape& shape);

// IEEE half <-> float, round to nearest even.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// Declared input or output of a model.
struct TensorSpec {
  std::string name;
  DataType type = DataType::kFp32;
  Shape shape;  // -1 where the model leaves the dimension free.
};

struct Tensor {
  std::string name;
  DataType type = DataType::kFp32;
  Shape shape;
  // Fixed-size types: row-major, ElementCount(shape) * DataTypeSize(type) bytes.
  std::vector<std::byte> data;
  // kBytes: the ElementCount(shape) elements, row-major (`data` stays empty).
  std::vector<std::string> elements;

  template <typename T>
  T* As() {
    return reinterpret_cast<T*>(data.data());
  }
  template <typename T>
  const T* As() const {
    return reinterpret_cast<const T*>(data.data());
  }
};

}  // namespace tailcut
