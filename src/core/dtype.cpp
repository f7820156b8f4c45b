#include "core/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace specserve {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
  bool is_float;
};

constexpr std::array<DTypeInfo, 15> kInfo = {{
    {DType::F32, "F32", 4, true},
    {DType::F16, "F16", 2, true},
    {DType::BF16, "BF16", 2, true},
    {DType::F8_E4M3, "F8_E4M3", 1, true},
    {DType::F8_E5M2, "F8_E5M2", 1, true},
    {DType::F64, "F64", 8, true},
    {DType::I8, "I8", 1, false},
    {DType::I16, "I16", 2, false},
    {DType::I32, "I32", 4, false},
    {DType::I64, "I64", 8, false},
    {DType::U8, "U8", 1, false},
    {DType::U16, "U16", 2, false},
    {DType::U32, "U32", 4, false},
    {DType::U64, "U64", 8, false},
    {DType::BOOL, "BOOL", 1, false},
}};

const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
bool is_float(DType t) { return info(t).is_float; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

uint16_t f32_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

float bf16_to_f32(uint16_t x) { return std::bit_cast<float>(static_cast<uint32_t>(x) << 16); }

uint16_t f32_to_f16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf (>= 65520)
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): value = m * 2^-24.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // 113 - exp + 13
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t rounding = 0xfffu + ((abs >> 13) & 1u);
  uint32_t r = ((abs - 0x38000000u) + rounding) >> 13;
  return static_cast<uint16_t>(sign | r);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

float e4m3_to_f32(uint8_t x) {
  uint32_t sign = x & 0x80u;
  uint32_t exp = (x >> 3) & 0xfu;
  uint32_t mant = x & 0x7u;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -9);  // subnormal: m/8 * 2^-6
  else
    v = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, static_cast<int>(exp) - 7);
  return sign ? -v : v;
}

uint8_t f32_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;  // saturate to max finite
  // Find the nearest representable value, ties to even, by scanning the 127 non-negative codes.
  // (Slow but exact; fp8 conversion is only used at load time and in tests.)
  uint8_t best = 0;
  float best_err = a;
  for (uint8_t c = 1; c <= 0x7e; ++c) {
    float v = e4m3_to_f32(c);
    float err = std::fabs(v - a);
    if (err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) == 1)) {
      best = c;
      best_err = err;
    }
  }
  return sign | best;
}

const float* e4m3_f32_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int code = 0; code < 256; ++code) t[static_cast<size_t>(code)] = e4m3_to_f32(static_cast<uint8_t>(code));
    return t;
  }();
  return table.data();
}

float e5m2_to_f32(uint8_t x) { return f16_to_f32(static_cast<uint16_t>(x) << 8); }

void convert_to_f32(const void* src, DType from, float* dst, size_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  auto load = [&](auto tag, size_t i) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, b + i * sizeof(T), sizeof(T));
    return v;
  };
  switch (from) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load(uint16_t{}, i));
      return;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load(uint16_t{}, i));
      return;
    case DType::F8_E4M3:
      for (size_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(b[i]);
      return;
    case DType::F8_E5M2:
      for (size_t i = 0; i < n; ++i) dst[i] = e5m2_to_f32(b[i]);
      return;
    case DType::F64:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(double{}, i));
      return;
    case DType::I8:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(int8_t{}, i));
      return;
    case DType::I16:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(int16_t{}, i));
      return;
    case DType::I32:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(int32_t{}, i));
      return;
    case DType::I64:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(int64_t{}, i));
      return;
    case DType::U8:
    case DType::BOOL:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(b[i]);
      return;
    case DType::U16:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(uint16_t{}, i));
      return;
    case DType::U32:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(uint32_t{}, i));
      return;
    case DType::U64:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load(uint64_t{}, i));
      return;
  }
}

void convert_from_f32(const float* src, DType to, void* dst, size_t n) {
  auto* b = static_cast<uint8_t*>(dst);
  switch (to) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v = f32_to_bf16(src[i]);
        std::memcpy(b + 2 * i, &v, 2);
      }
      return;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v = f32_to_f16(src[i]);
        std::memcpy(b + 2 * i, &v, 2);
      }
      return;
    case DType::F8_E4M3:
      for (size_t i = 0; i < n; ++i) b[i] = f32_to_e4m3(src[i]);
      return;
    default: fail("convert_from_f32: unsupported target dtype {}", dtype_name(to));
  }
}

}  // namespace specserve
