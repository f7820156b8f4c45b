#pragma once
// bf16-weight matmuls in a free summation order (ops.h: MatmulOrder::Free) through cuBLASLt: x is
// rounded to bf16 (the tiled kernels' pre-pass, matmul_x_to_bf16), then one cublasLtMatmul per weight
// (bf16 · bf16 → f32, f32 accumulation, the algorithm cuBLASLt's heuristic picks for the shape's row
// bucket: free_order_row_bucket below). The products are those of the row-invariant kernels; only the
// order of their sums differs, and it may change with M, so a row's bits may depend on the rows beside
// it. Used for the DFlash drafter's forward, where that changes which drafts are proposed, never which
// tokens are emitted.
//
// All calls go to the one stream of the CUDA backend (cuda_stream.h): the recorded launches before a
// call are flushed first, so cuBLASLt's kernels run after them and before anything enqueued later.
#include <cstdint>
#include <span>

#include "backend/cuda/kernels.h"
#include "backend/matmul_choice.h"

namespace specserve::cuda {

// Rows from which a free-order matmul takes this path (kFreeOrderMinRows, 33: above the gemv kernel's
// rows, where the streaming kernels are at the weight-bandwidth floor already; backend/matmul_choice.h).
int64_t free_order_min_rows();

// Enqueues every part (parts sharing x, M and K: q/k/v, gate/up, or one matmul) and returns true; or
// returns false, enqueuing nothing, when the call does not qualify: fewer rows than
// free_order_min_rows(), f32 weights, operands the tensor-core GEMMs cannot address (K or a leading
// dimension not a multiple of 8 elements, weights not 16-byte aligned), or no cuBLASLt algorithm for a
// part's shape. The caller then runs the row-invariant kernels. With `accumulate`, every part's y
// becomes x · wᵀ + y (the GEMM's epilogue reads y: Ops::matmul_accumulate).
bool matmul_free_order(std::span<const kernels::MatmulArgs> parts, bool accumulate = false);

// Calls of this path that read x's bf16 copy as its producer wrote it (kernels.h: XbOut) instead of
// converting x (tests check that the producers' copies are used).
uint64_t free_order_xb_reused();
// Matmuls enqueued through this path so far in the process (tests check the path was taken).
uint64_t free_order_matmuls();

// The algorithm of an M is the heuristic's for its row bucket (the next power of two, at least 64),
// checked once for that M (cublasLtMatmulAlgoCheck); an M the bucket's algorithm does not run gets the
// heuristic's for itself. So a heuristic query is paid once per bucket of a weight shape, not once per
// row count (the drafter's M changes almost every step).
int64_t free_order_row_bucket(int64_t M);
// cuBLASLt heuristic queries so far, and Ms whose bucket's algorithm failed the check (tests check
// that row counts of one bucket share one query).
uint64_t free_order_heuristic_queries();
uint64_t free_order_bucket_fallbacks();

// Attention under MatmulOrder::Free goes to kernels::attention_free (a sequence's rows share its
// tensor-core tiles) where attention_free_plan takes the call.
// Attention calls that took it so far in the process (tests check the path was taken).
uint64_t free_order_attentions();
void count_free_order_attention();

}  // namespace specserve::cuda
