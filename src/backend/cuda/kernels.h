#pragma once
// Internal: the CUDA kernel launchers behind cuda_ops() (cuda_ops*.cpp check shapes and dtypes and
// stages host metadata; these only enqueue work on `stream`). Plain C++17 so the .cu files can
// include it; every pointer here is a device pointer. One file per op family implements them:
// matmul.cu, norm.cu, rope.cu, elementwise.cu, attention.cu, gated_deltanet.cu.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/matmul_choice.h"

namespace specserve::cuda::kernels {

// ---- matmul (matmul.cu; bf16 weights: matmul_tensor_core.cu) ------------------------------------------
// x's e4m3 codes and group scales for the W8A8 prefill GEMM (fp8_quantize_activations below).
struct Fp8Activations {
  const uint8_t* codes = nullptr;
  int64_t pitch = 0;
  const float* scales = nullptr;
  int64_t scale_pitch = 0;
  int64_t M = 0, K = 0;
};

struct MatmulArgs {
  const float* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  bool w_bf16 = false;
  int64_t ldw = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t M = 0, N = 0, K = 0;
  // x's bf16 copy in the gemv kernel's layout (matmul_tensor_core_xb.cuh, pitch ldxb) when the op that
  // produced x wrote one (XbOut below); the gemv kernel then reads it instead of converting x again.
  // nullptr: none (every other kernel ignores it).
  const uint16_t* xb = nullptr;
  int64_t ldxb = 0;
  // A block-scaled fp8 weight (w: e4m3 codes in fragment order, fp8_code_order.h, rows ldw bytes apart; w_bf16
  // false): its f32 scales
  // [ceil(N / 128), scale_ld] (backend/ops.h: the matmul has the bits of the bf16 dequantisation).
  const float* w_scales = nullptr;
  int64_t scale_ld = 0;
  // x's quantised copy for the W8A8 prefill GEMM when the op that produced x wrote one (the SwiGLU form of
  // matmul_fp8_prefill_swiglu: codes and scales by the activation rule, bit for bit what
  // fp8_quantize_activations would write); the GEMM then reads it instead of running that pass. codes ==
  // nullptr: none (every other kernel ignores it).
  Fp8Activations xq{};
};

// A producer's second output: its [M, K] result rounded to bf16 in the layout the gemv kernel reads x
// through (matmul_tensor_core_xb.cuh: `rows` = xb_rows(M) rows of `pitch` elements, +0 outside x), the
// registers x_to_bf16 would write, so the matmul that consumes the result skips that launch.
// regs == nullptr: none.
struct XbOut {
  uint32_t* regs = nullptr;
  int64_t pitch = 0;  // elements
  int64_t rows = 0;
};
// The XbOut for a future matmul input [M, K] when the gemv kernel would read it through a bf16 copy
// (gemv_xb_rows() <= M <= gemv_max_rows()), or with `free_order` when the caller's cuBLASLt path would
// (matmul_free_order.h), or above gemv_max_rows() on an sm_90a device for the prefill GEMM
// (matmul_bf16_prefill reads it; the row-invariant wgmma kernels convert x themselves), in the matmul's
// scratch; {} otherwise. Valid until
// the next matmul launch (a producer writes it, the matmul enqueued right after reads it).
XbOut matmul_xb_out(int64_t M, int64_t K, cudaStream_t stream, bool free_order = false);
// The matmuls' growable device scratch blocks, one per use (matmul_tensor_core_xb.cu): the copies of matmul
// inputs (x_to_bf16 and the producers' XbOut), the copy a matmul writes of its own output while it reads its
// x's copy (matmul_xb_out_beside_x), and an fp8 weight dequantised to bf16 (matmul_fp8_dequant). All matmuls
// are enqueued on the one stream, so a block's next user runs after its last reader; a block that must grow
// drains the stream first. Contents undefined. (Fp8Activation: x's e4m3 codes and group scales for the W8A8
// prefill GEMM, fp8_quantize_activations; Fp8ActivationOut: the codes and scales of the SwiGLU form's output,
// matmul_fp8_prefill_swiglu, written while the GEMM reads its own x's from Fp8Activation.)
enum class ScratchSlot { XCopy, OutputCopy, Fp8Weight, Fp8Activation, Fp8ActivationOut };
inline constexpr int kScratchSlots = 5;
void* matmul_scratch(size_t bytes, cudaStream_t stream, ScratchSlot slot);
// The XbOut of a matmul's own [M, K] output (the prefill GEMM's SwiGLU form), in a second scratch: the copy
// of its x (in the first) stays intact while the kernel writes this one. Valid until the next such call.
XbOut matmul_xb_out_beside_x(int64_t M, int64_t K, cudaStream_t stream);
// Matmul launches (gemv, matmul_bf16_mid) that read an XbOut instead of converting x (a counter for
// tests), and the launchers' call that counts one.
uint64_t matmul_xb_reused();
void matmul_count_xb_reused();
// ---- which kernel runs a matmul: backend/matmul_choice.h, one function for every caller ---------------
// The choice's view of one weight of a call, and of this process's device (matmul_tensor_core.cu).
inline MatmulWeight matmul_weight(const MatmulArgs& a) {
  return MatmulWeight{
      a.N, a.w_bf16, a.ldw, (reinterpret_cast<uintptr_t>(a.w) & 15u) == 0, a.ldy, a.w_scales != nullptr};
}
const MatmulDevice& matmul_device();
// Runs `count` matmuls sharing x, M and K (Ops::matmul: one; Ops::matmul_multi: several) as
// plan_matmul decides under `order` (matmul_run.cpp); a free-order plan cuBLASLt cannot run falls back
// to the row-invariant plan.
void matmul_run(const MatmulArgs* parts, int count, MatmulOrder order, cudaStream_t stream);
// One row-invariant matmul (matmul_run of one part): what Ops::matmul runs in the fixed order.
void matmul(const MatmulArgs& a, cudaStream_t stream);
// The two kernels without tensor cores: K == 0 (y = 0) and f32 weights on CUDA cores, exact f32
// products (matmul.cu).
void matmul_zero(const MatmulArgs& a, cudaStream_t stream);
void matmul_f32(const MatmulArgs& a, cudaStream_t stream);
// bf16 weights on the tensor cores, x rounded to bf16 (the numerics contract heads
// matmul_tensor_core.cu; K is split into slices by N and K only). `tile` < 0 runs the kernel the
// choice picks (matmul); tests pass a tc::TileKind (matmul_tensor_core.cuh) to run one shape, which
// never changes the result's bits.
void matmul_bf16_tensor_core(const MatmulArgs& a, cudaStream_t stream, int tile = -1);
// The mma.sync tiled kernel (matmul_tensor_core.cu) in the tile shape choose_tile picks: MatmulKernel::Tiled,
// above 32 rows on devices without wgmma.
void matmul_bf16_tiled(const MatmulArgs& a, cudaStream_t stream);
// The warp-split streaming kernel (matmul_tensor_core_gemv.cu): the same contract and bits, faster at
// decode and short-verify sizes: MatmulKernel::Gemv, M <= gemv_max_rows() (kGemvMaxRows, 32) where
// matmul_bf16_mid (below) does not take the call.
// Tests force its stages per warp (2-5; 0 picks them by the launch's CTA count) and whether the first
// weight tiles load before the wait for the previous kernel (early_w: -1 the default, 0 off, 1 on); the
// bits are the same either way.
struct GemvForce {
  int stages = 0;
  int early_w = -1;
};
void matmul_bf16_gemv(const MatmulArgs& a, cudaStream_t stream, GemvForce force = {});
// 2-4 bf16 matmuls sharing x (q/k/v, gate/up) in one gemv launch: each output gets the bits of its lone
// matmul (same K slices, same order). Only for parts that are matmul_bf16_gemv_compatible: M <=
// gemv_max_rows(), bf16 weights, the same x, M, K and K split (matmul_parts_share_split).
bool matmul_bf16_gemv_compatible(const MatmulArgs* parts, int count);
void matmul_bf16_gemv_multi(const MatmulArgs* parts, int count, cudaStream_t stream);
int gemv_max_rows();
// The split-K kernel for 17-64 rows (matmul_tensor_core_mid.cu): the same contract and bits, 32-column
// CTAs so that x's L2 traffic stays near the weights'. Runs one launch over the parts (1 to 4 weights
// sharing x, M, K and the K split, as matmul_bf16_gemv_multi) when they fit it (17 <= M <= 64, S = 4
// or 8, 16-byte weight loads, K % 8 == 0, waves full enough: matmul_mid_takes) and returns true; else
// launches nothing and returns false.
bool matmul_bf16_mid(const MatmulArgs* parts, int count, cudaStream_t stream);
// Rows from which the gemv kernel reads x through its bf16 copy (kGemvXbRows, 5).
int gemv_xb_rows();
// The Hopper warpgroup kernel (matmul_wgmma_sm90a.cu, sm_90a): the same contract and bits, for
// M > gemv_max_rows(). `kind` < 0 picks the tile shape (wg::choose_wgmma_tile), else a wg::WgKind.
// Returns false, launching nothing, when this process cannot run it (not a compute capability 9.0
// device: wgmma_available).
bool matmul_bf16_wgmma(const MatmulArgs& a, cudaStream_t stream, int kind = -1);
bool wgmma_available();
// Several bf16 matmuls of one x (q/k/v, gate/up) above gemv_max_rows() rows: x's bf16 copy is made
// once and each weight gets its own wgmma launch (the bits of its lone matmul). Returns false,
// launching nothing, when the wgmma kernel cannot run or the parts do not share x, M and K.
bool matmul_bf16_wgmma_multi(const MatmulArgs* parts, int count, cudaStream_t stream);
// The prefill GEMM (matmul_prefill_sm90a.cu; Ops::matmul_prefill): TMA, wgmma, persistent, one f32 chain
// per element over all of K, so a row's bits depend only on its x row, w and K (deterministic per row,
// not the row-invariant contract's bits). Several parts share x (one bf16 copy of it). Returns false,
// launching nothing, when it cannot run here (no wgmma) or a part does not fit (prefill_matmul_fits:
// bf16 weights, 16-byte aligned with ldw % 8 == 0, K % 8 == 0, dims below 2^31) or the parts do not
// share x, M and K.
bool prefill_matmul_fits(const MatmulArgs& a);
bool matmul_bf16_prefill(const MatmulArgs* parts, int count, cudaStream_t stream);
// The prefill GEMM's SwiGLU form: gate.y = silu(x · gateᵀ) ⊙ (x · upᵀ) [M, N] and its bf16 copy `xb`
// (XbOut for [M, N]) in one launch, with the bits of matmul_bf16_prefill of both weights then swiglu
// (up.y is not written). Returns false, launching nothing, where matmul_bf16_prefill would decline a part,
// the parts do not share x, M, K and N, or xb is missing.
bool matmul_bf16_prefill_swiglu(const MatmulArgs& gate, const MatmulArgs& up, const XbOut& xb, cudaStream_t stream);
// The slice-serial warpgroup kernel (matmul_wgmma_serial_sm90a.cu; matmul_wgmma.cuh: WgSerial) over x's
// bf16 copy xb (pitch ldxb = xb_pitch(K, wg::kKT)); matmul_bf16_wgmma picks it where
// matmul_wgmma_serial (matmul_choice.h) says. Only for operands
// wgmma_serial_fits: bf16 weights, 16-byte aligned rows, K % 8 == 0.
bool wgmma_serial_fits(const MatmulArgs& a);
void matmul_bf16_wgmma_serial(const MatmulArgs& a, const uint16_t* xb, int64_t ldxb, cudaStream_t stream);
// Block-scaled fp8 weights (a.w_scales set; backend/ops.h: every result has the bits of the same call with
// the bf16 dequantisation bf16_rn(f32_rn(e4m3 × scale)) of the weight):
// - matmul_fp8_gemv (matmul_fp8_gemv.cu, its kernel in matmul_fp8_gemv_kernel.cuh; MatmulKernel::Fp8Gemv, 1 to
// gemv_max_rows() rows): the gemv kernel's
//   shape, split and mma chains, streaming the e4m3 codes and their block scales and dequantising them into
//   the mma B fragments in registers; matmul_fp8_gemv_multi runs 1-4 fp8 weights sharing x, M and K, each with
//   its own K split (matmul_fp8_gemv_compatible: q/k/v, gate/up, in_proj_qkv / in_proj_z) in one launch, each
//   output with its lone call's bits.
//   Tests and benchmarks force its stages per warp (3, 4, 6, 8), the early code loads, the straight-line
//   tiles, and the dequantisation path (fast: tiles whose scales are bf16 values multiply in bf16x2; else
//   the folded or the bit path, or the conversion instructions); the bits are the same either way.
// - matmul_fp8_dequant (matmul_fp8_dequant.cu; MatmulKernel::Fp8Dequant): the weight dequantised into a bf16
//   scratch, then matmul_run of the same call in `order` with that bf16 weight;
// - fp8_dequantize_bf16: that dequantisation alone, into `out` (rows ldo elements apart), for tests.
struct Fp8GemvForce {
  int stages = 0;    // 3, 4, 6 or 8; 0: as the launch's shape picks
  int early_w = -1;  // the first tiles' codes loaded before the wait for the previous kernel: -1 / 1 on, 0 off
  int fast = -1;     // tiles with bf16-valued scales take the bf16x2 multiply: -1 / 1 on, 0 off
  int convert = -1;  // the other tiles: -1 / 0 the folded or bit path, 1 the e4m3 conversion instructions
  int regular = -1;  // the straight-line tiles (matmul_fp8_gemv.cuh): -1 / 1 on, 0 off (every tile chunk by chunk)
  int warps = 0;     // f32 x (1-4 rows): 4 or 8 warps a CTA; 0: as the launch picks (fp8_warps_for, one row only)
};
void matmul_fp8_gemv(const MatmulArgs& a, cudaStream_t stream, Fp8GemvForce force = {});
bool matmul_fp8_gemv_compatible(const MatmulArgs* parts, int count);
void matmul_fp8_gemv_multi(const MatmulArgs* parts, int count, cudaStream_t stream, Fp8GemvForce force = {});
void matmul_fp8_dequant(const MatmulArgs& a, MatmulOrder order, cudaStream_t stream);
// The W8A8 prefill GEMM (matmul_prefill_fp8_sm90a.cu; MatmulKernel::Fp8Prefill, MatmulOrder::Prefill on sm_90a):
// x quantised per row and group of 128 columns to e4m3 (matmul_fp8_act_math.cuh), then e4m3 x e4m3 wgmma on the
// fp8 tensor cores, each 128-column block of K accumulated from +0 and added to the element's f32 total times
// a_scale[row, block] x w_scale[n / 128, block], blocks in increasing order. Deterministic per row (a row's bits
// depend on its x row, w and K only), not the bits of the bf16 dequantisation. Several parts share x (one
// quantised copy). Returns false, launching nothing, where it cannot run (no wgmma) or a part does not fit
// (fp8_prefill_fits: an fp8 weight with a 16-byte aligned address and ldw % 16 == 0, dims below 2^31), or the
// parts do not share x, M and K. A scale_ld below ceil(K / 128) is an error.
bool fp8_prefill_fits(const MatmulArgs& a);
bool matmul_fp8_prefill(const MatmulArgs* parts, int count, cudaStream_t stream);
// The SwiGLU form (an MLP's gate and up, sharing x, M, K and N; gate.y the output h [M, N]): h = silu(x · gateᵀ) ⊙
// (x · upᵀ) with the bits of matmul_fp8_prefill of gate and up then swiglu (device_math.cuh's formula), and h's
// quantised copy (codes and scales by the activation rule, in ScratchSlot::Fp8ActivationOut, valid until the next
// such call) into *hq for the down projection (MatmulArgs::xq). Returns false, launching nothing, where the plain
// form would, or the two weights differ in shape.
bool matmul_fp8_prefill_swiglu(const MatmulArgs& gate, const MatmulArgs& up, Fp8Activations* hq, cudaStream_t stream);
// Launches of the W8A8 GEMM that read a producer's quantised x (MatmulArgs::xq) instead of running the activation
// pass (a counter for tests).
uint64_t fp8_activations_reused();
// The GEMM's pre-pass (matmul_fp8_act_quant.cu): x [M, K] to e4m3 codes [M, pitch] (pitch = fp8a::code_pitch(K);
// in the weights' fragment order, fp8_code_order.h)
// and f32 group scales transposed [groups_of(K), scale_pitch] (scale_pitch = fp8a::scale_pitch(M)), by the rule
// of matmul_fp8_act_math.cuh. fp8_quantize_activations writes them into ScratchSlot::Fp8Activation (valid until
// its next use), the _into form where the caller says (tests).
Fp8Activations fp8_quantize_activations(const float* x, int64_t ldx, int64_t M, int64_t K, cudaStream_t stream);
// That layout for x [M, K] in scratch `slot`, nothing written (fp8_quantize_activations' own, the SwiGLU form's h).
Fp8Activations fp8_activations_scratch(int64_t M, int64_t K, ScratchSlot slot, cudaStream_t stream);
void fp8_quantize_activations_into(const float* x, int64_t ldx, int64_t M, int64_t K, uint8_t* codes, int64_t pitch,
                                   float* scales, int64_t scale_pitch, cudaStream_t stream);
// Whether prefill matmuls with fp8 weights take the W8A8 GEMM (MatmulDevice::fp8_w8a8: on by default where wgmma
// runs); tests that compare prefill with the bf16 dequantisation's bits, and benchmarks, turn it off. Returns the
// previous value. Not thread-safe: set it while no matmul is being planned.
bool set_matmul_fp8_w8a8(bool on);
void fp8_dequantize_bf16(const uint8_t* w, int64_t ldw, const float* scales, int64_t scale_ld, int64_t N, int64_t K,
                         uint16_t* out, int64_t ldo, cudaStream_t stream);

// The tiled kernel's pre-pass (matmul_tensor_core_xb.cu): x [M, K] (pitch ldx) rounded to bf16 into the
// process's scratch block as tc::xb_pair lays it out (tc::xb_rows(M) rows of `pitch` elements, zero
// past M and K); returns the copy, valid for work enqueued on `stream` before the next call.
const uint16_t* matmul_x_to_bf16(const float* x, int64_t ldx, int64_t M, int64_t K, int64_t pitch, cudaStream_t stream);

// ---- norms (norm.cu) ---------------------------------------------------------------------------------
// kind: 0 = NormKind::Plain, 1 = NormKind::ZeroCentred. x, y contiguous [groups, d]; y may alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t groups, int64_t d, int kind, float eps,
              cudaStream_t stream, const XbOut& xb = {});
