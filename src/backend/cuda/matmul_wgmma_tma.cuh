#pragma once
// The TMA-fed slice-serial warpgroup matmul (matmul_wgmma_tma_sm90a.cu; sm_90a only) for the row-invariant
// order at verify sizes (backend/matmul_choice.h: kWgmmaTmaMinRows .. kWgmmaTmaMaxRows): its tile shapes,
// the shape choice and the walk over work units. Plain C++ that also compiles on the host.
//
// Numerics: the contract heading matmul_tensor_core.cu, unchanged (x's bf16 copy, the K slices of
// k_split(N, K), one wgmma k16 step per chunk of a slice in increasing k into a fresh accumulator from +0,
// never a chunk past a slice's end, the slices' partials added to a running total in registers in slice
// order, ((p0 + p1) + p2) + ...: the slice-serial kernel's arithmetic, wg::serial_tile's walk).
//
// Work: a unit is one BM x BN output tile over ALL of its S slices (WgtSplit::Tiles: no partial leaves
// the CTA), or over ONE slice (WgtSplit::Slices: S units a tile, for S times the units where the tiles
// alone leave multiprocessors idle or fill few waves); persistent CTAs (one per multiprocessor) take
// units b, b + grid, ... with the M tiles fastest, so the CTAs running together read the same weight
// columns (each weight byte comes from DRAM once) and x (a few MB at most) stays in L2. One producer
// thread issues the TMA loads (128-byte swizzle) of x's copy and of w into a ring of kStages stages armed
// on mbarriers; two consumer warpgroups issue the wgmma.
//
// The slice units keep the fold's order: a weight's units are numbered slice-major (unit s T + t is
// slice s of tile t, T tiles), so slice s - 1's unit of a tile always has the lower number. Unit s
// computes its slice's partial p_s (a fresh chain from +0, in registers), then waits for the running total
// T_{s-1} of its tile (a f32 tile in scratch, published by unit s - 1 with a release store of the tile's
// flag after the data; the wait an acquire load), adds T_s = T_{s-1} + p_s (T_0 = p_0) and publishes T_s,
// or, as the last slice, writes y and puts the flag back to 0 for the next launch. The bits are the
// tile unit's: ((p0 + p1) + p2) + ... in slice order, each p_s the same chain.
// No deadlock: every CTA takes its units in increasing number, and unit u waits only for a unit of a lower
// number; by induction on u every unit below u completes (its CTA runs it after its own lower units, and
// its wait is on a lower one still), given that every CTA of the grid gets a multiprocessor (grid <=
// multiprocessors, one CTA each; a kernel ahead in the stream finishes, PDL's dependents are scheduled
// only after all our CTAs started). A wait of 2^26 polls (over half a minute) gives up with a NaN in the
// tile (a bug fails a test instead of hanging).
//
// Why these tiles: a CTA works through its units' 64-k tiles one after another, and on the H200 one such
// tile takes it ~0.71 us in 128 x 128 and ~0.56 us in 128 x 64 (64 x 128: 0.61-0.80), whatever the wave
// count (measured at 128 rows, bench_cuda_matmul_verify, 2 Dec: q+k+v 48 units 128 x 128 46.3 us over 64
// K tiles, 96 units 128 x 64 36.9 us; o_proj 32 units 45.7 us, 64 units 34.5 us; gate+up 192 units 128 x
// 128, two waves, 89.7 us; 64 rows: q+k+v 48 units 64 x 128 51.5 us) - several times the tensor work's 512 / 288
// clocks: the unit's chain and its slice drains, not the tensor cores, set a CTA's pace. So the launch's time is about
// the waves (ceil(units / multiprocessors)) times the per-tile time of the shape: a narrower tile wins where it doubles
// the units without adding a wave (q+k+v, o_proj at 128 rows), not where it adds one (gate+up).
// Since the K tiles are walked without a division (wg::SerialWalk, 4 Dec) every shape's tile is ~18 % faster
// (q+k+v at 128 rows 128 x 64: 0.46 us; at 256 rows 128 x 128: 0.62 us); the constants below are still the
// 2 Dec fit. Scaled alike they choose the same plan for every 8B launch of 33-256 rows (the 27B's o_proj at
// 80-128 rows would move from 128 x 128 to 128 x 64 slices): refit from BM_MatmulVerifyShapes before
// changing them.
//   64 x 128: (up to 64 rows) the two warpgroups split the columns: 64 x 64 each.
// The launcher picks per launch the shape and split of the lowest estimate (choose_wgt_plan;
// choose_wgt_shape is its choice among whole tiles): a function of M, K and the weights' N, which changes
// no bit (a row's bits do not depend on its tile or on which CTA adds which slice).
#include <cstdint>

