#pragma once
// Which kernel runs a matmul: one function of the call (backend, rows, each weight's columns, K, dtype
// and alignment, the matmul order) and of the device (multiprocessors, whether it runs wgmma), to an
// enum of kernel families. Every matmul the backends run goes through it (cuda_ops_matmul.cpp, the CUDA
// launchers that pick a kernel themselves, tests/backend/test_matmul_choice.cpp's table), so the choice
// is stated once. Host code only: it is built and tested without CUDA; C++17, as the CUDA sources
// that include it are compiled.
//
// The choice never changes a row-invariant result's bits (ops.h: every kernel below that serves
// MatmulOrder::RowInvariant computes each element in the order matmul_tensor_core.cu states); it only
// decides speed. docs/KERNELS.md, "Matmul kernel choice", has the table in words.
#include <cstdint>
#include <string_view>
#include <vector>

#include "backend/matmul_order.h"

namespace specserve {

// The thresholds of the choice (each measured: docs/DECISIONS.md, matmul).
inline constexpr int64_t kGemvMaxRows = 32;  // the warp-split streaming kernel serves 1..32 rows
inline constexpr int64_t kGemvXbRows = 5;    // from 5 rows it reads x through a bf16 copy
inline constexpr int64_t kMidMinRows = 17;   // the 32-column split-K kernel: 17..64 rows
inline constexpr int64_t kMidMaxRows = 64;
inline constexpr int64_t kMidColumns = 32;        // its columns per CTA
inline constexpr int64_t kFreeOrderMinRows = 33;  // MatmulOrder::Free takes cuBLASLt from 33 rows
inline constexpr int kMatmulGroupMax = 4;         // weights sharing one streaming launch (q/k/v, gate/up)
inline constexpr int kFreeOrderMaxParts = 8;      // weights of one cuBLASLt call sequence
inline constexpr int64_t kWgmmaSerialTile = 128;  // the slice-serial wgmma kernel's tile (rows and columns)
// The TMA-fed slice-serial wgmma kernel (cuda/matmul_wgmma_tma_sm90a.cu) serves 33..256 rows (verify of
// several sequences) where the mid kernel does not; above, the cluster and slice-serial kernels as before.
inline constexpr int64_t kWgmmaTmaMinRows = 33;
inline constexpr int64_t kWgmmaTmaMaxRows = 256;

enum class MatmulKernel {
  Cpu,          // the CPU backend's kernels (cpu/matmul.cpp; the ISA from core/cpu_features.h)
  Empty,        // M or N is 0: nothing to compute
  ZeroFill,     // K is 0: y = 0 (a memset)
  CudaCoreF32,  // f32 weights on CUDA cores, exact f32 products (cuda/matmul.cu)
  FreeOrder,    // MatmulOrder::Free: cuBLASLt (cuda/matmul_free_order.h); its own summation order
  Mid,          // 17-64 rows: 32-column split-K tensor-core kernel (cuda/matmul_tensor_core_mid.cu)
  Gemv,         // 1-32 rows: warp-split streaming tensor-core kernel (cuda/matmul_tensor_core_gemv.cu)
  Wgmma,        // above 32 rows on compute capability 9.0: warpgroup cluster kernel (cuda/matmul_wgmma_sm90a.cu)
  WgmmaSerial,  // the same where K is split and the tiles fill 2.5 waves: slice-serial (matmul_wgmma_serial_sm90a.cu)
  WgmmaTma,     // 33-256 rows on 9.0, every weight of the call: TMA ring, slice-serial (matmul_wgmma_tma_sm90a.cu)
  Tiled,        // above 32 rows where wgmma cannot run: mma.sync tiled kernel (cuda/matmul_tensor_core.cu)
  Prefill,      // MatmulOrder::Prefill on compute capability 9.0: the TMA/wgmma GEMM (cuda/matmul_prefill_sm90a.cu)
  // Block-scaled fp8 weights (MatmulWeight::fp8; the bits of the bf16 dequantisation, backend/ops.h):
  Fp8Gemv,     // 1-32 rows outside MatmulOrder::Prefill: the gemv kernel streaming e4m3 (cuda/matmul_fp8_gemv.cu);
               // fp8 weights of one call sharing the K split share a launch (q/k/v, gate/up)
  Fp8Dequant,  // the rest: the weight dequantised to a bf16 scratch, then the bf16 plan of the same call
               // (cuda/matmul_fp8_dequant.cu); under MatmulOrder::Prefill for every M where Fp8Prefill does
               // not take the weight, so a prefill row's kernel does not depend on its chunk's rows
  Fp8Prefill,  // MatmulOrder::Prefill on compute capability 9.0 (MatmulDevice::fp8_w8a8), every M: activations
               // quantised per row and 128 columns, e4m3 x e4m3 on the fp8 tensor cores (W8A8; not the bits of
               // the dequantisation: cuda/matmul_prefill_fp8_sm90a.cu); the call's Fp8Prefill weights share x's
               // quantised copy and launches
};
std::string_view matmul_kernel_name(MatmulKernel k);

enum class MatmulBackend { Cpu, Cuda };

// The device facts the choice reads (CUDA); the defaults are an H200's.
struct MatmulDevice {
  int sms = 132;      // multiprocessors
  bool wgmma = true;  // compute capability 9.0 (the sm_90a kernels run)
  // Prefill matmuls with fp8 weights take the W8A8 GEMM (Fp8Prefill) where wgmma runs; off: Fp8Dequant.
  bool fp8_w8a8 = true;
};

// One weight of a call: y_i[M, N] = x[M, K] · w_i[N, K]ᵀ.
struct MatmulWeight {
  int64_t N = 0;
  bool bf16 = true;         // false: f32, or fp8 when `fp8` is set
  int64_t ldw = 0;          // w's row stride in elements
  bool w_aligned16 = true;  // w's address is a multiple of 16 bytes
  int64_t ldy = 0;          // y's row stride in elements
  bool fp8 = false;         // block-scaled fp8 (TensorView::scales; bf16 is then false)
};

// A call: one x [M, K] and one or more weights sharing it (Ops::matmul is one; Ops::matmul_multi
// several, in order).
struct MatmulCall {
  MatmulBackend backend = MatmulBackend::Cuda;
  MatmulOrder order = MatmulOrder::RowInvariant;
  int64_t M = 0, K = 0;
  std::vector<MatmulWeight> weights;
  MatmulDevice device;
};

// One launch of the plan: a kernel and the weights it serves (indices into MatmulCall::weights; several
// only for kernels that take them in one launch, or FreeOrder's one bf16 copy of x, or Wgmma's).
struct MatmulLaunch {
  MatmulKernel kernel;
  std::vector<int> parts;
};

// The kernels of a call, in launch order; every weight appears in exactly one launch. FreeOrder is a
// first choice: when cuBLASLt has no algorithm for a shape (known only at run time) the caller runs the
// plan of the same call with MatmulOrder::RowInvariant instead.
struct MatmulPlan {
  std::vector<MatmulLaunch> launches;
  // The launches (Wgmma / WgmmaSerial, one weight each) read one bf16 copy of x made once for all.
  bool one_x_copy = false;
};
MatmulPlan plan_matmul(const MatmulCall& call);

// The kernel of a one-weight call (plan_matmul's only launch).
MatmulKernel choose_matmul(MatmulBackend backend, MatmulOrder order, int64_t M, int64_t K, const MatmulWeight& w,
                           const MatmulDevice& device = {});

// The pieces of the rule, for the launchers that must agree with it.
// Whether weights (sharing x, M and K) share one streaming launch: bf16, the same K split, at most
// kMatmulGroupMax of them, M and K positive.
bool matmul_parts_share_split(int64_t M, int64_t K, const std::vector<MatmulWeight>& weights);
// Whether the 17-64-row kernel takes these weights in one launch.
bool matmul_mid_takes(int64_t M, int64_t K, const std::vector<MatmulWeight>& weights, int sms);
// Whether a wgmma launch of one weight takes the slice-serial kernel.
bool matmul_wgmma_serial(int64_t M, int64_t K, const MatmulWeight& w, int sms);
// Whether the TMA-fed slice-serial kernel takes these weights (all of them, one launcher): a device with
// wgmma, kWgmmaTmaMinRows <= M <= kWgmmaTmaMaxRows, K > 0 and K % 8 == 0, every weight bf16 with N > 0,
// a 16-byte aligned address and ldw % 8 == 0 (TMA's strides), every dimension below 2^31.
bool matmul_wgmma_tma_takes(int64_t M, int64_t K, const std::vector<MatmulWeight>& weights, const MatmulDevice& device);

}  // namespace specserve