// x += y, then out = rms_norm(x): the bits of add then rms_norm (x, y, out [groups, d]; out != x, y).
void add_rms_norm(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d, int kind, float eps,
                  cudaStream_t stream, const XbOut& xb = {});
void rms_norm_gated(const float* x, const float* z, const float* w, float* y, int64_t groups, int64_t d, float eps,
                    cudaStream_t stream);

// ---- rope (rope.cu) -------------------------------------------------------------------------------------
// inv_freq [rot_dim / 2] and positions [rows] are device arrays.
void rope(float* x, int64_t rows, int64_t ld, int heads, int head_dim, int rot_dim, const float* inv_freq,
          const int32_t* positions, cudaStream_t stream);

// ---- elementwise (elementwise.cu) -----------------------------------------------------------------
void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
// The same over [M, I] row-major operands, writing `xb` (XbOut for [M, I]) too.
void swiglu_xb(const float* gate, const float* up, float* out, int64_t M, int64_t I, const XbOut& xb,
               cudaStream_t stream);
void add(float* x, const float* y, int64_t n, cudaStream_t stream);
// Memory::fill_uniform (synthetic_fill.cu): f32 or bf16 elements from backend/synthetic_fill.h.
void fill_uniform(void* dst, bool bf16, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);
// out[r] = the lowest index of row r's maximum over its first n entries (argmax.cu; ops.h argmax).
// scratch: argmax_scratch_bytes(rows, n) bytes of device memory.
int64_t argmax_scratch_bytes(int64_t rows, int64_t n);
void argmax(const float* x, int64_t ld, int64_t rows, int64_t n, int32_t* out, void* scratch, cudaStream_t stream);
void mul_sigmoid(float* x, const float* gate, int64_t n, cudaStream_t stream);
// x [rows, heads * hd] (contiguous) *= sigmoid of the gate heads read in place: head h of row r at
// gate + r * ld + h * head_stride (Ops::mul_sigmoid with a head_rows.h gate); the bits of mul_sigmoid.
void mul_sigmoid_heads(float* x, const float* gate, int64_t rows, int heads, int hd, int64_t ld, int64_t head_stride,
                       cudaStream_t stream);
