// The matmul kernel choice (backend/matmul_choice.h) as a table: for the shapes the models run (Qwen3-8B
// and the 27B's projections at decode, verify and prefill row counts) and the edges of every rule, the
// kernel each call gets. The expected column was read off the take-or-decline chains the CUDA backend
// had before the choice became one function (cuda_ops.cpp's matmul / matmul_multi, matmul.cu,
// matmul_tensor_core.cu, matmul_tensor_core_mid.cu, matmul_wgmma_sm90a.cu, matmul_free_order.cpp at
// 5f6c57e), so a change of any default kernel shows here; the wgmma-tma rows (33-256 rows on the TMA-fed
// slice-serial kernel) came with that kernel. Runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/matmul_wgmma_tma.cuh"
#include "backend/matmul_choice.h"

using namespace specserve;
using Kn = MatmulKernel;

namespace {

MatmulWeight bf16(int64_t N) { return {N, true, 0, true, N}; }
MatmulWeight f32(int64_t N) { return {N, false, 0, true, N}; }
MatmulWeight fp8(int64_t N) { return {N, false, 0, true, N, true}; }
// A weight with its row stride: a view of a wider matrix (ldw) or a packed one (ldw = K).
MatmulWeight with_ldw(MatmulWeight w, int64_t ldw) {
  w.ldw = ldw;
  return w;
}
MatmulWeight unaligned(MatmulWeight w) {
  w.w_aligned16 = false;
  return w;
}

// Row strides as a packed matrix has them (ldw = K), unless set.
std::vector<MatmulWeight> packed(std::vector<MatmulWeight> ws, int64_t K) {
  for (auto& w : ws)
    if (w.ldw == 0) w.ldw = K;
  return ws;
}

MatmulPlan plan(int64_t M, int64_t K, std::vector<MatmulWeight> ws, MatmulOrder order = MatmulOrder::RowInvariant,
                MatmulDevice device = {}) {
  return plan_matmul(MatmulCall{MatmulBackend::Cuda, order, M, K, packed(std::move(ws), K), device});
}

Kn one(int64_t M, int64_t K_, MatmulWeight w, MatmulOrder order = MatmulOrder::RowInvariant, MatmulDevice device = {}) {
  if (w.ldw == 0) w.ldw = K_;
  return choose_matmul(MatmulBackend::Cuda, order, M, K_, w, device);
}

std::string describe(const MatmulPlan& p) {
  std::string s = p.one_x_copy ? "one x copy: " : "";
  for (const auto& l : p.launches) {
    s += std::string(matmul_kernel_name(l.kernel)) + "[";
    for (int i : l.parts) s += std::to_string(i);
    s += "] ";
  }
  return s;
}

// Qwen3-8B: hidden 4096, q 4096, k/v 1024, gate/up 12288, vocabulary 151936.
constexpr int64_t kH = 4096, kKv = 1024, kI = 12288, kVocab = 151936;
const MatmulDevice kH200{132, true};
const MatmulDevice kNoWgmma{132, false};

}  // namespace

// One weight (Ops::matmul) on an H200, row-invariant order.
TEST(MatmulChoice, OneWeightByRows) {
  struct Row {
    int64_t M, N, K;
    Kn want;
  };
  const Row table[] = {
      {1, kH, kH, Kn::Gemv},       // decode: o_proj
      {1, kVocab, kH, Kn::Gemv},   // decode: lm_head
      {16, kH, kH, Kn::Gemv},      // verify of 16 rows: below the 17-64-row kernel
      {17, kH, kH, Kn::Mid},       // S = 8, 128 CTAs
      {32, kH, kI, Kn::Mid},       // down_proj, S = 8
      {32, kI, kH, Kn::Mid},       // S = 4
      {32, kVocab, kH, Kn::Gemv},  // lm_head: S = 1, not the mid kernel's
      {33, kH, kH, Kn::Mid},       // 128 CTAs: one wave 97 % full
      {64, kH, kH, Kn::Mid},
      {64, 5120, 6144, Kn::WgmmaTma},    // 27B o_proj: mid's 160 CTAs fill 2 waves 61 %
      {64, 5120, 17408, Kn::WgmmaTma},   // 27B down_proj
      {33, kVocab, kH, Kn::WgmmaTma},    // S = 1
      {128, 17408, 5120, Kn::WgmmaTma},  // 27B up_proj
      {65, kH, kH, Kn::WgmmaTma},        // past the mid kernel's rows
      {128, kH, kI, Kn::WgmmaTma},       // down_proj at 16 sequences x 8 rows
      {256, kI, kH, Kn::WgmmaTma},       // the TMA kernel's last row count
      {257, kI, kH, Kn::Wgmma},          // past it: 288 tiles of 128 x 128 are < 2.5 waves
      {257, kH, kI, Kn::Wgmma},
      {512, kI, kH, Kn::WgmmaSerial},  // S = 4, 384 tiles
      {2048, kH, kH, Kn::WgmmaSerial},
      {2048, kVocab, kH, Kn::Wgmma},  // S = 1: the cluster kernel
  };
  for (const auto& r : table)
    EXPECT_EQ(one(r.M, r.K, bf16(r.N)), r.want)
        << "M " << r.M << " N " << r.N << " K " << r.K << ": got " << matmul_kernel_name(one(r.M, r.K, bf16(r.N)));
}

