// Tensor maps (TMA descriptors) for the Hopper GEMMs that load their operands with TMA: the prefill GEMM
// (matmul_prefill_sm90a.cu), its W8A8 form (matmul_prefill_fp8_sm90a.cu) and the row-invariant slice-serial kernel
// for verify rows (matmul_wgmma_tma_sm90a.cu).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace specserve::cuda {

// A row-major bf16 [rows, cols] matrix (row stride `ld` elements) read in boxes of `box_cols` x `box_rows`
// elements with the 128-byte swizzle (box_cols = 64: one 128-byte row of a box), zeros outside the matrix.
// `who` names the caller in the error when the driver refuses the map.
CUtensorMap bf16_tensor_map(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_cols, int box_rows,
                            const char* who);
// The same for a byte matrix (e4m3 codes; the W8A8 prefill GEMM, matmul_prefill_fp8_sm90a.cu): box_cols = 128, one
// 128-byte row of a box, with the 128-byte swizzle; `ld` in bytes (a multiple of 16).
CUtensorMap e4m3_tensor_map(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_cols, int box_rows,
                            const char* who);
// A row-major f32 [rows, cols] matrix (row stride `ld` elements, ld * 4 a multiple of 16) in plain (unswizzled)
// boxes of box_cols x box_rows, zeros outside.
CUtensorMap f32_tensor_map(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_cols, int box_rows,
                           const char* who);

}  // namespace specserve::cuda
