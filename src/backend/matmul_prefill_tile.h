#pragma once
// The prefill GEMM's tile width (cuda/matmul_prefill_sm90a.cu): its output tiles are 128 rows x BN columns,
// BN one of kPrefillTileWidths, chosen per launch from the launch's weights (their N; K and the device's
// multiprocessor count) and never from M, so a prefill row's kernel does not depend on its chunk
// (docs/DESIGN.md §1.2). The width does not change an element's bits either: every width computes each
// element as the same one f32 chain over all of K, one wgmma k16 step per 16 k (the GPU tests compare every
// width with 256 bit for bit).
//
// Why: the persistent kernel runs ceil(tiles / SMs) waves of tiles; N = 5,120 (the 27B's o_proj, out_proj
// and MLP down) at a 2,048-row chunk is 16 x 20 = 320 tiles of 256 columns, 2.42 waves of 132 SMs, so the
// last wave runs 55 SMs (81 % of the launch's SM time computes). 160 columns make 512 tiles, 3.88 waves (97 %).
// A narrower tile reads more operand bytes per multiply-add ((1/128 + 1/BN) per element and k: 160 columns
// 1.2x 256's, 128 columns 1.33x), so a width's full-wave rate is below 256's: prefill_tile_rate.
//
// The rule: the width with the highest rate(width) x mean over kPrefillReferenceRows of the wave efficiency
// (prefill_wave_efficiency), the wider one on a tie. K does not enter: every width runs all of K per tile, so
// K scales every width's tile time alike; it is in the signature because the contract allows (N, K).
// Host code (C++17: the CUDA sources include it); tests/backend/test_matmul_prefill_tile.cpp has the table.
#include <cstdint>

namespace specserve {

inline constexpr int kPrefillTileRows = 128;
inline constexpr int kPrefillTileWidthCount = 4;
inline constexpr int kPrefillTileWidths[kPrefillTileWidthCount] = {256, 192, 160, 128};  // widest first
// The rows at which the rule weighs waves: the engine's default prefill chunk and twice it.
inline constexpr int64_t kPrefillReferenceRows[] = {2048, 4096};

bool prefill_tile_width_valid(int width);
// A width's rate at full waves relative to 256's (an estimate until measured: bench_cuda_matmul's
// BM_PrefillWidths reports each width's TFLOP/s and its rate net of wave losses).
double prefill_tile_rate(int width);
// The fraction of a launch's multiprocessor time that computes outputs: rows x the N's summed, over
// ceil(tiles / sms) waves of sms tiles of 128 x width (partial tiles and the last wave's idle SMs both lose).
double prefill_wave_efficiency(const int64_t* N, int count, int64_t rows, int width, int sms);
// The rule above for one launch of `count` weights sharing x (1 to 4: q/k/v, in_proj's parts). Throws on a
// count below 1, an N or K below 1, or sms below 1.
int prefill_tile_n(const int64_t* N, int count, int64_t K, int sms);
inline int prefill_tile_n(int64_t N, int64_t K, int sms) { return prefill_tile_n(&N, 1, K, sms); }

}  // namespace specserve