TEST(MatmulChoice, EdgesAndDtypes) {
  EXPECT_EQ(one(0, kH, bf16(kH)), Kn::Empty);
  EXPECT_EQ(one(4, kH, bf16(0)), Kn::Empty);
  EXPECT_EQ(one(4, 0, bf16(kH)), Kn::ZeroFill);
  EXPECT_EQ(one(64, 0, bf16(kH)), Kn::ZeroFill);
  EXPECT_EQ(one(4, 0, f32(kH)), Kn::ZeroFill);
  for (int64_t M : {1, 16, 17, 64, 2048}) EXPECT_EQ(one(M, kH, f32(kH)), Kn::CudaCoreF32) << M;
  // The mid kernel needs 16-byte weight loads and K % 8 == 0; else the gemv kernel (<= 32 rows) or wgmma.
  EXPECT_EQ(one(24, kH, unaligned(bf16(kH))), Kn::Gemv);
  EXPECT_EQ(one(24, kH, with_ldw(bf16(kH), kH + 4)), Kn::Gemv);
  EXPECT_EQ(one(48, kH, unaligned(bf16(kH))), Kn::Wgmma);
  // The TMA kernel needs the same aligned weights (TMA's 16-byte strides) and K % 8 == 0.
  EXPECT_EQ(one(48, kH, bf16(kKv)), Kn::WgmmaTma);  // (q at 48 rows is the mid kernel's: one wave 97 % full)
  EXPECT_EQ(one(48, kH, with_ldw(bf16(kKv), kH + 4)), Kn::Wgmma);
  EXPECT_EQ(one(128, 4100, bf16(kH)), Kn::Wgmma);
  EXPECT_EQ(one(128, 4104, bf16(kH)), Kn::WgmmaTma);
  EXPECT_EQ(one(128, kH, bf16(kH), MatmulOrder::RowInvariant, kNoWgmma), Kn::Tiled);
  EXPECT_EQ(matmul_kernel_name(Kn::WgmmaTma), "wgmma-tma");
  EXPECT_EQ(one(24, 4100, bf16(kH)), Kn::Gemv);
  // Slice-serial wgmma needs the same aligned weights.
  EXPECT_EQ(one(2048, kH, unaligned(bf16(kH))), Kn::Wgmma);
  // The CPU backend has one family (its ISA is core/cpu_features.h's choice).
  EXPECT_EQ(choose_matmul(MatmulBackend::Cpu, MatmulOrder::Free, 64, kH, with_ldw(bf16(kH), kH)), Kn::Cpu);
}

// Without wgmma (a device other than compute capability 9.0) the tiled mma.sync kernel serves > 32 rows.
TEST(MatmulChoice, TiledWhereWgmmaCannotRun) {
  EXPECT_EQ(one(64, kH, bf16(kH), MatmulOrder::RowInvariant, kNoWgmma), Kn::Mid);
  EXPECT_EQ(one(64, 5120, bf16(5120), MatmulOrder::RowInvariant, kNoWgmma), Kn::Tiled);
  EXPECT_EQ(one(2048, kH, bf16(kH), MatmulOrder::RowInvariant, kNoWgmma), Kn::Tiled);
  EXPECT_EQ(one(32, kH, bf16(kVocab), MatmulOrder::RowInvariant, kNoWgmma), Kn::Gemv);
  // Fewer multiprocessors fill the mid kernel's waves sooner: 160 CTAs on 80 SMs are 2 full waves.
  EXPECT_EQ(one(64, 6144, bf16(5120), MatmulOrder::RowInvariant, MatmulDevice{80, true}), Kn::Mid);
}

// MatmulOrder::Free (the drafter): cuBLASLt from 33 rows for bf16 weights it can address; otherwise the
// row-invariant choice.
TEST(MatmulChoice, FreeOrder) {
  const auto free = MatmulOrder::Free;
  EXPECT_EQ(one(33, kH, bf16(kH), free), Kn::FreeOrder);
  EXPECT_EQ(one(2048, kH, bf16(kVocab), free), Kn::FreeOrder);
  EXPECT_EQ(one(32, kH, bf16(kH), free), Kn::Mid);
  EXPECT_EQ(one(16, kH, bf16(kH), free), Kn::Gemv);
  EXPECT_EQ(one(64, kH, f32(kH), free), Kn::CudaCoreF32);
  EXPECT_EQ(one(64, kH, unaligned(bf16(kH)), free), Kn::Wgmma);
  EXPECT_EQ(one(64, 4100, bf16(kH), free), Kn::Wgmma);
  MatmulWeight short_y = bf16(kH);
  short_y.ldy = kH - 1;
  EXPECT_EQ(one(64, kH, short_y, free), Kn::Mid);
  // Nine weights are more than one cuBLASLt sequence takes: each row-invariant.
  const auto nine = plan(64, kH, std::vector<MatmulWeight>(9, bf16(kKv)), free);
  EXPECT_FALSE(nine.launches.empty());
  for (const auto& l : nine.launches) EXPECT_NE(l.kernel, Kn::FreeOrder);
  // One part it cannot address keeps every part off cuBLASLt (the parts share x's copy).
  const auto mixed = plan(64, kH, {bf16(kH), unaligned(bf16(kKv))}, free);
  EXPECT_EQ(describe(mixed), "one x copy: wgmma[0] wgmma[1] ") << describe(mixed);
  EXPECT_EQ(describe(plan(40, kH, {bf16(kH), bf16(kKv), bf16(kKv)}, free)), "free-order-cublaslt[012] ");
}

