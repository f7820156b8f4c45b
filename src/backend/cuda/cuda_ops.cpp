// cuda_ops(), and what its ops share (cuda_ops_impl.h): operand checks (the CPU backend's, plus "on
// the device"), the staging of KV rows, and the notes of a producer's bf16 output copy (XbNote).
#include "backend/cuda/cuda_ops.h"

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/matmul_free_order.h"
#include "backend/cuda/staging.h"
#include "backend/cuda/step_graphs.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace specserve {

namespace cuda {

void on_device(const char* op, const TensorView& v) {
  SS_CHECK(v.device == Device::CUDA, "{}: operand {} is not on the CUDA device", op, v.describe());
}

void check_same(const char* op, const TensorView& a, const TensorView& b) {
  on_device(op, a);
  on_device(op, b);
  SS_CHECK(a.dtype == DType::F32 && b.dtype == DType::F32 && a.is_contiguous() && b.is_contiguous() &&
               a.numel() == b.numel(),
           "{}: contiguous f32 operands of equal size expected ({}, {})", op, a.describe(), b.describe());
}

void check_matmul(const TensorView& x, const TensorView& w, const TensorView& y) {
  on_device("matmul", x);
  on_device("matmul", w);
  on_device("matmul", y);
  check_matmul_operands(x, w, y);
}

void check_norm(const char* op, const TensorView& x, const TensorView& y, const TensorView& w) {
  on_device(op, x);
  on_device(op, y);
  on_device(op, w);
  SS_CHECK(x.dtype == DType::F32 && y.dtype == DType::F32 && w.dtype == DType::F32, "{}: f32 operands expected", op);
  SS_CHECK(x.is_contiguous() && y.is_contiguous() && w.is_contiguous(), "{}: contiguous operands expected", op);
  SS_CHECK(w.numel() > 0 && x.numel() % w.numel() == 0 && y.numel() == x.numel(),
           "{}: x {} / y {} not a whole number of groups of {}", op, x.describe(), y.describe(), w.numel());
}

StagedKv stage_kv(cuda::Staging& staging, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows) {
  SS_CHECK(geo.dtype == DType::F32 || geo.dtype == DType::BF16, "a KV cache of {} is not supported",
           dtype_name(geo.dtype));
  std::unordered_map<const void* const*, int64_t> blocks_needed;
  for (const auto& row : rows) {
    SS_CHECK(row.blocks != nullptr && row.position >= 0, "KV row without a block table or with position {}",
             row.position);
    int64_t& n = blocks_needed[row.blocks];
    n = std::max<int64_t>(n, row.position / kKvBlockSize + 1);
  }
  std::vector<void*> ptrs;
  std::unordered_map<const void* const*, int64_t> table_start;
  for (const auto& row : rows) {
    auto [it, fresh] = table_start.try_emplace(row.blocks, static_cast<int64_t>(ptrs.size()));
    if (fresh) {
      const int64_t n = blocks_needed[row.blocks];
      for (int64_t b = 0; b < n; ++b) ptrs.push_back(row.blocks[b]);
    }
  }
  std::vector<k::KvRow> krows(rows.size());
  for (size_t r = 0; r < rows.size(); ++r)
    krows[r] = {table_start[rows[r].blocks], rows[r].position, rows[r].window_start};
  // The rows first: the block tables grow with the sequences, and a step's graph nodes (step_graphs.h)
  // keep their arguments when only the bytes after the rows change length.
  cuda::StagingBlob blob;
  const size_t off_rows = blob.append(krows.data(), krows.size());
  const size_t off_ptrs = blob.append(ptrs.data(), ptrs.size());
  auto* base = static_cast<char*>(staging.stage(blob.data(), blob.size()));
  StagedKv s;
  s.host_rows = std::move(krows);
  s.args.ptrs = reinterpret_cast<void* const*>(base + off_ptrs);
  s.args.bf16 = geo.bf16();
  s.args.rows = reinterpret_cast<const k::KvRow*>(base + off_rows);
  s.args.R = static_cast<int64_t>(rows.size());
  s.args.layer = layer;
  s.args.num_kv_heads = geo.num_kv_heads;
  s.args.head_dim = geo.head_dim;
  return s;
}

namespace {

// The bf16 copy (kernels.h: XbOut) the last producer op on this thread wrote of its output, for the
// matmul that consumes that output next. It is used only when the matmul's x is exactly that output
// and nothing was enqueued on any stream since (cuda::stream_ops()), so no kernel or copy can have
// changed x or the copy in between; otherwise the matmul converts x itself. Either way the same bits.
struct XbNote {
  const void* x = nullptr;
  int64_t ldx = 0, M = 0, K = 0;
  k::XbOut xb;
  k::Fp8Activations xq;  // or its quantised copy (the fp8 SwiGLU form's)
  uint64_t stamp = 0;
};
thread_local XbNote t_xb_note;

}  // namespace

k::XbOut xb_for(int64_t M, int64_t K) {
  const bool free =
      t_matmul_order == MatmulOrder::Free && cuda::free_order_min_rows() > 0 && M >= cuda::free_order_min_rows();
  return k::matmul_xb_out(M, K, cuda::launch_stream(), free);
}

void note_xb(const void* x, int64_t ldx, int64_t M, int64_t K, const k::XbOut& xb) {
  if (xb.regs == nullptr) return;
  t_xb_note = {x, ldx, M, K, xb, {}, cuda::stream_ops()};
}

void note_fp8_activations(const void* x, int64_t ldx, int64_t M, int64_t K, const k::Fp8Activations& xq) {
  if (xq.codes == nullptr) return;
  t_xb_note = {x, ldx, M, K, {}, xq, cuda::stream_ops()};
}

void take_xb(k::MatmulArgs& a) {
  const XbNote& n = t_xb_note;
  if (n.stamp != cuda::stream_ops() || n.x != a.x || n.ldx != a.ldx || n.M != a.M || n.K != a.K) return;
  if (n.xb.regs != nullptr) {
    a.xb = reinterpret_cast<const uint16_t*>(n.xb.regs);
    a.ldxb = n.xb.pitch;
  }
  a.xq = n.xq;
}

}  // namespace cuda

const Ops& cuda_ops() {
  static const cuda::CudaOps ops;
  return ops;
}

}  // namespace specserve
