#include "backend/cuda/matmul_free_order.h"

#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/step_graphs.h"
#include "core/error.h"

namespace specserve::cuda {

namespace {

#define LT_CHECK(expr)                                                                               \
  do {                                                                                               \
    const cublasStatus_t ss_lt_status_ = (expr);                                                     \
    if (ss_lt_status_ != CUBLAS_STATUS_SUCCESS)                                                      \
      ::specserve::fail("cuBLASLt: {} failed: {} ({})", #expr, cublasGetStatusString(ss_lt_status_), \
                        static_cast<int>(ss_lt_status_));                                            \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // the largest the heuristic asked for: ~10 MiB

// The largest power of two up to 256 dividing both the address and a column's byte stride: what
// cuBLASLt may assume about the operand's alignment.
uint32_t alignment(const void* p, int64_t ld, size_t elem_bytes) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(ld) * elem_bytes | 256;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// One GEMM shape as cuBLASLt sees it, with what its algorithm may assume.
struct Shape {
  int64_t M, N, K, ldw, pitch, ldy;
  uint32_t align_w, align_x, align_y;
  bool operator==(const Shape&) const = default;
};
struct ShapeHash {
  size_t operator()(const Shape& s) const {
    size_t h = 1469598103934665603ull;
    for (int64_t v : {s.M, s.N, s.K, s.ldw, s.pitch, s.ldy, int64_t{s.align_w}, int64_t{s.align_x}, int64_t{s.align_y}})
      h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

// cuBLASLt descriptors of one shape: A = the weights (K × N column major, i.e. w [N, K] row major,
// transposed), B = x's bf16 copy (K × M, pitch), D = y (N × M, ldy): D = Aᵀ · B, which is y = x · wᵀ.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  explicit Descriptors(const Shape& s) {
    LT_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT_CHECK(
        cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, static_cast<uint64_t>(s.K), static_cast<uint64_t>(s.N), s.ldw));
    LT_CHECK(
        cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, static_cast<uint64_t>(s.K), static_cast<uint64_t>(s.M), s.pitch));
    LT_CHECK(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, static_cast<uint64_t>(s.N), static_cast<uint64_t>(s.M), s.ldy));
  }
  ~Descriptors() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// The algorithm is chosen per row bucket, not per row count (row_bucket_of: the next power of two, at
// least 64). The drafter's context projection and propose see a different M almost every step (the
// committed rows vary), and a heuristic query (cublasLtMatmulAlgoGetHeuristic) and four new descriptors
// per new M cost host time before the GEMMs of nearly every drafting step: ~4 ms of GPU idle gaps in a
// probe's propose at 64 sequences. A bucket's algorithm is the heuristic's for the bucket's largest M (a
// tile configuration chosen for M_b runs any M <= M_b, at worst with tiles up to twice as tall as M
// needs). It is checked once for each M of the bucket (cublasLtMatmulAlgoCheck: whether it supports the
// shape, and the workspace it needs); where the check fails, that M gets the heuristic's algorithm for
// itself. The free order allows a choice per bucket: under MatmulOrder::Free a row's bits may depend on
// M and on the rows beside it (docs/DESIGN.md §4: the drafter only, "drafts may depend on the batch,
// outputs never do"; docs/KERNELS.md, rule 6). The algorithm for an M is still a function of the shape
// alone (the bucket's heuristic, or the exact one), never of the order in which shapes were seen.
int64_t row_bucket_of(int64_t M) {
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(M, 64))));
}

// An algorithm the heuristic found within the workspace (or none).
struct Choice {
  bool usable = false;
  cublasLtMatmulAlgo_t algo{};
};

// One row bucket of one GEMM shape: its descriptors, made once at the bucket's M and set to each call's
// M before use (two attribute writes instead of four descriptors per new M), the bucket's algorithm, and
// for each M seen the algorithm that runs it.
struct Bucket {
  std::unique_ptr<Descriptors> desc;
  Choice choice;
  std::unordered_map<int64_t, Choice> rows;
};

// The process's cuBLASLt state: every call is enqueued on the one stream, so one workspace serves all.
struct LtState {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::unordered_map<Shape, Bucket, ShapeHash> buckets;  // Shape::M is the bucket's
};