// Several weights sharing x (Ops::matmul_multi): q/k/v and gate/up.
TEST(MatmulChoice, SharedX) {
  const std::vector<MatmulWeight> qkv = {bf16(kH), bf16(kKv), bf16(kKv)}, gate_up = {bf16(kI), bf16(kI)};
  struct Row {
    int64_t M;
    std::vector<MatmulWeight> ws;
    std::string want;
  };
  const std::vector<Row> table = {
      {1, qkv, "gemv[012] "},  // decode: one streaming launch (same K split)
      {1, gate_up, "gemv[01] "},
      {16, qkv, "gemv[012] "},
      {17, qkv, "mid[012] "},
      {32, gate_up, "mid[01] "},
      {64, qkv, "mid[012] "},         // 192 CTAs: 2 waves 73 % full
      {64, gate_up, "mid[01] "},      // 768 CTAs: 6 waves 97 % full
      {128, qkv, "wgmma-tma[012] "},  // 33-256 rows: every weight in one TMA launcher, one copy of x
      {128, gate_up, "wgmma-tma[01] "},
      {256, qkv, "wgmma-tma[012] "},
      {257, qkv, "one x copy: wgmma[0] wgmma[1] wgmma[2] "},
      {2048, gate_up, "one x copy: wgmma-serial[0] wgmma-serial[1] "},
      {2048, qkv, "one x copy: wgmma-serial[0] wgmma[1] wgmma[2] "},
      // Weights of different K splits: those that share one share a launch, the rest run alone.
      {1, {bf16(kH), bf16(kVocab), bf16(kKv)}, "gemv[02] gemv[1] "},
      {24, {bf16(kH), bf16(kVocab), bf16(kKv)}, "mid[02] gemv[1] "},
      // More than four weights: four share a launch.
      {1, std::vector<MatmulWeight>(5, bf16(kKv)), "gemv[0123] gemv[4] "},
      // Above 32 rows every weight takes the TMA kernel with one copy of x, even one the mid kernel would
      // take alone; one weight it cannot address sends all to the cluster kernel (one copy of x).
      {40, {bf16(kH), bf16(kVocab)}, "wgmma-tma[01] "},
      {40, {bf16(kH), unaligned(bf16(kKv))}, "one x copy: wgmma[0] wgmma[1] "},
      {64, std::vector<MatmulWeight>(5, bf16(kKv)), "wgmma-tma[01234] "},
      // f32 weights run alone on CUDA cores.
      {1, {f32(kH), f32(kKv)}, "cuda-core-f32[0] cuda-core-f32[1] "},
      // (k/v's 32 CTAs at 64 rows fill a quarter wave: not the mid kernel's.)
      {64, {f32(kH), bf16(kKv)}, "cuda-core-f32[0] wgmma-tma[1] "},
  };
  for (const auto& r : table) {
    const auto p = plan(r.M, kH, r.ws);
    EXPECT_EQ(describe(p), r.want) << "M " << r.M;
  }
  // Without wgmma, above 32 rows each weight is chosen alone.
  EXPECT_EQ(describe(plan(40, kH, {bf16(kH), bf16(kVocab)}, MatmulOrder::RowInvariant, kNoWgmma)), "mid[0] tiled[1] ");
  EXPECT_EQ(describe(plan(2048, kH, gate_up, MatmulOrder::RowInvariant, kNoWgmma)), "tiled[0] tiled[1] ");
}

// choose_matmul (the one-weight rule, which the CUDA backend uses for Ops::matmul without building a plan)
// gives the kernel of plan_matmul's only launch, everywhere.
TEST(MatmulChoice, OneWeightRuleIsThePlansRule) {
  for (int64_t M : {0, 1, 4, 5, 16, 17, 24, 32, 33, 40, 64, 65, 128, 512, 2048})
    for (int64_t K : {0, 64, 1001, 4096, 4100, 12288})
      for (int64_t N : {int64_t{0}, int64_t{1}, int64_t{70}, kKv, kH, int64_t{5120}, kI, kVocab})
        for (bool wg : {false, true})
          for (auto order : {MatmulOrder::RowInvariant, MatmulOrder::Free, MatmulOrder::Prefill})
            for (int variant = 0; variant < 5; ++variant) {
              MatmulWeight w = variant == 3 ? f32(N) : variant == 4 ? fp8(N) : bf16(N);
              w.ldw = variant == 1 ? K + 4 : K;
              if (variant == 2) w = unaligned(w);
              const MatmulDevice d{variant == 0 ? 132 : 80, wg};
              const MatmulPlan p =
                  plan_matmul(MatmulCall{MatmulBackend::Cuda, order, M, K, std::vector<MatmulWeight>{w}, d});
              ASSERT_EQ(p.launches.size(), 1u);
              ASSERT_EQ(choose_matmul(MatmulBackend::Cuda, order, M, K, w, d), p.launches[0].kernel)
                  << "M " << M << " K " << K << " N " << N << " wgmma " << wg << " variant " << variant;
            }
}