#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_wgmma.cuh"

namespace specserve::cuda::wgt {

inline constexpr int kBlockSmem = 227 * 1024;  // an sm_90 block's shared memory, dynamic and static

// A CTA: warpgroup 0 the producer (one thread), warpgroups 1 and 2 the consumers. With BM = 128 consumer
// i computes rows 64 i .. 64 i + 63 of the tile, all BN columns; with BM = 64 it computes the 64 rows and
// columns i BN / 2 .. (i + 1) BN / 2 - 1.
template <int BM, int BN>
struct WgtTile {
  static_assert((BM == 128 && (BN == 64 || BN == 128)) || (BM == 64 && BN == 128), "the tile shapes");
  static constexpr int kBM = BM, kBN = BN, kConsumers = 2;
  static constexpr bool kSplitM = BM == 128;
  static constexpr int kWgN = kSplitM ? BN : BN / 2;  // columns of one consumer warpgroup (wgmma n)
  static constexpr int kAcc = kWgN / 2;               // f32 accumulators of a consumer thread (one set)
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kABytes = BM * wg::kKT * 2, kBBytes = BN * wg::kKT * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // As many stages as fit beside the swizzle's 1024-byte alignment and the barriers, at most 8.
  static constexpr int kStages =
      (kBlockSmem - 1024 - 256) / kStageBytes < 8 ? (kBlockSmem - 1024 - 256) / kStageBytes : 8;
  static constexpr int kSmemBytes = kStageBytes * kStages + 1024;
  // Registers after setmaxnreg: the consumers hold two accumulator sets (the slice's chain and the total).
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "operand tiles on the swizzle's 1024-byte period");
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "the register file");
  static_assert(kStages >= 4 && kSmemBytes + 2 * 8 * kStages <= kBlockSmem, "the stages fit a block");
};
using WgtM128N128 = WgtTile<128, 128>;
using WgtM128N64 = WgtTile<128, 64>;
using WgtM64N128 = WgtTile<64, 128>;
static_assert(WgtM128N128::kStages == 7 && WgtM128N64::kStages == 8 && WgtM64N128::kStages == 8, "stage counts");

enum class WgtShape { M128N128 = 0, M128N64 = 1, M64N128 = 2 };
inline constexpr int kWgtShapes = 3;

// The shape choice's cost model, per 64-k tile of a unit (every unit of a launch has the same K tiles), in
// ns: the waves times a CTA's measured time per K tile in the shape (above), or the bytes all units pull
// from L2 at kWgtL2BytesPerNs for the whole chip (~7 TB/s; it binds none of the 8B's or 27B's shapes at
// these times, but keeps a shape of many small units from being taken for free).
inline constexpr int64_t kWgtNsN128 = 710, kWgtNsN64 = 560, kWgtNsM64 = 600;
inline constexpr int64_t kWgtL2BytesPerNs = 7000;

// The output tiles (units) of a launch of `n` weights of widths N[0 .. n) with M rows in shape (bm, bn).
constexpr int64_t wgt_units(int64_t M, const int64_t* N, int n, int bm, int bn) {
  int64_t cols = 0;
  for (int i = 0; i < n; ++i) cols += tc::ceil_div(N[i], bn);
  return tc::ceil_div(M, bm) * cols;
}

// ns per K tile of a launch in shape (bm, bn): the slower of the waves' CTA time and the L2 reads.
constexpr int64_t wgt_cost(int64_t units, int sms, int64_t ns, int64_t stage_bytes) {
  const int64_t waves = tc::ceil_div(units, sms), l2 = units * stage_bytes / kWgtL2BytesPerNs;
  return waves * ns > l2 ? waves * ns : l2;
}