// Bounds on the caches: a model's weight shapes times the buckets its row counts reach is a few dozen;
// the row counts of one bucket are at most the bucket's size (a cleared one costs a check per M again).
constexpr size_t kMaxBuckets = 1024;
constexpr size_t kMaxRowsPerBucket = 4096;

// The current device's (device_scope.h: its handle, workspace and plans); lives to the process's end (no
// teardown order with the driver).
LtState& lt_state() {
  static PerDevice<LtState> per;
  return per.get(current_device(), [](int) { return new LtState; });
}

std::atomic<uint64_t> g_heuristic_queries{0};
std::atomic<uint64_t> g_bucket_fallbacks{0};

void set_rows(const Descriptors& desc, int64_t M) {
  const auto m = static_cast<uint64_t>(M);
  LT_CHECK(cublasLtMatrixLayoutSetAttribute(desc.b, CUBLASLT_MATRIX_LAYOUT_COLS, &m, sizeof m));
  LT_CHECK(cublasLtMatrixLayoutSetAttribute(desc.d, CUBLASLT_MATRIX_LAYOUT_COLS, &m, sizeof m));
}

// The heuristic's algorithm for the shape `desc` describes now (alignments from `s`).
Choice heuristic(LtState& lt, const Shape& s, const Descriptors& desc) {
  g_heuristic_queries.fetch_add(1, std::memory_order_relaxed);
  cublasLtMatmulPreference_t pref = nullptr;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &s.align_w, sizeof s.align_w);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &s.align_x, sizeof s.align_x);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &s.align_y, sizeof s.align_y);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &s.align_y, sizeof s.align_y);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt.handle, desc.op, desc.a, desc.b, desc.d, desc.d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  Choice c;
  if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
      result.workspaceSize <= kWorkspaceBytes) {
    c.usable = true;
    c.algo = result.algo;
  }
  return c;
}

// Whether `algo` runs the shape `desc` describes now within the workspace.
bool algo_runs(LtState& lt, const Descriptors& desc, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t st = cublasLtMatmulAlgoCheck(lt.handle, desc.op, desc.a, desc.b, desc.d, desc.d, &algo, &result);
  return st == CUBLAS_STATUS_SUCCESS && result.state == CUBLAS_STATUS_SUCCESS &&
         result.workspaceSize <= kWorkspaceBytes;
}

// The descriptors (set to s.M) and the algorithm for shape `s`; held by address until the buckets are
// cleared (matmul_free_order clears them before its lookups).
struct Plan {
  const Descriptors* desc = nullptr;
  Choice choice;
};

Plan plan_for(LtState& lt, const Shape& s) {
  Shape key = s;
  key.M = row_bucket_of(s.M);
  Bucket& bucket = lt.buckets[key];
  if (!bucket.desc) {  // new (or its descriptors failed before)
    bucket.desc = std::make_unique<Descriptors>(key);
    bucket.choice = heuristic(lt, key, *bucket.desc);
  }
  set_rows(*bucket.desc, s.M);
  auto row = bucket.rows.find(s.M);
  if (row == bucket.rows.end()) {
    if (bucket.rows.size() >= kMaxRowsPerBucket) bucket.rows.clear();
    Choice c = bucket.choice;
    if (!c.usable || !algo_runs(lt, *bucket.desc, c.algo)) {
      // The bucket's algorithm does not take this M (or the bucket has none): the heuristic's for M itself.
      if (c.usable) g_bucket_fallbacks.fetch_add(1, std::memory_order_relaxed);
      c = heuristic(lt, s, *bucket.desc);
    }
    row = bucket.rows.emplace(s.M, c).first;
  }
  return {bucket.desc.get(), row->second};
}

std::atomic<uint64_t> g_free_order_matmuls{0};
std::atomic<uint64_t> g_free_order_xb_reused{0};