// MatmulOrder::Prefill (Ops::matmul_prefill): the TMA/wgmma GEMM for every row count from 1 — its
// condition reads the weights and K, never M, so a prefill row's kernel does not depend on its chunk —
// and otherwise the row-invariant choice (f32 weights, addresses TMA cannot take, no wgmma).
TEST(MatmulChoice, Prefill) {
  constexpr auto P = MatmulOrder::Prefill;
  for (int64_t M : {1, 5, 17, 33, 64, 256, 4096}) {
    EXPECT_EQ(one(M, kH, bf16(kI), P), Kn::Prefill) << M;
    EXPECT_EQ(one(M, kI, bf16(kH), P), Kn::Prefill) << M;
    EXPECT_EQ(describe(plan(M, kH, {bf16(kH), bf16(kKv), bf16(kKv)}, P)), "prefill[012] ") << M;
  }
  EXPECT_EQ(one(0, kH, bf16(kI), P), Kn::Empty);
  EXPECT_EQ(one(512, 0, bf16(kI), P), Kn::ZeroFill);
  EXPECT_EQ(one(512, kH, f32(kI), P), Kn::CudaCoreF32);
  EXPECT_EQ(one(512, kH, unaligned(bf16(kI)), P), one(512, kH, unaligned(bf16(kI))));
  EXPECT_EQ(one(512, kH, with_ldw(bf16(kI), kH + 4), P), one(512, kH, with_ldw(bf16(kI), kH + 4)));
  EXPECT_EQ(one(512, 4100, bf16(kI), P), one(512, 4100, bf16(kI)));  // K off the 8-element grid
  EXPECT_EQ(one(512, kH, bf16(kI), P, MatmulDevice{132, false}), Kn::Tiled);
  // One weight the GEMM cannot take: the whole call runs the row-invariant plan.
  EXPECT_EQ(describe(plan(512, kH, {bf16(kI), f32(kI)}, P)), describe(plan(512, kH, {bf16(kI), f32(kI)})));
  EXPECT_EQ(matmul_kernel_name(Kn::Prefill), "prefill");
}

// Every weight of a call is in exactly one launch, whatever the shape.
TEST(MatmulChoice, EveryWeightOnce) {
  for (int64_t M : {0, 1, 5, 16, 17, 32, 33, 64, 65, 128, 2048})
    for (int64_t K : {0, 64, 4096, 4100})
      for (bool wg : {false, true})
        for (auto order : {MatmulOrder::RowInvariant, MatmulOrder::Free, MatmulOrder::Prefill}) {
          const auto p = plan(M, K, {bf16(kH), f32(kKv), bf16(kKv), unaligned(bf16(kI)), bf16(kVocab)}, order,
                              MatmulDevice{132, wg});
          std::vector<int> seen(5, 0);
          for (const auto& l : p.launches)
            for (int i : l.parts) ++seen[size_t(i)];
          for (int i = 0; i < 5; ++i) EXPECT_EQ(seen[size_t(i)], 1) << "M " << M << " K " << K << " part " << i;
        }
}