// The shape of a launch: 64 x 128 up to 64 rows; above, 128 x 64 where its cost is below 128 x 128's (on
// `sms` multiprocessors, one CTA each).
constexpr WgtShape choose_wgt_shape(int64_t M, const int64_t* N, int n, int sms) {
  if (M <= 64) return WgtShape::M64N128;
  const int64_t c128 = wgt_cost(wgt_units(M, N, n, 128, 128), sms, kWgtNsN128, WgtM128N128::kStageBytes);
  const int64_t c64 = wgt_cost(wgt_units(M, N, n, 128, 64), sms, kWgtNsN64, WgtM128N64::kStageBytes);
  return c64 < c128 ? WgtShape::M128N64 : WgtShape::M128N128;
}

// Units of a tile over all its slices (Tiles) or one slice each (Slices).
enum class WgtSplit { Tiles = 0, Slices = 1 };
inline constexpr int kWgtSplits = 2;
struct WgtPlan {
  WgtShape shape;
  WgtSplit split;
};

// A slice unit's hand-over: the predecessor's release store seen by the poll, T_{s-1} read, T_s written
// and released (a tile of f32 each way through L2). The units of one tile in one wave finish their slices
// together and then hand over one after another, so a wave costs its longest such chain of hand-overs;
// the chain is a property of the unit numbering (slice-major per weight, the weights one after another,
// CTA b taking units b, b + grid, ...): a wave is a run of `grid` consecutive units, and a run of `len`
// consecutive units of a weight of T tiles holds at most ceil(len / T) units of any one tile. Fitted
// (bench_cuda_matmul_verify, BM_MatmulVerifyShapes, the 8B's four launches at 64, 128 and 256 rows, 3 Dec):
// ~2 us a hand-over in 128 x 128 and 64 x 128, ~1.2 us in 128 x 64.
inline constexpr int64_t kWgtHandOverNsN128 = 2000, kWgtHandOverNsN64 = 1200, kWgtHandOverNsM64 = 2000;

constexpr int64_t wgt_shape_ns(WgtShape s) {
  return s == WgtShape::M128N128 ? kWgtNsN128 : s == WgtShape::M128N64 ? kWgtNsN64 : kWgtNsM64;
}
constexpr int64_t wgt_hand_over_ns(WgtShape s) {
  return s == WgtShape::M128N128 ? kWgtHandOverNsN128 : s == WgtShape::M128N64 ? kWgtHandOverNsN64 : kWgtHandOverNsM64;
}
constexpr int wgt_shape_bm(WgtShape s) { return s == WgtShape::M64N128 ? 64 : 128; }
constexpr int wgt_shape_bn(WgtShape s) { return s == WgtShape::M128N64 ? 64 : 128; }

// The hand-overs of a launch of slice units, summed over its waves: per wave, the most units of one tile
// the wave holds (above). tiles[i] and slices[i] of weight i (slices 1: no hand-over); grid CTAs.
constexpr int64_t wgt_hand_over_chains(const int64_t* tiles, const int* slices, int n, int64_t grid) {
  int64_t units = 0;
  for (int i = 0; i < n; ++i) units += tiles[i] * slices[i];
  int64_t total = 0;
  for (int64_t w0 = 0; w0 < units; w0 += grid) {
    int64_t chain = 0, off = 0;
    for (int i = 0; i < n; ++i) {
      const int64_t end = off + tiles[i] * slices[i];
      const int64_t lo = w0 > off ? w0 : off, hi = w0 + grid < end ? w0 + grid : end;
      if (slices[i] > 1 && hi > lo) {
        const int64_t c = tc::ceil_div(hi - lo, tiles[i]);
        chain = c > chain ? c : chain;
      }
      off = end;
    }
    total += chain;
  }
  return total;
}