bool qualifies(std::span<const kernels::MatmulArgs> parts) {
  const int64_t min_rows = free_order_min_rows();
  if (parts.empty() || min_rows <= 0) return false;
  const kernels::MatmulArgs& p0 = parts[0];
  if (p0.M < min_rows || p0.K % 8 != 0) return false;
  for (const auto& p : parts) {
    if (!p.w_bf16 || p.x != p0.x || p.ldx != p0.ldx || p.M != p0.M || p.K != p0.K) return false;
    if (p.ldw % 8 != 0 || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 || p.ldy < p.N || p.N <= 0) return false;
  }
  return true;
}

}  // namespace

int64_t free_order_min_rows() { return kFreeOrderMinRows; }

uint64_t free_order_matmuls() { return g_free_order_matmuls.load(std::memory_order_relaxed); }
uint64_t free_order_xb_reused() { return g_free_order_xb_reused.load(std::memory_order_relaxed); }
int64_t free_order_row_bucket(int64_t M) { return row_bucket_of(M); }
uint64_t free_order_heuristic_queries() { return g_heuristic_queries.load(std::memory_order_relaxed); }
uint64_t free_order_bucket_fallbacks() { return g_bucket_fallbacks.load(std::memory_order_relaxed); }

namespace {
std::atomic<uint64_t> g_free_order_attentions{0};
}  // namespace

uint64_t free_order_attentions() { return g_free_order_attentions.load(std::memory_order_relaxed); }
void count_free_order_attention() { g_free_order_attentions.fetch_add(1, std::memory_order_relaxed); }

bool matmul_free_order(std::span<const kernels::MatmulArgs> parts, bool accumulate) {
  if (!qualifies(parts)) return false;
  LtState& lt = lt_state();
  std::lock_guard lock(lt.mutex);
  if (lt.handle == nullptr) {
    LT_CHECK(cublasLtCreate(&lt.handle));
    CUDA_CHECK(cudaMalloc(&lt.workspace, kWorkspaceBytes));
  }
  const kernels::MatmulArgs& p0 = parts[0];
  // x's bf16 copy as its producer wrote it (kernels.h: XbOut, pitch ldxb: the same rounding), else made here.
  const bool reuse = p0.xb != nullptr && p0.ldxb >= p0.K;
  const int64_t pitch = reuse ? p0.ldxb : (p0.K + 15) / 16 * 16;
  // The scratch block holding x's copy is 256-byte aligned; rows are pitch elements apart.
  const uint32_t align_x = alignment(nullptr, pitch, 2);
  constexpr size_t kMaxParts = 8;
  if (parts.size() > kMaxParts) return false;
  // Bounded (cleared before the lookups: the plans below hold buckets by address, which an unordered_map
  // keeps until an erase).
  if (lt.buckets.size() + kMaxParts > kMaxBuckets) lt.buckets.clear();
  Plan plans[kMaxParts];
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& p = parts[i];
    const Shape s{p.M, p.N, p.K, p.ldw, pitch, p.ldy, alignment(p.w, p.ldw, 2), align_x, alignment(p.y, p.ldy, 4)};
    plans[i] = plan_for(lt, s);
    if (!plans[i].choice.usable) return false;
  }
  const uint16_t* xb = reuse ? p0.xb : kernels::matmul_x_to_bf16(p0.x, p0.ldx, p0.M, p0.K, pitch, launch_stream());
  if (reuse) g_free_order_xb_reused.fetch_add(1, std::memory_order_relaxed);
  SS_CHECK(reinterpret_cast<uintptr_t>(xb) % 256 == 0, "free-order matmul: x's bf16 copy is not 256-byte aligned");
  const cudaStream_t stream = cuda_stream();                  // the pre-pass and every launch before it, then cuBLASLt
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;  // accumulate: y = x · wᵀ + y (C = D = y)
  for (size_t i = 0; i < parts.size(); ++i) {
    // Parts of one shape share their bucket's descriptors, set to this call's M: the same for every part.
    const Descriptors& desc = *plans[i].desc;
    LT_CHECK(cublasLtMatmul(lt.handle, desc.op, &alpha, parts[i].w, desc.a, xb, desc.b, &beta, parts[i].y, desc.d,
                            parts[i].y, desc.d, &plans[i].choice.algo, lt.workspace, kWorkspaceBytes, stream));
  }
  g_free_order_matmuls.fetch_add(parts.size(), std::memory_order_relaxed);
  return true;
}

}  // namespace specserve::cuda