// Block-scaled fp8 weights (backend/ops.h: the bits of the bf16 dequantisation): the fp8 gemv kernel for
// 1-32 rows in the row-invariant and free orders, else the weight dequantised to bf16 and the bf16 plan;
// under MatmulOrder::Prefill the W8A8 GEMM for every M where wgmma runs and the weight's rows suit TMA (16-byte
// aligned, ldw % 16 == 0), else the dequantisation (then the prefill GEMM): either way a prefill row's kernel
// does not depend on its chunk's rows. In a call with an fp8 weight, the fp8 gemv weights share one launch whatever
// their K splits (q/k/v, gate/up, in_proj_qkv / z: at most kMatmulGroupMax), the W8A8 GEMM's weights all share one
// launcher call (one quantised copy of x); the weights without fp8 are planned together by the bf16 rules.
TEST(MatmulChoice, Fp8Weights) {
  const MatmulDevice no_w8a8{132, true, false};
  for (int64_t M : {1, 4, 5, 16, 17, 32}) {
    EXPECT_EQ(one(M, kH, fp8(kI)), Kn::Fp8Gemv) << M;
    EXPECT_EQ(one(M, kI, fp8(kH)), Kn::Fp8Gemv) << M;
    EXPECT_EQ(one(M, 1001, fp8(70)), Kn::Fp8Gemv) << M;
    EXPECT_EQ(one(M, kH, fp8(kI), MatmulOrder::Free), Kn::Fp8Gemv) << M;
    EXPECT_EQ(one(M, kH, fp8(kI), MatmulOrder::Prefill), Kn::Fp8Prefill) << M;
    EXPECT_EQ(one(M, kH, fp8(kI), MatmulOrder::Prefill, no_w8a8), Kn::Fp8Dequant) << M;
    EXPECT_EQ(one(M, kH, fp8(kI), MatmulOrder::Prefill, kNoWgmma), Kn::Fp8Dequant) << M;
  }
  for (int64_t M : {33, 64, 512, 4096}) {
    for (auto order : {MatmulOrder::RowInvariant, MatmulOrder::Free})
      EXPECT_EQ(one(M, kH, fp8(kI), order), Kn::Fp8Dequant) << M;
    EXPECT_EQ(one(M, kH, fp8(kI), MatmulOrder::Prefill), Kn::Fp8Prefill) << M;
    EXPECT_EQ(one(M, 4096 + 64, fp8(1000), MatmulOrder::Prefill), Kn::Fp8Prefill) << M;  // K, N off the 128 grid
    EXPECT_EQ(one(M, 1000, fp8(kI), MatmulOrder::Prefill), Kn::Fp8Dequant) << M;         // ldw = 1000: not a TMA stride
    EXPECT_EQ(one(M, kH, with_ldw(fp8(kI), 4104), MatmulOrder::Prefill), Kn::Fp8Dequant) << M;
    EXPECT_EQ(one(M, kH, unaligned(fp8(kI)), MatmulOrder::Prefill), Kn::Fp8Dequant) << M;
    EXPECT_EQ(one(M, kH, fp8(kI), MatmulOrder::Prefill, no_w8a8), Kn::Fp8Dequant) << M;
    EXPECT_EQ(one(M, kH, fp8(kI), MatmulOrder::Prefill, kNoWgmma), Kn::Fp8Dequant) << M;
  }
  EXPECT_EQ(one(0, kH, fp8(kI)), Kn::Empty);
  EXPECT_EQ(one(1, kH, fp8(0)), Kn::Empty);
  EXPECT_EQ(one(1, 0, fp8(kI)), Kn::ZeroFill);
  EXPECT_EQ(one(1, kH, fp8(kI), MatmulOrder::RowInvariant, kNoWgmma), Kn::Fp8Gemv);
  EXPECT_EQ(describe(plan(1, kH, {fp8(kH), fp8(kKv), fp8(kKv)})), "fp8-gemv[012] ");
  EXPECT_EQ(describe(plan(16, kH, {fp8(kI), fp8(kI)})), "fp8-gemv[01] ");
  EXPECT_EQ(describe(plan(32, kI, {fp8(kH)})), "fp8-gemv[0] ");
  EXPECT_EQ(describe(plan(16, kH, {fp8(kI), bf16(kI)})), "fp8-gemv[0] gemv[1] ");
  EXPECT_EQ(describe(plan(16, kH, {fp8(kH), bf16(kKv), fp8(kKv)})), "fp8-gemv[02] gemv[1] ");
  // The weights without fp8 of such a call go together by the bf16 rules (Qwen3.5's bf16 in_proj_b / in_proj_a
  // beside its fp8 in_proj_qkv / in_proj_z: one launch where each alone was a launch of 3 CTAs).
  const int64_t k27 = 5120;
  const std::vector<MatmulWeight> deltanet_in{fp8(10240), fp8(6144), bf16(48), bf16(48)};
  EXPECT_EQ(describe(plan(1, k27, deltanet_in)), "fp8-gemv[01] gemv[23] ");
  EXPECT_EQ(describe(plan(16, k27, deltanet_in)), "fp8-gemv[01] gemv[23] ");
  EXPECT_EQ(describe(plan(24, k27, deltanet_in)), "fp8-gemv[01] mid[23] ");
  EXPECT_EQ(describe(plan(128, k27, deltanet_in)), "fp8-dequant[0] fp8-dequant[1] wgmma-tma[23] ");
  EXPECT_EQ(describe(plan(2048, k27, deltanet_in, MatmulOrder::Prefill)), "fp8-prefill[01] prefill[23] ");
  // Other K splits share the launch (q: S = 8 at K = 4096; 24576 rows: S = 2; in_proj_qkv S = 4 beside
  // in_proj_z S = 8: the kernel takes each weight's own); more than four weights take more launches.
  EXPECT_NE(cuda::tc::k_split(kH, kH, cuda::tc::split_target_ctas()).S,
            cuda::tc::k_split(2 * kI, kH, cuda::tc::split_target_ctas()).S);
  EXPECT_NE(cuda::tc::k_split(10240, k27, cuda::tc::split_target_ctas()).S,
            cuda::tc::k_split(6144, k27, cuda::tc::split_target_ctas()).S);
  EXPECT_EQ(describe(plan(1, kH, {fp8(kH), fp8(2 * kI)})), "fp8-gemv[01] ");
  EXPECT_EQ(describe(plan(1, kH, std::vector<MatmulWeight>(5, fp8(kKv)))), "fp8-gemv[0123] fp8-gemv[4] ");
  EXPECT_EQ(describe(plan(33, kH, {fp8(kH), fp8(kKv)})), "fp8-dequant[0] fp8-dequant[1] ");
  EXPECT_EQ(describe(plan(1, kH, {fp8(kH), fp8(kKv)}, MatmulOrder::Prefill)), "fp8-prefill[01] ");
  EXPECT_EQ(describe(plan(512, kH, {fp8(kI), fp8(kI)}, MatmulOrder::Prefill)), "fp8-prefill[01] ");
  EXPECT_EQ(describe(plan(512, kH, {fp8(kI), bf16(kI)}, MatmulOrder::Prefill)), "fp8-prefill[0] prefill[1] ");
  EXPECT_EQ(describe(plan(512, kH, {fp8(kH), bf16(kKv), fp8(kKv)}, MatmulOrder::Prefill)),
            "fp8-prefill[02] prefill[1] ");
  EXPECT_EQ(describe(plan(512, kH, std::vector<MatmulWeight>(5, fp8(kKv)), MatmulOrder::Prefill)),
            "fp8-prefill[01234] ");
  EXPECT_EQ(describe(plan(512, kH, {unaligned(fp8(kH)), fp8(kKv), fp8(kKv)}, MatmulOrder::Prefill)),
            "fp8-dequant[0] fp8-prefill[12] ");
  EXPECT_EQ(describe(plan(1, kH, {fp8(kH), fp8(kKv)}, MatmulOrder::Prefill, no_w8a8)),
            "fp8-dequant[0] fp8-dequant[1] ");
  EXPECT_EQ(describe(plan(512, kH, {fp8(kI), bf16(kI)}, MatmulOrder::Prefill, kNoWgmma)), "fp8-dequant[0] tiled[1] ");
  EXPECT_EQ(one(1, kH, fp8(kI), MatmulOrder::RowInvariant),
            choose_matmul(MatmulBackend::Cuda, MatmulOrder::RowInvariant, 1, kH, fp8(kI)));
  EXPECT_EQ(plan_matmul(MatmulCall{MatmulBackend::Cpu, MatmulOrder::RowInvariant, 1, kH, {fp8(kI)}, kH200})
                .launches[0]
                .kernel,
            Kn::Cpu);
  EXPECT_EQ(matmul_kernel_name(Kn::Fp8Gemv), "fp8-gemv");
  EXPECT_EQ(matmul_kernel_name(Kn::Fp8Dequant), "fp8-dequant");
  EXPECT_EQ(matmul_kernel_name(Kn::Fp8Prefill), "fp8-prefill");
}

