#include "backend/matmul_prefill_tile.h"

#include <iterator>

#include "core/error.h"

namespace specserve {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

bool prefill_tile_width_valid(int width) {
  for (int w : kPrefillTileWidths)
    if (w == width) return true;
  return false;
}

double prefill_tile_rate(int width) {
  // Estimates, not yet measured per width: 256 is 520-590 TFLOP/s at 2,048-4,096 rows (docs/KERNELS.md §2).
  // The narrower tiles read 1.11x (192), 1.2x (160) and 1.33x (128) the operand bytes per multiply-add from
  // L2, and their smaller wgmma (n 192/160/128 against 256) spends more of the issue slots on the same
  // descriptors and barriers; they keep more stages in flight (5, 6, 7 against 4), which the loss of
  // intensity partly buys back. For N = 5,120 (wave efficiency 0.81 at 2,048 rows and 0.97 at 4,096 with
  // 256 columns; 0.97 at both with 160 or 128) a narrower width wins while its rate stays above 0.917.
  switch (width) {
    case 256: return 1.00;
    case 192: return 0.97;
    case 160: return 0.95;
    case 128: return 0.92;
    default: break;
  }
  fail("prefill matmul: {} is not a tile width (256, 192, 160 or 128)", width);
}

double prefill_wave_efficiency(const int64_t* N, int count, int64_t rows, int width, int sms) {
  SS_CHECK(prefill_tile_width_valid(width), "prefill matmul: {} is not a tile width (256, 192, 160 or 128)", width);
  SS_CHECK(count >= 1 && rows >= 1 && sms >= 1, "prefill matmul: {} weights, {} rows, {} multiprocessors", count, rows,
           sms);
  int64_t columns = 0, tile_columns = 0;
  for (int i = 0; i < count; ++i) {
    SS_CHECK(N[i] >= 1, "prefill matmul: a weight of {} columns", N[i]);
    columns += N[i];
    tile_columns += ceil_div(N[i], width);
  }
  const int64_t tiles = ceil_div(rows, kPrefillTileRows) * tile_columns;
  const int64_t waves = ceil_div(tiles, sms);
  return static_cast<double>(rows) * static_cast<double>(columns) /
         (static_cast<double>(waves) * sms * kPrefillTileRows * width);
}

int prefill_tile_n(const int64_t* N, int count, int64_t K, int sms) {
  SS_CHECK(K >= 1, "prefill matmul: K = {}", K);
  int best = kPrefillTileWidths[0];
  double best_score = -1.0;
  for (int width : kPrefillTileWidths) {  // widest first: a narrower width must score strictly more
    double eff = 0.0;
    for (int64_t rows : kPrefillReferenceRows) eff += prefill_wave_efficiency(N, count, rows, width, sms);
    const double score = prefill_tile_rate(width) * eff / static_cast<double>(std::size(kPrefillReferenceRows));
    if (score > best_score) {
      best = width;
      best_score = score;
    }
  }
  return best;
}

}  // namespace specserve
