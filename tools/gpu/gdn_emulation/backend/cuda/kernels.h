#pragma once
// Stands in for src/backend/cuda/kernels.h in the host emulation: its chunked Gated DeltaNet
// declarations (keep them the same), on the emulated CUDA types.
#include "cuda_emu.h"

namespace specserve::cuda::kernels {

inline constexpr int kGdnChunkRows = 64;
struct GdnChunkSpanDev {
  float* state = nullptr;
  int64_t row_begin = 0;
  int64_t rows = 0;
  int64_t position = 0;
  int64_t first_chunk = 0;
};
int64_t gdn_span_chunks(int64_t position, int64_t rows);
int64_t gdn_number_chunks(GdnChunkSpanDev* spans, int64_t num_spans);
int64_t gdn_chunk_scratch_floats(int Hv, int dk, int dv);
int64_t gdn_chunked_window(int64_t chunks, int Hv, int dk, int dv);
void gated_delta_rule_chunked(const float* qkv, int64_t ld, const float* g, const float* beta,
                              const GdnChunkSpanDev* spans, const GdnChunkSpanDev* host_spans, int64_t num_spans,
                              int Hk, int Hv, int dk, int dv, float* out, int64_t ldo, float* scratch,
                              int64_t scratch_chunks, cudaStream_t stream);

}  // namespace specserve::cuda::kernels