// The TMA kernel's tile shape per launch (cuda/matmul_wgmma_tma.cuh: choose_wgt_shape; its bits do not
// depend on it): 64 x 128 up to 64 rows; above, the narrower 128 x 64 where it doubles the units without
// adding a wave (measured at 128 rows: q+k+v 36.9 us against 128 x 128's 46.3, o_proj 34.5 against 45.7).
TEST(MatmulChoice, WgmmaTmaTileShape) {
  using cuda::wgt::WgtShape;
  const std::vector<int64_t> qkv = {kH, kKv, kKv}, o = {kH}, gate_up = {kI, kI}, down = {kH}, k27 = {5120},
                             up27 = {17408}, kv = {kKv};
  struct Row {
    int64_t M;
    const std::vector<int64_t>* N;
    int sms;
    WgtShape want;
  };
  const Row table[] = {
      {33, &qkv, 132, WgtShape::M64N128},       {64, &gate_up, 132, WgtShape::M64N128},
      {65, &qkv, 132, WgtShape::M128N64},       {128, &qkv, 132, WgtShape::M128N64},  // 96 units, not 48
      {128, &o, 132, WgtShape::M128N64},        {128, &down, 132, WgtShape::M128N64},
      {128, &gate_up, 132, WgtShape::M128N128},                                     // 192 units (2 waves), not 384 (3)
      {200, &qkv, 132, WgtShape::M128N128},                                         // 96 units, not 192
      {256, &qkv, 132, WgtShape::M128N128},     {256, &o, 132, WgtShape::M128N64},  // 128 units: one wave
      {256, &gate_up, 132, WgtShape::M128N128}, {128, &k27, 132, WgtShape::M128N64},
      {256, &k27, 132, WgtShape::M128N128},  // 80 units, not 160
      {128, &up27, 132, WgtShape::M128N128},    {128, &kv, 132, WgtShape::M128N64},
      {256, &kv, 132, WgtShape::M128N64},       {128, &qkv, 80, WgtShape::M128N128},  // 96 units: 2 waves on 80
      {128, &o, 80, WgtShape::M128N64},
  };
  for (const Row& r : table)
    EXPECT_EQ(cuda::wgt::choose_wgt_shape(r.M, r.N->data(), static_cast<int>(r.N->size()), r.sms), r.want)
        << "M " << r.M << ", " << r.N->size() << " weights, N[0] " << (*r.N)[0] << ", " << r.sms << " SMs";
}

// The TMA kernel's plan per launch (choose_wgt_plan: shape and units, whole tiles or one slice each; the
// bits do not depend on it), from its cost model: slice units where whole tiles leave multiprocessors idle
// or the slices cut a CTA's K tiles, whole tiles where slice units would only add waves.
TEST(MatmulChoice, WgmmaTmaPlan) {
  using cuda::wgt::WgtShape;
  using cuda::wgt::WgtSplit;
  const std::vector<int64_t> qkv = {kH, kKv, kKv}, o = {kH}, gate_up = {kI, kI}, k27 = {5120}, up27 = {17408};
  struct Row {
    int64_t M, K;
    const std::vector<int64_t>* N;
    WgtShape shape;
    WgtSplit split;
  };
  const Row table[] = {
      {64, kH, &qkv, WgtShape::M64N128, WgtSplit::Tiles},        // 48 tiles; slices: 17 hand-overs
      {64, kH, &o, WgtShape::M64N128, WgtSplit::Slices},         // 256 units: 2 waves, 9 hand-overs
      {128, kH, &qkv, WgtShape::M128N64, WgtSplit::Tiles},       // 96 tiles: one wave
      {128, kH, &o, WgtShape::M128N128, WgtSplit::Slices},       // 256 units
      {128, kI, &o, WgtShape::M128N128, WgtSplit::Slices},       // down: 256 units of 24 K tiles
      {128, kH, &gate_up, WgtShape::M128N128, WgtSplit::Tiles},  // 2 waves of 64 against 6 of 16 + 12
      {256, kH, &gate_up, WgtShape::M128N128, WgtSplit::Tiles},  // 3 waves of 64 against 12 of 16
      {256, kH, &qkv, WgtShape::M128N128, WgtSplit::Tiles},      // 96 tiles: one wave
      {256, kH, &o, WgtShape::M128N64, WgtSplit::Tiles},         // 128 tiles: one wave
      {256, kI, &o, WgtShape::M128N128, WgtSplit::Slices},       // down: 192 K tiles a tile
      {128, 6144, &k27, WgtShape::M128N128, WgtSplit::Slices},   // the 27B's o
      {256, 5120, &up27, WgtShape::M128N128, WgtSplit::Slices},  // S = 2: 544 units
  };
  for (const Row& r : table) {
    const auto p = cuda::wgt::choose_wgt_plan(r.M, r.K, r.N->data(), static_cast<int>(r.N->size()), 132);
    EXPECT_EQ(p.shape, r.shape) << "M " << r.M << ", K " << r.K << ", N[0] " << (*r.N)[0];
    EXPECT_EQ(p.split, r.split) << "M " << r.M << ", K " << r.K << ", N[0] " << (*r.N)[0];
  }
  // Forced: the shape, the split, or both.
  const auto forced = cuda::wgt::choose_wgt_plan(128, kH, qkv.data(), 3, 132, 1, 0);
  EXPECT_EQ(forced.shape, WgtShape::M128N64);
  EXPECT_EQ(forced.split, WgtSplit::Tiles);
  EXPECT_EQ(cuda::wgt::choose_wgt_plan(128, kH, qkv.data(), 3, 132, 2).shape, WgtShape::M64N128);
  EXPECT_EQ(cuda::wgt::choose_wgt_plan(256, kH, gate_up.data(), 2, 132, -1, 1).split, WgtSplit::Slices);
  EXPECT_EQ(cuda::wgt::choose_wgt_plan(256, kH, o.data(), 1, 132, -1, 1).shape, WgtShape::M128N128);
  // The hand-overs a launch of slice units waits through, wave by wave (the longest run of one tile's
  // units in each wave of `grid` consecutive units): q+k+v at 128 rows in 128 x 128 (tiles 32, 8, 8; S 8):
  // 5 (q's tiles 0-3 have slices 0-4 in units 0-131), 4, then v's 8 slices together.
  const int64_t qkv_tiles[] = {32, 8, 8}, o_tiles[] = {32};
  const int eight[] = {8, 8, 8}, one[] = {1};
  EXPECT_EQ(cuda::wgt::wgt_hand_over_chains(qkv_tiles, eight, 3, 132), 5 + 4 + 8);
  EXPECT_EQ(cuda::wgt::wgt_hand_over_chains(o_tiles, eight, 1, 132), 5 + 4);
  EXPECT_EQ(cuda::wgt::wgt_hand_over_chains(o_tiles, eight, 1, 1024), 8);  // one wave: all 8 slices
  EXPECT_EQ(cuda::wgt::wgt_hand_over_chains(o_tiles, one, 1, 32), 0);      // whole tiles: none
  // Slice units add one hand-over a slice: never chosen for S = 1 (K below 32 chunks x 2).
  const std::vector<int64_t> narrow = {384};
  EXPECT_EQ(cuda::wgt::choose_wgt_plan(128, 496, narrow.data(), 1, 132).split, WgtSplit::Tiles);
}