// out[r, :] = table[ids[r], :]; table f32 or bf16 [*, width] contiguous; ids a device array.
void embedding(const void* table, bool bf16, int64_t width, const int32_t* ids, int64_t n, float* out,
               cudaStream_t stream);

// ---- Memory::copy_many (copy_many.cu) -------------------------------------------------------------------
struct CopyRegionDev {
  void* dst = nullptr;
  const void* src = nullptr;
  int64_t bytes = 0;
};
// regions: a device array of `count` regions, the largest max_bytes long.
void copy_many(const CopyRegionDev* regions, int64_t count, int64_t max_bytes, cudaStream_t stream);

// ---- paged KV cache and attention (attention.cu) ------------------------------------------------------
// One query row: its block table starts at ptrs[table] (device array of device block pointers).
struct KvRow {
  int64_t table = 0;
  int32_t position = 0;
  int32_t window_start = 0;
};
struct KvArgs {
  const KvRow* rows = nullptr;  // device [R]
  void* const* ptrs = nullptr;  // device, all rows' block tables back to back
  // The blocks' element type (KvGeometry::dtype): bf16 (stored rounded to nearest even, widened exactly
  // when read) or f32.
  bool bf16 = false;
  // Optional host copy of rows: lets attention() serve rows of one sequence with shared chunks in one
  // CTA (attention_rows.cuh); it then stages a table through Staging::global() (hold its lock).
  const KvRow* host_rows = nullptr;
  int64_t R = 0;
  int layer = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
};
void kv_store(const KvArgs& kv, const float* k, int64_t ldk, const float* v, int64_t ldv, cudaStream_t stream);
// Ops::qk_norm_rope_kv_store(_rows, _from) (head_prep.cu): q [q_rows, num_heads * hd] and k [R, nkv * hd]
// normed and rotated (q at q_pos[r], or at kv's rows[r].position when q_pos is null), k and v stored at
// kv's rows; inv_freq [rot_dim / 2] a device array; kind 0 Plain, 1 ZeroCentred. The bits of rms_norm,
// rope and kv_store. k is updated in place; q's heads are read from q_in (head h of row r at
// q_in + r * ldq_in + h * q_head_stride) and written to q: set q_in = q, ldq_in = ldq and
// q_head_stride = hd for in place.
struct HeadPrepArgs {
  float* q = nullptr;
  int64_t ldq = 0;
  const float* q_in = nullptr;
  int64_t ldq_in = 0;
  int64_t q_head_stride = 0;
  float* k = nullptr;
  int64_t ldk = 0;
  const float* v = nullptr;
  int64_t ldv = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  int kind = 0;
  float eps = 0;
  int num_heads = 0;
  int rot_dim = 0;
  const float* inv_freq = nullptr;
  int64_t q_rows = 0;              // q's rows (the KV rows' count when q_pos is null)
  const int32_t* q_pos = nullptr;  // device [q_rows], or null
};
void qk_norm_rope_kv_store(const HeadPrepArgs& a, const KvArgs& kv, cudaStream_t stream);
// head_dim must be a multiple of 32 and at most 256 (checked by the caller: attention_supports).
bool attention_supports(int head_dim);
// At most 16 query heads per KV head (attention_group_supported).
bool attention_group_supported(int num_heads, int num_kv_heads);
// The chunks a row's window of `window` keys is split into (at most 64; not monotonic in the window),
// and the f32 scratch a call needs for `rows` rows with at most max_chunks chunks each (per row, head
// and chunk: the chunk's weighted V sum, max and sum).
int64_t attention_chunks(int64_t window);
int64_t attention_scratch_floats(int64_t rows, int num_heads, int head_dim, int64_t max_chunks);
void attention(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* out, int64_t ldo,
               float* scratch, int64_t max_chunks, cudaStream_t stream, const XbOut& xb = {});
