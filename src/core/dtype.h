#pragma once
// Element types. The compute types are f32, bf16, f16; fp8-e4m3 is a storage type. The rest exist
// because safetensors files may carry them (integers, bool, f64, fp8-e5m2).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace specserve {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  F8_E4M3,
  F8_E5M2,
  F64,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64,
  BOOL,
};

// Size of one element in bytes.
size_t dtype_size(DType t);
// The safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType t);
// Parses the safetensors spelling; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);
bool is_float(DType t);

// ---- exact scalar conversions --------------------------------------------------------------

// bf16 <-> f32. f32 -> bf16 rounds to nearest even; NaN stays NaN (quiet).
uint16_t f32_to_bf16(float x);
float bf16_to_f32(uint16_t x);

// IEEE half <-> f32, round to nearest even, with subnormals, inf and NaN.
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t x);

// OCP fp8 e4m3 (finite-only "fn" variant used by safetensors F8_E4M3: bias 7, max 448, 0x7F/0xFF
// are NaN). f32 -> e4m3 rounds to nearest even and saturates to ±448.
uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t x);
// The same for every code, as a table of 256 (0x7F / 0xFF are NaN).
const float* e4m3_f32_table();
// fp8 e5m2 (IEEE-like: bias 15, has inf).
float e5m2_to_f32(uint8_t x);

// Converts n elements of `src` (type `from`) into f32. Supports every float type and integers.
void convert_to_f32(const void* src, DType from, float* dst, size_t n);
// Converts n f32 values into `to` (F32, F16, BF16, F8_E4M3).
void convert_from_f32(const float* src, DType to, void* dst, size_t n);

}  // namespace specserve