// The TMA kernel's walk over units (wgt_unit), laid out as its launcher does for the 8B's and 27B's
// projections and odd shapes, whole tiles and slice units: every (tile, slice) exactly once; a slice's
// unit numbered after its predecessor's (what the hand-over's deadlock freedom rests on), and a
// persistent grid taking units in order finishing every one when a unit waits for its predecessor; the
// K tiles of a tile's units, in slice order, exactly wg::serial_tile's walk with each slice unit
// holding one whole slice.
// The slice-serial kernels step through a unit's K tiles with SerialWalk (no division a tile): from any
// starting tile it gives serial_tile's tile at every later one, whole and ragged slices, K tails.
TEST(MatmulChoice, SerialWalkIsSerialTile) {
  namespace wg = cuda::wg;
  for (int64_t chunks : {1, 3, 4, 5, 64, 256, 257, 768, 1088})
    for (int64_t cps : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{7}, int64_t{32}, chunks / 8 + 1, chunks}) {
      if (cps < 1) continue;
      const int64_t ktiles = wg::serial_tiles(chunks, cps);
      for (int64_t g0 : {int64_t{0}, int64_t{1}, ktiles / 3, ktiles - 1}) {
        if (g0 < 0 || g0 >= ktiles) continue;
        wg::SerialWalk walk(g0, chunks, cps);
        for (int64_t g = g0; g < ktiles; ++g, walk.next()) {
          const wg::SerialTile want = wg::serial_tile(g, chunks, cps), got = walk.tile();
          ASSERT_EQ(got.slice, want.slice) << chunks << " " << cps << " " << g0 << " " << g;
          ASSERT_EQ(got.chunk0, want.chunk0) << chunks << " " << cps << " " << g0 << " " << g;
          ASSERT_EQ(got.chunk_end, want.chunk_end) << chunks << " " << cps << " " << g0 << " " << g;
          ASSERT_EQ(got.last_of_slice, want.last_of_slice) << chunks << " " << cps << " " << g0 << " " << g;
        }
      }
    }
}