// The same attention in a free summation order (attention_free.cu: Ops::attention under MatmulOrder::Free,
// the drafter's forward): a sequence's rows share tiles of keys and values on tensor cores (bf16
// operands, f32 softmax), so it is fast for a drafter's blocks and not row-invariant. With few sequences
// it splits the keys across CTAs and merges the splits in a second kernel.
bool attention_free_supports(int head_dim);
// What a call would launch: its items (first rows of runs of one sequence's rows, then R), the key
// splits and the scratch they need. Declined (no items) without kv.host_rows, for a head_dim
// attention_free_supports() refuses (only 32, 64, 128) and for rows of one sequence (faster in the
// fixed-order kernels).
struct AttentionFreePlan {
  std::vector<int32_t> items;
  int max_rows = 0;
  int splits = 1;
  int64_t scratch_floats = 0;  // f32 scratch for the splits' records (0 with one split)
  bool declined() const { return items.empty(); }
};
AttentionFreePlan attention_free_plan(const KvArgs& kv, int num_heads);
// Launches a plan that was not declined; `scratch` holds plan.scratch_floats. The caller holds the
// staging lock.
void attention_free(const KvArgs& kv, const AttentionFreePlan& plan, const float* q, int64_t ldq, int num_heads,
                    float scale, float* out, int64_t ldo, float* scratch, cudaStream_t stream);

