// Block-scaled fp8 weights where the streaming fp8 kernel does not serve (MatmulKernel::Fp8Dequant: more
// than gemv_max_rows() rows, and the MatmulOrder::Prefill calls the W8A8 GEMM does not take: no wgmma, rows
// not 16-byte strided, or the W8A8 GEMM turned off — matmul_prefill_fp8_sm90a.cu): the weight is dequantised into a
// bf16 scratch by the definition (matmul_fp8_math.cuh: the bits the fp8 gemv kernel and the CPU use), then the same
// call runs with that bf16 weight through matmul_run, i.e. the bf16 plan (wgmma, mid, the prefill GEMM, cuBLASLt under
// MatmulOrder::Free). By the row-invariant kernels' common contract a row gets the bits of the fp8 gemv kernel; a
// prefill row the bits of the prefill GEMM over the bf16 dequantisation, whatever its chunk. The simplest correct path,
// not a fast one: it writes and reads 2 bytes per weight element per call (for a prefill chunk, a few percent of the
// GEMM's time; to be measured).
//
// The bf16 weight goes into the matmuls' scratch slot ScratchSlot::Fp8Weight (kernels.h: matmul_scratch), which
// grows to the largest fp8 matrix once.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_code_order.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_fp8_math.cuh"

namespace specserve::cuda::kernels {

namespace {

// One thread per pair of elements (k, k + 1) of a row (k even: a pair never straddles a 128-column block), read
// where the codes' fragment order keeps it (fp8_code_order.h: a pair stays two adjacent bytes).
__global__ void __launch_bounds__(256)
    fp8_dequant_kernel(const uint8_t* w, int64_t ldw, const float* scales, int64_t scale_ld, int64_t N, int64_t K,
                       uint16_t* out, int64_t ldo) {
  pdl_begin();
  const int64_t pairs_per_row = (K + 1) / 2, total = N * pairs_per_row;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t n = i / pairs_per_row, k = 2 * (i % pairs_per_row);
    const uint8_t* pair = w + n * ldw + fp8o::stored_index(k, K);
    const bool two = k + 1 < K;
    const uint16_t codes = static_cast<uint16_t>(pair[0] | (two ? pair[1] << 8 : 0));
    const uint32_t v = fp8::dequant2_bf16(codes, scales[n / fp8::kBlock * scale_ld + k / fp8::kBlock]);
    out[n * ldo + k] = static_cast<uint16_t>(v & 0xffffu);
    if (two) out[n * ldo + k + 1] = static_cast<uint16_t>(v >> 16);
  }
}

}  // namespace

void fp8_dequantize_bf16(const uint8_t* w, int64_t ldw, const float* scales, int64_t scale_ld, int64_t N, int64_t K,
                         uint16_t* out, int64_t ldo, cudaStream_t stream) {
  const int64_t total = N * ((K + 1) / 2);
  if (total <= 0) return;
  const int64_t blocks = (total + 255) / 256 < int64_t{1} << 20 ? (total + 255) / 256 : int64_t{1} << 20;
  launch_pdl(fp8_dequant_kernel, static_cast<unsigned>(blocks), 256, 0, stream, w, ldw, scales, scale_ld, N, K, out,
             ldo);
  CUDA_CHECK_LAUNCH();
}

void matmul_fp8_dequant(const MatmulArgs& a, MatmulOrder order, cudaStream_t stream) {
  if (a.w_scales == nullptr)
    cuda_fail(cudaErrorInvalidValue, "matmul_fp8_dequant: not an fp8 weight", __FILE__, __LINE__);
  if (a.M <= 0 || a.N <= 0) return;
  // Rows a multiple of 8 elements apart from a 16-byte aligned block: the bf16 kernels' 16-byte loads.
  const int64_t ldo = (a.K + 7) / 8 * 8;
  auto* w = static_cast<uint16_t*>(
      matmul_scratch(static_cast<size_t>(a.N * (ldo > 0 ? ldo : 8)) * 2, stream, ScratchSlot::Fp8Weight));
  fp8_dequantize_bf16(static_cast<const uint8_t*>(a.w), a.ldw, a.w_scales, a.scale_ld, a.N, a.K, w, ldo, stream);
  MatmulArgs b = a;
  b.w = w;
  b.w_bf16 = true;
  b.ldw = ldo;
  b.w_scales = nullptr;
  b.scale_ld = 0;
  matmul_run(&b, 1, order, stream);
}

}  // namespace specserve::cuda::kernels