// Estimated ns of a launch of `n` weights (widths N[0 .. n), depth K, M rows) in shape s and split p on
// `sms` multiprocessors: the slower of the CTAs' time (waves x K tiles of a unit x the shape's time per K
// tile, plus every wave's chain of hand-overs) and the L2 reads (the units' stages and the hand-overs) at
// kWgtL2BytesPerNs.
constexpr int64_t wgt_plan_cost(int64_t M, int64_t K, const int64_t* N, int n, int sms, WgtShape s, WgtSplit p) {
  const int bm = wgt_shape_bm(s), bn = wgt_shape_bn(s);
  const int64_t chunks = tc::ceil_div(K, tc::kMmaK), tile_bytes = int64_t{bm} * bn * 4;
  const int64_t stage_bytes = int64_t{bm + bn} * wg::kKT * 2;
  constexpr int kMaxWeights = 8;  // more than a launch takes (the kernel's kMaxParts)
  const int weights = n < kMaxWeights ? n : kMaxWeights;
  int64_t units = 0, ktiles = 0, folds = 0, tiles[kMaxWeights] = {};
  int slices[kMaxWeights] = {};
  const bool sliced = p == WgtSplit::Slices;
  for (int i = 0; i < weights; ++i) {
    const tc::KSplit split = tc::k_split(N[i], K, tc::split_target_ctas());
    tiles[i] = tc::ceil_div(M, bm) * tc::ceil_div(N[i], bn);
    slices[i] = sliced ? split.S : 1;
    units += tiles[i] * slices[i];
    folds += tiles[i] * (slices[i] - 1);
    const int64_t kt =
        sliced ? tc::ceil_div(split.cps, int64_t{wg::kKT / tc::kMmaK}) : wg::serial_tiles(chunks, split.cps);
    ktiles = kt > ktiles ? kt : ktiles;
  }
  const int64_t grid = units < sms ? units : sms;
  const int64_t chains = sliced ? wgt_hand_over_chains(tiles, slices, weights, grid) : 0;
  const int64_t cta = tc::ceil_div(units, sms) * ktiles * wgt_shape_ns(s) + chains * wgt_hand_over_ns(s);
  const int64_t l2 = (units * ktiles * stage_bytes + folds * 2 * tile_bytes) / kWgtL2BytesPerNs;
  return cta > l2 ? cta : l2;
}

// The plan of a launch: the (shape, split) of the lowest wgt_plan_cost among 64 x 128 (up to 64 rows) or
// 128 x 128 and 128 x 64 (above), each as tiles or slices; `shape` / `split` >= 0 force one (tests,
// benchmarks). Every plan gives the same bits.
constexpr WgtPlan choose_wgt_plan(int64_t M, int64_t K, const int64_t* N, int n, int sms, int shape = -1,
                                  int split = -1) {
  WgtPlan best{WgtShape::M64N128, WgtSplit::Tiles};
  int64_t best_cost = -1;
  for (int si = 0; si < kWgtShapes; ++si) {
    const WgtShape s = static_cast<WgtShape>(si);
    if (shape >= 0 ? si != shape : (M <= 64) != (s == WgtShape::M64N128)) continue;
    for (int pi = 0; pi < kWgtSplits; ++pi) {
      if (split >= 0 && pi != split) continue;
      const int64_t c = wgt_plan_cost(M, K, N, n, sms, s, static_cast<WgtSplit>(pi));
      if (best_cost < 0 || c < best_cost) best = {s, static_cast<WgtSplit>(pi)}, best_cost = c;
    }
  }
  return best;
}

// The walk over one weight's units (the kernel's unit_at; plain C++, tested on the host): `tiles` output
// tiles (`tiles_m` M tiles fastest), `slices` units a tile (S, or 1 for whole tiles), numbered
// slice-major: unit `local` is slice local / tiles of tile local % tiles, and covers the K tiles
// [kt0, kt1) of wg::serial_tile's numbering: all `ktiles` of them for a whole tile, else the slice's
// (`per` a slice, the last one possibly fewer).
struct WgtUnit {
  int tile, m_tile, n_tile, s, kt0, kt1;
};
constexpr WgtUnit wgt_unit(int local, int tiles, int tiles_m, int slices, int per, int ktiles) {
  const int s = local / tiles, t = local % tiles;
  WgtUnit u{t, t % tiles_m, t / tiles_m, s, 0, ktiles};
  if (slices > 1) {
    u.kt0 = s * per;
    u.kt1 = u.kt0 + per < ktiles ? u.kt0 + per : ktiles;
  }
  return u;
}