// ---- Gated DeltaNet (gated_deltanet.cu, gated_deltanet_chunked.cu) ---------------------------------------
void causal_conv_silu(const float* x, int64_t ldx, const float* window, const float* w, float* out, int64_t ldo,
                      int64_t n, int64_t C, int Kc, cudaStream_t stream);
// The same for several spans of x's rows in one launch, each with its own window; a span's bits are
// those of causal_conv_silu over it alone.
struct ConvSpanDev {
  const float* window = nullptr;  // [Kc-1, C]
  int64_t row_begin = 0;
  int64_t rows = 0;
};
void causal_conv_silu_spans(const float* x, int64_t ldx, const ConvSpanDev* spans, int64_t num_spans, int64_t max_rows,
                            const float* w, float* out, int64_t ldo, int64_t C, int Kc, cudaStream_t stream);
void gdn_prepare(float* qkv, int64_t ld, float* a, float* b, const float* a_log, const float* dt_bias, int64_t R,
                 int Hk, int Hv, int dk, int dv, cudaStream_t stream);
struct GdnSpanDev {
  float* state = nullptr;
  const float* state_in = nullptr;  // null: read `state`
  int64_t row_begin = 0;
  int64_t rows = 0;
};
// dk a multiple of 16 up to 512 (checked by the caller: gdn_rule_supports). max_rows: the most rows a span
// has (1 at decode picks the kernel for one-row spans; the bits do not depend on it).
bool gdn_rule_supports(int dk, int dv);
void gated_delta_rule(const float* qkv, int64_t ld, const float* g, const float* beta, const GdnSpanDev* spans,
                      int64_t num_spans, int64_t max_rows, int Hk, int Hv, int dk, int dv, float* out, int64_t ldo,
                      cudaStream_t stream);
