#pragma once
// The bf16 dequantisation of a block-scaled fp8 weight (backend/ops.h: bf16_rn(f32_rn(e4m3 × scale)), the value
// io/fp8_blocks.h stores at load) by a 16-entry table per 128 × 128 block instead of a float multiply and a
// rounding per element. For a scale s > 0 (the scale of a block):
//   - a normal code (exponent field e = 1..15, mantissa m) is ±2^e × (1 + m/8) × 2^-7, so its product with s is
//     2^e times (1 + m/8) × s × 2^-7; multiplying by a power of two commutes with both roundings while nothing is
//     subnormal or infinite, so its bf16 bits are normal[m] + (e << 7): the exponent field moved by e;
//   - a subnormal code (e = 0) is ±m × 2^-9: its bits are subnormal[m] (m = 0: +0);
//   - the code's sign bit is bit 15 of the result (s > 0 keeps it).
// Entry i < 8 is normal[i], entry 8 + i is subnormal[i]: an element's entry index is m | (e == 0 ? 8 : 0).
// make_fp8_bf16_table refuses (false) a scale outside [2^-100, 2^8), where an entry could be subnormal or a
// product overflow (e4m3's largest value is 448 < 2^9); such blocks keep the multiply-and-round path. The NaN
// codes 0x7F / 0xFF are not e4m3 values (the loader refuses them: io/fp8_blocks.h).
#include <cstdint>

#include "core/dtype.h"

namespace specserve::cpu {

struct Fp8Bf16Table {
  uint16_t entry[16];
};

inline bool make_fp8_bf16_table(float s, Fp8Bf16Table& t) {
  if (!(s >= 0x1p-100f && s < 0x1p8f)) return false;
  for (int m = 0; m < 8; ++m) {
    // f32_rn((1 + m/8) × s) × 2^-7 is f32_rn((1 + m/8) × 2^-7 × s): the factor 2^-7 is exact.
    t.entry[m] = f32_to_bf16(e4m3_to_f32(static_cast<uint8_t>(0x38 | m)) * s * 0x1p-7f);  // e = 7: (1 + m/8)
    t.entry[8 + m] = f32_to_bf16(e4m3_to_f32(static_cast<uint8_t>(m)) * s);               // e = 0: m × 2^-9
  }
  return true;
}

inline int fp8_table_index(uint8_t code) { return (code & 7) | ((code & 0x78) == 0 ? 8 : 0); }

// The bf16 bits of code × s (the definition above) from s's table.
inline uint16_t fp8_bf16_bits(uint8_t code, const Fp8Bf16Table& t) {
  return static_cast<uint16_t>(((code & 0x80) << 8) | (t.entry[fp8_table_index(code)] + ((code & 0x78) << 4)));
}

}  // namespace specserve::cpu
