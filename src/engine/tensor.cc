#include "engine/tensor.h"

#include <array>
#include <bit>
#include <limits>
#include <utility>

namespace tailcut {
namespace {

constexpr std::array<std::pair<DataType, std::string_view>, 10> kNames = {{
    {DataType::kBool, "BOOL"},
    {DataType::kUint8, "UINT8"},
    {DataType::kInt8, "INT8"},
    {DataType::kInt16, "INT16"},
    {DataType::kInt32, "INT32"},
    {DataType::kInt64, "INT64"},
    {DataType::kFp16, "FP16"},
    {DataType::kFp32, "FP32"},
    {DataType::kFp64, "FP64"},
    {DataType::kBytes, "BYTES"},
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
    case DataType::kBytes:
      return 0;
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

uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN.
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // Overflow to Inf.
  if (abs < 0x38800000u) {                                               // Subnormal half or zero.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    // value = mant * 2^(e - 150) and a half subnormal counts units of 2^-24, so the half is
    // mant >> (126 - e): shift + 1 bits, with `halfway` the highest bit shifted out.
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 125 - static_cast<int>(abs >> 23);
    uint32_t half = mant >> (shift + 1);
    const uint32_t rem = mant & ((1u << (shift + 1)) - 1);
    const uint32_t halfway = 1u << shift;
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // Subnormal: normalise.
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace tailcut