TEST(MatmulChoice, WgmmaTmaUnitWalk) {
  namespace tc = cuda::tc;
  namespace wg = cuda::wg;
  using cuda::wgt::WgtShape;
  using cuda::wgt::WgtSplit;
  struct Call {
    int64_t K;
    std::vector<int64_t> N;
  };
  const std::vector<Call> calls = {
      {kH, {kH, kKv, kKv}}, {kH, {kI, kI}}, {kI, {kH}},    {6144, {5120}}, {5120, {17408}},         {4104, {1000}},
      {2056, {384}},        {1000, {70}},   {496, {3000}}, {8, {130}},     {kH, {kKv, 520, kI, kH}}};
  for (const Call& c : calls)
    for (int64_t M : {33, 64, 65, 128, 200, 256})
      for (int si = 0; si < cuda::wgt::kWgtShapes; ++si)
        for (int pi = 0; pi < cuda::wgt::kWgtSplits; ++pi) {
          const int bm = cuda::wgt::wgt_shape_bm(WgtShape(si)), bn = cuda::wgt::wgt_shape_bn(WgtShape(si));
          const bool slices = WgtSplit(pi) == WgtSplit::Slices;
          const std::string at = "M " + std::to_string(M) + ", K " + std::to_string(c.K) + ", N[0] " +
                                 std::to_string(c.N[0]) + ", shape " + std::to_string(si) + ", split " +
                                 std::to_string(pi);
          const int64_t chunks = tc::ceil_div(c.K, tc::kMmaK);
          const int tiles_m = static_cast<int>(tc::ceil_div(M, int64_t{bm}));
          // Per unit (launch numbering): its part, tile (launch numbering), slice, K tiles.
          struct U {
            int part, tile, s, kt0, kt1;
          };
          std::vector<U> units;
          int tiles_all = 0;
          for (size_t i = 0; i < c.N.size(); ++i) {
            const tc::KSplit ks = tc::k_split(c.N[i], c.K, tc::split_target_ctas());
            const int ktiles = static_cast<int>(wg::serial_tiles(chunks, ks.cps));
            const int per = static_cast<int>(tc::ceil_div(ks.cps, int64_t{wg::kKT / tc::kMmaK}));
            const int n_tiles = static_cast<int>(tc::ceil_div(c.N[i], int64_t{bn}));
            const int tiles = tiles_m * n_tiles, sl = slices ? ks.S : 1;
            for (int local = 0; local < tiles * sl; ++local) {
              const auto w = cuda::wgt::wgt_unit(local, tiles, tiles_m, sl, per, ktiles);
              ASSERT_TRUE(w.m_tile >= 0 && w.m_tile < tiles_m && w.n_tile >= 0 && w.n_tile < n_tiles) << at;
              ASSERT_EQ(w.m_tile + tiles_m * w.n_tile, w.tile) << at;
              units.push_back({int(i), tiles_all + w.tile, w.s, w.kt0, w.kt1});
            }
            // The K tiles of each tile's units in slice order: serial_tile's walk, a slice a unit.
            std::vector<std::vector<const U*>> of_tile(size_t(tiles), std::vector<const U*>(size_t(sl), nullptr));
            for (const U& u : units)
              if (u.part == int(i)) {
                ASSERT_TRUE(u.s >= 0 && u.s < sl) << at;
                ASSERT_EQ(of_tile[size_t(u.tile - tiles_all)][size_t(u.s)], nullptr) << "a (tile, slice) twice, " << at;
                of_tile[size_t(u.tile - tiles_all)][size_t(u.s)] = &u;
              }
            for (const auto& t : of_tile) {
              int next = 0;
              for (int s = 0; s < sl; ++s) {
                ASSERT_NE(t[size_t(s)], nullptr) << "a (tile, slice) missing, " << at;
                ASSERT_EQ(t[size_t(s)]->kt0, next) << at;
                ASSERT_LT(t[size_t(s)]->kt0, t[size_t(s)]->kt1) << at;
                for (int g = t[size_t(s)]->kt0; g < t[size_t(s)]->kt1; ++g) {
                  const wg::SerialTile st = wg::serial_tile(g, chunks, ks.cps);
                  if (slices) {
                    ASSERT_EQ(st.slice, s) << at;
                    ASSERT_EQ(st.last_of_slice, g + 1 == t[size_t(s)]->kt1) << at;
                  }
                }
                next = t[size_t(s)]->kt1;
              }
              ASSERT_EQ(next, ktiles) << at;
            }
            tiles_all += tiles;
          }
          // Predecessors first, and a persistent grid (each CTA its units in order; a unit done once its
          // K tiles are through and its predecessor is done) finishes every unit.
          std::vector<std::vector<int>> unit_of(static_cast<size_t>(tiles_all));
          for (size_t u = 0; u < units.size(); ++u) {
            auto& v = unit_of[size_t(units[u].tile)];
            if (v.size() <= size_t(units[u].s)) v.resize(size_t(units[u].s) + 1, -1);
            v[size_t(units[u].s)] = int(u);
          }
          for (size_t u = 0; u < units.size(); ++u)
            if (units[u].s > 0) {
              ASSERT_LT(unit_of[size_t(units[u].tile)][size_t(units[u].s - 1)], int(u)) << at;
            }
          const int grid = static_cast<int>(std::min<size_t>(units.size(), 132));
          std::vector<int> current(static_cast<size_t>(grid)), left(static_cast<size_t>(grid));
          std::vector<bool> done(units.size(), false);
          for (int b = 0; b < grid; ++b)
            current[size_t(b)] = b, left[size_t(b)] = units[size_t(b)].kt1 - units[size_t(b)].kt0;
          size_t finished = 0;
          for (bool progress = true; progress;) {
            progress = false;
            for (int b = 0; b < grid; ++b) {
              const int u = current[size_t(b)];
              if (u >= int(units.size())) continue;
              if (left[size_t(b)] > 0) {
                --left[size_t(b)], progress = true;
                continue;
              }
              const U& x = units[size_t(u)];
              if (x.s > 0 && !done[size_t(unit_of[size_t(x.tile)][size_t(x.s - 1)])]) continue;  // waits
              done[size_t(u)] = true, ++finished, progress = true;
              current[size_t(b)] = u + grid;
              if (u + grid < int(units.size()))
                left[size_t(b)] = units[size_t(u + grid)].kt1 - units[size_t(u + grid)].kt0;
            }
          }
          ASSERT_EQ(finished, units.size()) << "the grid stalls, " << at;
        }
}