// The chunked form for prefill spans (GdnSpan::chunked): chunks end at the absolute positions that are
// multiples of kGdnChunkRows (= kGdnChunk of backend/ops.h; cuda_ops_gated_deltanet.cpp checks). Any dk, dv that
// gdn_rule_supports; no state_in. The call's chunks are numbered span after span (first_chunk, filled
// by gdn_number_chunks); a parallel kernel writes each chunk's state-independent products to `scratch`
// (gdn_chunk_scratch_floats per chunk) and a sequential one carries the state, at most
// `scratch_chunks` chunks (gdn_chunked_window) per pair of launches. `spans` is the device copy of
// `host_spans`.
inline constexpr int kGdnChunkRows = 64;
struct GdnChunkSpanDev {
  float* state = nullptr;
  int64_t row_begin = 0;
  int64_t rows = 0;         // > 0
  int64_t position = 0;     // absolute position of the first row, >= 0
  int64_t first_chunk = 0;  // the call's number of the span's first chunk
};
// The chunks of a span of `rows` > 0 rows from `position`.
int64_t gdn_span_chunks(int64_t position, int64_t rows);
// Fills every span's first_chunk; returns the call's chunks.
int64_t gdn_number_chunks(GdnChunkSpanDev* spans, int64_t num_spans);
// Scratch floats of one chunk (every value head), and the chunks per launch pair that keep the scratch
// within 128 MiB (at least 1, at most `chunks`). The window changes no bits.
int64_t gdn_chunk_scratch_floats(int Hv, int dk, int dv);
int64_t gdn_chunked_window(int64_t chunks, int Hv, int dk, int dv);
void gated_delta_rule_chunked(const float* qkv, int64_t ld, const float* g, const float* beta,
                              const GdnChunkSpanDev* spans, const GdnChunkSpanDev* host_spans, int64_t num_spans,
                              int Hk, int Hv, int dk, int dv, float* out, int64_t ldo, float* scratch,
                              int64_t scratch_chunks, cudaStream_t stream);

}  // namespace specserve::cuda::kernels