// The 8B on 132 SMs. At 128 rows: q+k+v and o_proj 128 x 64 (96 and 64 units: one wave either way),
// gate+up 128 x 128 (192 units, 2 waves, against 384 in 3) and down 128 x 64 (64 units). At 256 rows:
// o_proj and down 128 x 64 (128 units, one wave), q+k+v 128 x 128 (96 units; 192 would be two waves),
// gate+up 128 x 128.
namespace check {
constexpr int64_t kQkv[] = {4096, 1024, 1024}, kO[] = {4096}, kGateUp[] = {12288, 12288};
static_assert(choose_wgt_shape(128, kQkv, 3, 132) == WgtShape::M128N64);
static_assert(choose_wgt_shape(128, kO, 1, 132) == WgtShape::M128N64);
static_assert(choose_wgt_shape(128, kGateUp, 2, 132) == WgtShape::M128N128);
static_assert(choose_wgt_shape(256, kQkv, 3, 132) == WgtShape::M128N128);
static_assert(choose_wgt_shape(256, kO, 1, 132) == WgtShape::M128N64);
static_assert(choose_wgt_shape(256, kGateUp, 2, 132) == WgtShape::M128N128);
static_assert(choose_wgt_shape(64, kO, 1, 132) == WgtShape::M64N128);
// With slice units (K 4096: S 8 for q/k/v and o, 4 for gate/up; down K 12288, S 8): at 128 rows o and
// down 128 x 128 in slices (o 256 units, 2 waves of 8 K tiles and 5 + 4 hand-overs, ~31 us against 128 x
// 64 tiles' ~36; down ~52 against ~108), q+k+v as 128 x 64 tiles (its k and v tiles are 8 each: all 8
// slices of one in the last wave, 17 hand-overs in all, ~51 us against ~36) and gate+up as 128 x 128
// tiles (~91 against ~92: measured 86.8 / 94.2 us); at 256 rows q+k+v, o and gate+up as whole tiles, down in
// slices; at 64 rows o and down 64 x 128 in slices, q+k+v and gate+up 64 x 128 tiles.
constexpr int64_t kDown[] = {4096};
constexpr WgtPlan kSliced128{WgtShape::M128N128, WgtSplit::Slices};
constexpr bool same(WgtPlan a, WgtPlan b) { return a.shape == b.shape && a.split == b.split; }
static_assert(same(choose_wgt_plan(128, 4096, kQkv, 3, 132), {WgtShape::M128N64, WgtSplit::Tiles}));
static_assert(same(choose_wgt_plan(128, 4096, kO, 1, 132), kSliced128));
static_assert(same(choose_wgt_plan(128, 4096, kGateUp, 2, 132), {WgtShape::M128N128, WgtSplit::Tiles}));
static_assert(same(choose_wgt_plan(128, 12288, kDown, 1, 132), kSliced128));
static_assert(same(choose_wgt_plan(256, 4096, kQkv, 3, 132), {WgtShape::M128N128, WgtSplit::Tiles}));
static_assert(same(choose_wgt_plan(256, 4096, kO, 1, 132), {WgtShape::M128N64, WgtSplit::Tiles}));
static_assert(same(choose_wgt_plan(256, 4096, kGateUp, 2, 132), {WgtShape::M128N128, WgtSplit::Tiles}));
static_assert(same(choose_wgt_plan(256, 12288, kDown, 1, 132), kSliced128));
static_assert(same(choose_wgt_plan(64, 4096, kQkv, 3, 132), {WgtShape::M64N128, WgtSplit::Tiles}));
static_assert(same(choose_wgt_plan(64, 4096, kO, 1, 132), {WgtShape::M64N128, WgtSplit::Slices}));
// The hand-overs of q+k+v's slice units at 128 rows (32 + 8 + 8 tiles of 8 slices, 132 CTAs): waves of
// units 0-131 (q slices 0-4 of tiles 0-3: 5), 132-263 (q: 4) and 264-383 (v's 8 slices: 8).
constexpr int64_t kQkvTiles[] = {32, 8, 8};
constexpr int kQkvSlices[] = {8, 8, 8};
static_assert(wgt_hand_over_chains(kQkvTiles, kQkvSlices, 3, 132) == 17);
// Forcing one of the two keeps the rule's choice of the other.
static_assert(same(choose_wgt_plan(128, 4096, kQkv, 3, 132, -1, 0), {WgtShape::M128N64, WgtSplit::Tiles}));
static_assert(same(choose_wgt_plan(256, 4096, kO, 1, 132, -1, 1), kSliced128));
}  // namespace check

}  // namespace specserve::cuda::wgt
