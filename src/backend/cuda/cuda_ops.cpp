// cuda_ops(): operand checks (the CPU backend's, plus "on the device"), staging of host metadata, and
// the kernel launches of backend/cuda/kernels.h.
#include "backend/cuda/cuda_ops.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/op_checks.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_free_order.h"
#include "backend/cuda/staging.h"
#include "backend/cuda/step_graphs.h"
#include "backend/head_rows.h"
#include "core/error.h"

namespace specserve {

namespace {

namespace k = cuda::kernels;

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

// The rows' block tables, deduplicated by host table (rows of one sequence share it), and the rows
// (staged, and their host copy).
struct StagedKv {
  k::KvArgs args;
  std::vector<k::KvRow> host_rows;
};

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

// The bf16 copy (kernels.h: XbOut) the last producer op on this thread wrote of its output, for the
// matmul that consumes that output next. It is used only when the matmul's x is exactly that output
// and nothing was enqueued on any stream since (cuda::stream_ops()), so no kernel or copy can have
// changed x or the copy in between; otherwise the matmul converts x itself. Either way the same bits.
struct XbNote {
  const void* x = nullptr;
  int64_t ldx = 0, M = 0, K = 0;
  k::XbOut xb;
  uint64_t stamp = 0;
};
thread_local XbNote t_xb_note;

// The matmul order this thread asked for (Ops::set_matmul_order).
thread_local MatmulOrder t_matmul_order = MatmulOrder::RowInvariant;

// The XbOut for a producer's [M, K] output, or {} when no matmul of it would read one (the gemv kernel's
// rows, or under the free order the cuBLASLt path's).
k::XbOut xb_for(int64_t M, int64_t K) {
  const bool free =
      t_matmul_order == MatmulOrder::Free && cuda::free_order_min_rows() > 0 && M >= cuda::free_order_min_rows();
  return k::matmul_xb_out(M, K, cuda::launch_stream(), free);
}

// Right after the producer's launch: its output x [M, K] (row stride ldx) has the copy xb.
void note_xb(const void* x, int64_t ldx, int64_t M, int64_t K, const k::XbOut& xb) {
  if (xb.regs == nullptr) return;
  t_xb_note = {x, ldx, M, K, xb, cuda::stream_ops()};
}

// A matmul's args take the noted copy when it is of their x.
void take_xb(k::MatmulArgs& a) {
  const XbNote& n = t_xb_note;
  if (n.xb.regs == nullptr || n.stamp != cuda::stream_ops() || n.x != a.x || n.ldx != a.ldx || n.M != a.M || n.K != a.K)
    return;
  a.xb = reinterpret_cast<const uint16_t*>(n.xb.regs);
  a.ldxb = n.xb.pitch;
}

class CudaOps final : public Ops {
 public:
  std::string_view name() const override { return "cuda"; }

  MatmulOrder set_matmul_order(MatmulOrder order) const override { return std::exchange(t_matmul_order, order); }

  void matmul(const TensorView& x, const TensorView& w, const TensorView& y) const override {
    check_matmul(x, w, y);
    const k::MatmulArgs a = matmul_args(x, w, y);
    k::matmul_run(&a, 1, t_matmul_order, cuda::launch_stream());
  }

  bool matmul_accumulate(const TensorView& x, const TensorView& w, const TensorView& y) const override {
    check_matmul(x, w, y);
    const k::MatmulArgs a = matmul_args(x, w, y);
    // Only the free-order GEMM adds in its epilogue (ops.h); any other choice: the caller adds.
    if (choose_matmul(MatmulBackend::Cuda, t_matmul_order, a.M, a.K, k::matmul_weight(a), k::matmul_device()) !=
        MatmulKernel::FreeOrder)
      return false;
    return cuda::matmul_free_order({&a, 1}, /*accumulate=*/true);
  }

  static k::MatmulArgs matmul_args(const TensorView& x, const TensorView& w, const TensorView& y) {
    k::MatmulArgs a;
    a.x = x.as<const float>();
    a.ldx = x.strides[0];
    a.w = w.data;
    a.w_bf16 = w.dtype == DType::BF16;
    a.ldw = w.strides[0];
    if (w.block_scaled()) {  // fp8 codes and their scales (kernels.h)
      a.w_scales = w.scales;
      a.scale_ld = w.scale_shape()[1];
    }
    a.y = y.as<float>();
    a.ldy = y.strides[0];
    a.M = x.dim(0);
    a.N = w.dim(0);
    a.K = x.dim(1);
    take_xb(a);
    return a;
  }

  // The weights that share a launch share it (backend/matmul_choice.h: plan_matmul); the bits are
  // those of one matmul per weight either way.
  void matmul_multi(const TensorView& x, std::span<const TensorView> ws,
                    std::span<const TensorView> ys) const override {
    run_multi(x, ws, ys, t_matmul_order);
  }

  void matmul_prefill(const TensorView& x, const TensorView& w, const TensorView& y) const override {
    check_matmul(x, w, y);
    const k::MatmulArgs a = matmul_args(x, w, y);
    k::matmul_run(&a, 1, MatmulOrder::Prefill, cuda::launch_stream());
  }

  bool matmul_prefill_swiglu(const TensorView& x, const TensorView& gate, const TensorView& up,
                             const TensorView& out) const override {
    check_matmul(x, gate, out);
    check_matmul(x, up, out);
    const k::MatmulArgs g = matmul_args(x, gate, out), u = matmul_args(x, up, out);
    // Only where the choice gives both weights the prefill GEMM (backend/matmul_choice.h).
    for (const k::MatmulArgs* a : {&g, &u})
      if (choose_matmul(MatmulBackend::Cuda, MatmulOrder::Prefill, a->M, a->K, k::matmul_weight(*a),
                        k::matmul_device()) != MatmulKernel::Prefill)
        return false;
    const k::XbOut xb = k::matmul_xb_out_beside_x(out.dim(0), out.dim(1), cuda::launch_stream());
    if (!k::matmul_bf16_prefill_swiglu(g, u, xb, cuda::launch_stream())) return false;
    note_xb(out.data, out.strides[0], out.dim(0), out.dim(1), xb);
    return true;
  }

  void matmul_multi_prefill(const TensorView& x, std::span<const TensorView> ws,
                            std::span<const TensorView> ys) const override {
    run_multi(x, ws, ys, MatmulOrder::Prefill);
  }

  static void run_multi(const TensorView& x, std::span<const TensorView> ws, std::span<const TensorView> ys,
                        MatmulOrder order) {
    SS_CHECK(ws.size() == ys.size(), "matmul_multi: {} weights but {} outputs", ws.size(), ys.size());
    for (size_t i = 0; i < ws.size(); ++i) check_matmul(x, ws[i], ys[i]);
    std::vector<k::MatmulArgs> args;
    for (size_t i = 0; i < ws.size(); ++i) args.push_back(matmul_args(x, ws[i], ys[i]));
    k::matmul_run(args.data(), static_cast<int>(args.size()), order, cuda::launch_stream());
  }

  void embedding(const TensorView& table, std::span<const int32_t> ids, const TensorView& out) const override {
    on_device("embedding", table);
    on_device("embedding", out);
    SS_CHECK(table.ndim() == 2 && table.is_contiguous() && (table.dtype == DType::F32 || table.dtype == DType::BF16),
             "embedding: table {} must be a contiguous f32/bf16 matrix", table.describe());
    SS_CHECK(out.dtype == DType::F32 && out.ndim() == 2 && out.is_contiguous() && out.dim(1) == table.dim(1) &&
                 out.dim(0) == static_cast<int64_t>(ids.size()),
             "embedding: output {} for {} ids of width {}", out.describe(), ids.size(), table.dim(1));
    for (int32_t id : ids)
      SS_CHECK(id >= 0 && id < table.dim(0), "token id {} outside the vocabulary [0, {})", id, table.dim(0));
    if (ids.empty()) return;
    auto& staging = cuda::Staging::global();
    auto lock = staging.lock();
    const auto* d_ids = static_cast<const int32_t*>(staging.stage(ids.data(), ids.size_bytes()));
    k::embedding(table.data, table.dtype == DType::BF16, table.dim(1), d_ids, static_cast<int64_t>(ids.size()),
                 out.as<float>(), cuda::launch_stream());
  }

  void rms_norm(const TensorView& x, const TensorView& w, NormKind kind, float eps,
                const TensorView& y) const override {
    check_norm("rms_norm", x, y, w);
    const int64_t d = w.numel(), groups = x.numel() / d;
    const k::XbOut xb = xb_for(groups, d);
    k::rms_norm(x.as<const float>(), w.as<const float>(), y.as<float>(), groups, d, kind == NormKind::Plain ? 0 : 1,
                eps, cuda::launch_stream(), xb);
    note_xb(y.data, d, groups, d, xb);
  }

  void rms_norm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                      const TensorView& y) const override {
    check_norm("rms_norm_gated", x, y, w);
    on_device("rms_norm_gated", z);
    SS_CHECK(z.dtype == DType::F32 && z.is_contiguous() && z.numel() == x.numel(), "rms_norm_gated: gate {} vs x {}",
             z.describe(), x.describe());
    const int64_t d = w.numel();
    k::rms_norm_gated(x.as<const float>(), z.as<const float>(), w.as<const float>(), y.as<float>(), x.numel() / d, d,
                      eps, cuda::launch_stream());
  }

  void rope(const TensorView& x, int heads, int head_dim, int rot_dim, double theta,
            std::span<const int32_t> positions) const override {
    on_device("rope", x);
    check_rope_operands(x, heads, head_dim, rot_dim, positions.size());
    if (positions.empty()) return;
    const std::vector<float> inv_freq = rope_inv_freq(theta, rot_dim);  // the CPU's exact f32 angles
    cuda::StagingBlob blob;
    const size_t off_f = blob.append(inv_freq.data(), inv_freq.size());
    const size_t off_p = blob.append(positions.data(), positions.size());
    auto& staging = cuda::Staging::global();
    auto lock = staging.lock();
    auto* base = static_cast<char*>(staging.stage(blob.data(), blob.size()));
    k::rope(x.as<float>(), x.dim(0), x.strides[0], heads, head_dim, rot_dim,
            reinterpret_cast<const float*>(base + off_f), reinterpret_cast<const int32_t*>(base + off_p),
            cuda::launch_stream());
  }

  void swiglu(const TensorView& gate, const TensorView& up, const TensorView& out) const override {
    check_same("swiglu", gate, up);
    check_same("swiglu", gate, out);
    const k::XbOut xb = out.ndim() == 2 ? xb_for(out.dim(0), out.dim(1)) : k::XbOut{};
    if (xb.regs == nullptr)
      return k::swiglu(gate.as<const float>(), up.as<const float>(), out.as<float>(), gate.numel(),
                       cuda::launch_stream());
    k::swiglu_xb(gate.as<const float>(), up.as<const float>(), out.as<float>(), out.dim(0), out.dim(1), xb,
                 cuda::launch_stream());
    note_xb(out.data, out.dim(1), out.dim(0), out.dim(1), xb);
  }

  void add(const TensorView& x, const TensorView& y) const override {
    check_same("add", x, y);
    k::add(x.as<float>(), y.as<const float>(), x.numel(), cuda::launch_stream());
  }

  void add_rms_norm(const TensorView& x, const TensorView& y, const TensorView& w, NormKind kind, float eps,
                    const TensorView& out) const override {
    check_same("add_rms_norm", x, y);
    check_norm("add_rms_norm", x, out, w);
    SS_CHECK(out.data != x.data && out.data != y.data, "add_rms_norm: out must not alias x or y");
    const int64_t d = w.numel(), groups = x.numel() / d;
    const k::XbOut xb = xb_for(groups, d);
    k::add_rms_norm(x.as<float>(), y.as<const float>(), w.as<const float>(), out.as<float>(), groups, d,
                    kind == NormKind::Plain ? 0 : 1, eps, cuda::launch_stream(), xb);
    note_xb(out.data, d, groups, d, xb);
  }

  void mul_sigmoid(const TensorView& x, const TensorView& gate) const override {
    if (gate.ndim() == 3) {  // heads read in place (head_rows.h)
      on_device("mul_sigmoid", x);
      on_device("mul_sigmoid", gate);
      SS_CHECK(x.dtype == DType::F32 && x.ndim() == 2 && x.is_contiguous(),
               "mul_sigmoid: x {} must be contiguous f32 rows for the gate {}", x.describe(), gate.describe());
      const HeadRows g =
          check_head_rows("mul_sigmoid", gate, static_cast<int>(gate.dim(1)), static_cast<int>(gate.dim(2)));
      SS_CHECK(x.dim(0) == g.rows && x.dim(1) == int64_t{g.heads} * g.head_dim, "mul_sigmoid: x {} vs gate {}",
               x.describe(), gate.describe());
      k::mul_sigmoid_heads(x.as<float>(), gate.as<const float>(), g.rows, g.heads, g.head_dim, g.ld, g.head_stride,
                           cuda::launch_stream());
      return;
    }
    check_same("mul_sigmoid", x, gate);
    k::mul_sigmoid(x.as<float>(), gate.as<const float>(), x.numel(), cuda::launch_stream());
  }

  void argmax(const TensorView& x, int64_t n, std::span<int32_t> out) const override {
    on_device("argmax", x);
    check_argmax_operands(x, n, out.size());
    if (out.empty()) return;
    const Memory& mem = cuda_memory();
    Buffer ids(mem, out.size_bytes());
    Buffer scratch(mem, static_cast<size_t>(k::argmax_scratch_bytes(x.dim(0), n)));
    k::argmax(x.as<const float>(), x.strides[0], x.dim(0), n, static_cast<int32_t*>(ids.data()), scratch.data(),
              cuda::launch_stream());
    mem.download(out.data(), ids.data(), out.size_bytes());
  }

  void kv_store(const TensorView& kt, const TensorView& v, const KvGeometry& geo, int layer,
                std::span<const AttentionRow> rows) const override {
    on_device("kv_store", kt);
    on_device("kv_store", v);
    const int64_t width = int64_t{geo.num_kv_heads} * geo.head_dim;
    SS_CHECK(kt.dtype == DType::F32 && v.dtype == DType::F32 && kt.ndim() == 2 && v.ndim() == 2 && kt.dim(1) == width &&
                 v.dim(1) == width && kt.strides[1] == 1 && v.strides[1] == 1,
             "kv_store: k {} / v {} must be f32 [rows, {}]", kt.describe(), v.describe(), width);
    SS_CHECK(kt.dim(0) == static_cast<int64_t>(rows.size()) && v.dim(0) == kt.dim(0), "kv_store: {} rows for {} specs",
             kt.dim(0), rows.size());
    SS_CHECK(layer >= 0 && layer < geo.num_layers, "kv_store: layer {} outside [0, {})", layer, geo.num_layers);
    if (rows.empty()) return;
    auto& staging = cuda::Staging::global();
    auto lock = staging.lock();
    const StagedKv s = stage_kv(staging, geo, layer, rows);
    k::kv_store(s.args, kt.as<const float>(), kt.strides[0], v.as<const float>(), v.strides[0], cuda::launch_stream());
  }

  // The same operand checks as the calls it fuses (rms_norm, rope, kv_store), then one launch.
  void qk_norm_rope_kv_store(const TensorView& q, const TensorView& kt, const TensorView& v, const QkPrep& prep,
                             const KvGeometry& geo, int layer, std::span<const AttentionRow> rows) const override {
    SS_CHECK(q.ndim() == 2 && q.dim(0) == static_cast<int64_t>(rows.size()), "qk_norm_rope_kv_store: q {} for {} rows",
             q.describe(), rows.size());
    head_prep(q, q, {}, true, kt, v, prep, geo, layer, rows);
  }
  void qk_norm_rope_kv_store_from(const TensorView& q_in, const TensorView& q_out, const TensorView& kt,
                                  const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                                  std::span<const AttentionRow> rows) const override {
    SS_CHECK(q_out.ndim() == 2 && q_out.dim(0) == static_cast<int64_t>(rows.size()),
             "qk_norm_rope_kv_store: q {} for {} rows", q_out.describe(), rows.size());
    head_prep(q_in, q_out, {}, true, kt, v, prep, geo, layer, rows);
  }
  void qk_norm_rope_kv_store_rows(const TensorView& q, std::span<const int32_t> q_positions, const TensorView& kt,
                                  const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                                  std::span<const AttentionRow> kv_rows) const override {
    head_prep(q, q, q_positions, false, kt, v, prep, geo, layer, kv_rows);
  }
  // Both head preparations in one launch (head_prep.cu); q's positions are the KV rows' when
  // q_at_kv_rows, else q_positions (staged with the rows). q's heads are read from q_in (q itself, or
  // a head_rows.h view of as many rows and heads) and written to q.
  void head_prep(const TensorView& q_in, const TensorView& q, std::span<const int32_t> q_positions, bool q_at_kv_rows,
                 const TensorView& kt, const TensorView& v, const QkPrep& prep, const KvGeometry& geo, int layer,
                 std::span<const AttentionRow> rows) const {
    const int hd = geo.head_dim;
    const int heads = check_qk_heads(q, hd);
    const size_t q_rows = q_at_kv_rows ? rows.size() : q_positions.size();
    if (q.dim(0) > 0) check_norm("qk_norm_rope_kv_store", q, q, prep.q_norm);
    if (q.dim(0) > 0) on_device("qk_norm_rope_kv_store", q_in);
    const HeadRows in = check_head_rows("qk_norm_rope_kv_store", q_in, heads, hd);
    SS_CHECK(in.rows == q.dim(0), "qk_norm_rope_kv_store: q_in {} for q {}", q_in.describe(), q.describe());
    check_norm("qk_norm_rope_kv_store", kt, kt, prep.k_norm);
    SS_CHECK(prep.q_norm.numel() == hd && prep.k_norm.numel() == hd,
             "qk_norm_rope_kv_store: head norms {} / {} for head_dim {}", prep.q_norm.describe(),
             prep.k_norm.describe(), hd);
    check_rope_operands(q, heads, hd, prep.rot_dim, q_rows);
    check_rope_operands(kt, geo.num_kv_heads, hd, prep.rot_dim, rows.size());
    on_device("qk_norm_rope_kv_store", v);
    SS_CHECK(
        v.dtype == DType::F32 && v.ndim() == 2 && v.dim(1) == kt.dim(1) && v.dim(0) == kt.dim(0) && v.strides[1] == 1,
        "qk_norm_rope_kv_store: k {} / v {} disagree", kt.describe(), v.describe());
    SS_CHECK(layer >= 0 && layer < geo.num_layers, "qk_norm_rope_kv_store: layer {} outside [0, {})", layer,
             geo.num_layers);
    if (rows.empty() && q_rows == 0) return;
    const std::vector<float> inv_freq = rope_inv_freq(prep.theta, prep.rot_dim);  // as rope()
    auto& staging = cuda::Staging::global();
    auto lock = staging.lock();
    const StagedKv s = stage_kv(staging, geo, layer, rows);
    k::HeadPrepArgs a;
    a.inv_freq = static_cast<const float*>(staging.stage(inv_freq.data(), inv_freq.size() * sizeof(float)));
    if (!q_at_kv_rows && !q_positions.empty())
      a.q_pos = static_cast<const int32_t*>(staging.stage(q_positions.data(), q_positions.size() * sizeof(int32_t)));
    a.q_rows = static_cast<int64_t>(q_rows);
    a.q = q.dim(0) > 0 ? q.as<float>() : nullptr;
    a.ldq = q.strides[0];
    a.q_in = q.dim(0) > 0 ? q_in.as<const float>() : nullptr;
    a.ldq_in = in.ld;
    a.q_head_stride = in.head_stride;
    a.k = kt.as<float>();
    a.ldk = kt.strides[0];
    a.v = v.as<const float>();
    a.ldv = v.strides[0];
    a.q_norm = prep.q_norm.as<const float>();
    a.k_norm = prep.k_norm.as<const float>();
    a.kind = prep.norm == NormKind::Plain ? 0 : 1;
    a.eps = prep.eps;
    a.num_heads = heads;
    a.rot_dim = prep.rot_dim;
    k::qk_norm_rope_kv_store(a, s.args, cuda::launch_stream());
  }

  void attention_prefill(const TensorView& q, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows,
                         int num_heads, float scale, const TensorView& out) const override {
    // The flash-attention kernel (attention_prefill.cu) for head dims 128 and 256 without windows; any other
    // call is served by attention() (deterministic per row too: it is row-invariant). out may be q: a CTA
    // reads its rows' q of its head before it writes their out.
    bool kernel = k::attention_prefill_supports(geo.head_dim) && !rows.empty();
    for (const auto& row : rows) kernel = kernel && row.window_start == 0;
    if (!kernel) {
      attention(q, geo, layer, rows, num_heads, scale, out);
      return;
    }
    on_device("attention_prefill", q);
    on_device("attention_prefill", out);
    const int64_t width = int64_t{num_heads} * geo.head_dim;
    SS_CHECK(q.dtype == DType::F32 && out.dtype == DType::F32 && q.ndim() == 2 && out.ndim() == 2 &&
                 q.dim(1) == width && out.dim(1) == width && q.strides[1] == 1 && out.strides[1] == 1,
             "attention_prefill: q {} / out {} must be f32 [rows, {}]", q.describe(), out.describe(), width);
    SS_CHECK(q.dim(0) == static_cast<int64_t>(rows.size()) && out.dim(0) == q.dim(0),
             "attention_prefill: {} rows for {} specs", q.dim(0), rows.size());
    SS_CHECK(geo.num_kv_heads > 0 && num_heads > 0 && num_heads % geo.num_kv_heads == 0,
             "attention_prefill: {} heads not a multiple of {} KV heads", num_heads, geo.num_kv_heads);
    SS_CHECK(layer >= 0 && layer < geo.num_layers, "attention_prefill: layer {} outside [0, {})", layer,
             geo.num_layers);
    auto& staging = cuda::Staging::global();
    auto lock = staging.lock();
    StagedKv s = stage_kv(staging, geo, layer, rows);
    s.args.host_rows = s.host_rows.data();
    const k::AttentionPrefillPlan plan = k::attention_prefill_plan(s.args);
    // The o projection's bf16 copy of out, written by the kernel (kernels.h: XbOut) where it can.
    const k::XbOut xb = k::attention_prefill_writes_xb(s.args) ? xb_for(q.dim(0), width) : k::XbOut{};
    k::attention_prefill(s.args, plan, q.as<const float>(), q.strides[0], num_heads, scale, out.as<float>(),
                         out.strides[0], cuda::launch_stream(), xb);
    note_xb(out.data, out.strides[0], q.dim(0), width, xb);
  }

  void attention(const TensorView& q, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows,
                 int num_heads, float scale, const TensorView& out) const override {
    on_device("attention", q);
    on_device("attention", out);
    const int hd = geo.head_dim;
    const int64_t width = int64_t{num_heads} * hd;
    SS_CHECK(q.dtype == DType::F32 && out.dtype == DType::F32 && q.ndim() == 2 && out.ndim() == 2 &&
                 q.dim(1) == width && out.dim(1) == width && q.strides[1] == 1 && out.strides[1] == 1,
             "attention: q {} / out {} must be f32 [rows, {}]", q.describe(), out.describe(), width);
    SS_CHECK(q.dim(0) == static_cast<int64_t>(rows.size()) && out.dim(0) == q.dim(0), "attention: {} rows for {} specs",
             q.dim(0), rows.size());
    SS_CHECK(geo.num_kv_heads > 0 && num_heads % geo.num_kv_heads == 0,
             "attention: {} heads not a multiple of {} KV heads", num_heads, geo.num_kv_heads);
    SS_CHECK(k::attention_supports(hd), "attention: head_dim {} unsupported on CUDA (a multiple of 32 up to 256)", hd);
    SS_CHECK(layer >= 0 && layer < geo.num_layers, "attention: layer {} outside [0, {})", layer, geo.num_layers);
    for (const auto& row : rows)
      SS_CHECK(row.window_start >= 0 && row.window_start <= row.position,
               "attention: window start {} outside [0, position {}]", row.window_start, row.position);
    SS_CHECK(k::attention_group_supported(num_heads, geo.num_kv_heads),
             "attention: {} query heads per KV head unsupported on CUDA (at most 16)", num_heads / geo.num_kv_heads);
    if (rows.empty()) return;
    int64_t chunks = 1;
    for (const auto& row : rows)
      chunks = std::max(chunks, k::attention_chunks(int64_t{row.position} + 1 - row.window_start));
    // The per-chunk partial results of at most ~64 MB of rows at a time.
    const int64_t per_row = k::attention_scratch_floats(1, num_heads, hd, chunks);
    const int64_t group = std::clamp<int64_t>((int64_t{16} << 20) / per_row, 1, static_cast<int64_t>(rows.size()));
    auto& staging = cuda::Staging::global();
    auto lock = staging.lock();
    StagedKv s = stage_kv(staging, geo, layer, rows);
    // The drafter's forward (MatmulOrder::Free) takes the free-order kernel where its plan does not decline.
    s.args.host_rows = s.host_rows.data();
    if (t_matmul_order == MatmulOrder::Free) {
      const k::AttentionFreePlan plan = k::attention_free_plan(s.args, num_heads);
      if (!plan.declined()) {
        Buffer part(cuda_memory(), static_cast<size_t>(plan.scratch_floats) * sizeof(float));
        k::attention_free(s.args, plan, q.as<const float>(), q.strides[0], num_heads, scale, out.as<float>(),
                          out.strides[0], static_cast<float*>(part.data()), cuda::launch_stream());
        cuda::count_free_order_attention();
        return;
      }
    }
    Buffer scratch(cuda_memory(), static_cast<size_t>(group * per_row) * sizeof(float));
    const k::KvRow* all_rows = s.args.rows;
    const int64_t R = s.args.R;
    // One launch (verify, decode): its combine kernel can write the output's copy for the o projection.
    const k::XbOut xb = group >= R ? xb_for(R, width) : k::XbOut{};
    for (int64_t r0 = 0; r0 < R; r0 += group) {
      s.args.rows = all_rows + r0;
      s.args.host_rows = s.host_rows.data() + r0;
      s.args.R = std::min(group, R - r0);
      k::attention(s.args, q.as<const float>() + r0 * q.strides[0], q.strides[0], num_heads, scale,
                   out.as<float>() + r0 * out.strides[0], out.strides[0], static_cast<float*>(scratch.data()), chunks,
                   cuda::launch_stream(), xb);
    }
    note_xb(out.data, out.strides[0], R, width, xb);
  }

  void causal_conv_silu(const TensorView& x, const TensorView& window, const TensorView& w,
                        const TensorView& out) const override {
    for (const TensorView* t : {&x, &window, &w, &out}) on_device("causal_conv_silu", *t);
    check_causal_conv_operands(x, window, w, out);
    const int64_t n = x.dim(0), C = x.dim(1), Kc = w.dim(1);
    SS_CHECK(n == 0 || x.data != out.data, "causal_conv_silu: out must not alias x on CUDA");
    k::causal_conv_silu(x.as<const float>(), x.strides[0], window.as<const float>(), w.as<const float>(),
                        out.as<float>(), out.strides[0], n, C, static_cast<int>(Kc), cuda::launch_stream());
  }

  void causal_conv_silu_spans(const TensorView& x, std::span<const ConvSpan> spans, const TensorView& w,
                              const TensorView& out) const override {
    std::vector<k::ConvSpanDev> dev;
    int64_t max_rows = 0;
    for (const auto& s : spans) {
      SS_CHECK(s.row_begin >= 0 && s.rows >= 0 && s.row_begin + s.rows <= x.dim(0) && x.dim(0) == out.dim(0),
               "causal_conv_silu: span [{}, {}) outside {} rows", s.row_begin, s.row_begin + s.rows, x.dim(0));
      const TensorView xs = x.rows(s.row_begin, s.row_begin + s.rows), os = out.rows(s.row_begin, s.row_begin + s.rows);
      for (const TensorView* t : {&xs, &s.window, &w, &os}) on_device("causal_conv_silu", *t);
      check_causal_conv_operands(xs, s.window, w, os);
      SS_CHECK(s.rows == 0 || x.data != out.data, "causal_conv_silu: out must not alias x on CUDA");
      if (s.rows == 0) continue;
      dev.push_back({s.window.as<const float>(), s.row_begin, s.rows});
      max_rows = std::max(max_rows, s.rows);
    }
    if (dev.empty()) return;
    auto& staging = cuda::Staging::global();
    auto lock = staging.lock();
    const auto* d = static_cast<const k::ConvSpanDev*>(staging.stage(dev.data(), dev.size() * sizeof(dev[0])));
    k::causal_conv_silu_spans(x.as<const float>(), x.strides[0], d, static_cast<int64_t>(dev.size()), max_rows,
                              w.as<const float>(), out.as<float>(), out.strides[0], x.dim(1),
                              static_cast<int>(w.dim(1)), cuda::launch_stream());
  }

  void gdn_prepare(const TensorView& qkv, const TensorView& a, const TensorView& b, const TensorView& a_log,
                   const TensorView& dt_bias, const GdnDims& dims) const override {
    for (const TensorView* t : {&qkv, &a, &b, &a_log, &dt_bias}) on_device("gdn_prepare", *t);
    const int64_t R = qkv.dim(0);
    SS_CHECK(qkv.dtype == DType::F32 && qkv.ndim() == 2 && qkv.dim(1) == dims.conv_dim() && qkv.strides[1] == 1,
             "gdn_prepare: qkv {} must be f32 [rows, {}]", qkv.describe(), dims.conv_dim());
    SS_CHECK(a.dtype == DType::F32 && b.dtype == DType::F32 && a.is_contiguous() && b.is_contiguous() &&
                 a.numel() == R * dims.num_v_heads && b.numel() == a.numel(),
             "gdn_prepare: a {} / b {} must be [rows, {}]", a.describe(), b.describe(), dims.num_v_heads);
    SS_CHECK(a_log.dtype == DType::F32 && dt_bias.dtype == DType::F32 && a_log.numel() == dims.num_v_heads &&
                 dt_bias.numel() == dims.num_v_heads,
             "gdn_prepare: A_log / dt_bias must be f32 [{}]", dims.num_v_heads);
    k::gdn_prepare(qkv.as<float>(), qkv.strides[0], a.as<float>(), b.as<float>(), a_log.as<const float>(),
                   dt_bias.as<const float>(), R, dims.num_k_heads, dims.num_v_heads, dims.k_dim, dims.v_dim,
                   cuda::launch_stream());
  }

  void gated_delta_rule(const TensorView& qkv, const TensorView& g, const TensorView& beta,
                        std::span<const GdnSpan> spans, const GdnDims& dims, const TensorView& out) const override {
    for (const TensorView* t : {&qkv, &g, &beta, &out}) on_device("gated_delta_rule", *t);
    const int64_t R = qkv.dim(0);
    SS_CHECK(qkv.dtype == DType::F32 && qkv.ndim() == 2 && qkv.dim(1) == dims.conv_dim() && qkv.strides[1] == 1,
             "gated_delta_rule: qkv {} must be f32 [rows, {}]", qkv.describe(), dims.conv_dim());
    SS_CHECK(g.dtype == DType::F32 && beta.dtype == DType::F32 && g.is_contiguous() && beta.is_contiguous() &&
                 g.numel() == R * dims.num_v_heads && beta.numel() == g.numel(),
             "gated_delta_rule: g / beta must be [rows, {}]", dims.num_v_heads);
    SS_CHECK(out.dtype == DType::F32 && out.ndim() == 2 && out.dim(0) == R && out.dim(1) == dims.value_dim() &&
                 out.strides[1] == 1,
             "gated_delta_rule: out {} must be [rows, {}]", out.describe(), dims.value_dim());
    SS_CHECK(dims.num_k_heads > 0 && dims.num_v_heads % dims.num_k_heads == 0,
             "gated_delta_rule: Hv {} not a multiple of Hk {}", dims.num_v_heads, dims.num_k_heads);
    SS_CHECK(k::gdn_rule_supports(dims.k_dim, dims.v_dim),
             "gated_delta_rule: dk {} / dv {} unsupported on CUDA (dk a multiple of 16, at most 512)", dims.k_dim,
             dims.v_dim);
    static_assert(k::kGdnChunkRows == kGdnChunk, "the chunked kernel's chunk is kGdnChunk");
    // Stepped spans run the token-by-token kernel, chunked spans the chunked one (each span's bits
    // depend only on its own rows and state, whichever spans share the call).
    std::vector<k::GdnSpanDev> stepped;
    std::vector<k::GdnChunkSpanDev> chunked;
    int64_t stepped_rows = 0;  // the longest stepped span
    for (const auto& s : spans) {
      SS_CHECK(s.row_begin >= 0 && s.rows >= 0 && s.row_begin + s.rows <= R, "gated_delta_rule: span out of range");
      SS_CHECK(s.state_in == nullptr || !s.chunked, "gated_delta_rule: state_in is for stepped spans only");
      SS_CHECK(s.rows == 0 || s.state != nullptr, "gated_delta_rule: span without a state");
      SS_CHECK(!s.chunked || s.position >= 0, "gated_delta_rule: chunked span at position {}", s.position);
      if (s.rows == 0) continue;
      if (s.chunked) {
        chunked.push_back({s.state, s.row_begin, s.rows, s.position});
      } else {
        stepped.push_back({s.state, s.state_in, s.row_begin, s.rows});
        stepped_rows = std::max(stepped_rows, s.rows);
      }
    }
    if (stepped.empty() && chunked.empty()) return;
    // The chunked kernels' scratch: a window of the call's chunks at a time (the window changes no bits).
    const int64_t chunks = k::gdn_number_chunks(chunked.data(), static_cast<int64_t>(chunked.size()));
    const int64_t window = k::gdn_chunked_window(chunks, dims.num_v_heads, dims.k_dim, dims.v_dim);
    Buffer chunk_scratch;
    if (!chunked.empty())
      chunk_scratch =
          Buffer(cuda_memory(),
                 static_cast<size_t>(window * k::gdn_chunk_scratch_floats(dims.num_v_heads, dims.k_dim, dims.v_dim)) *
                     sizeof(float));
    cuda::StagingBlob blob;
    const size_t off_stepped = blob.append(stepped.data(), stepped.size());
    const size_t off_chunked = blob.append(chunked.data(), chunked.size());
    auto& staging = cuda::Staging::global();
    auto lock = staging.lock();
    auto* base = static_cast<char*>(staging.stage(blob.data(), blob.size()));
    if (!stepped.empty())
      k::gated_delta_rule(qkv.as<const float>(), qkv.strides[0], g.as<const float>(), beta.as<const float>(),
                          reinterpret_cast<const k::GdnSpanDev*>(base + off_stepped),
                          static_cast<int64_t>(stepped.size()), stepped_rows, dims.num_k_heads, dims.num_v_heads,
                          dims.k_dim, dims.v_dim, out.as<float>(), out.strides[0], cuda::launch_stream());
    if (!chunked.empty())
      k::gated_delta_rule_chunked(qkv.as<const float>(), qkv.strides[0], g.as<const float>(), beta.as<const float>(),
                                  reinterpret_cast<const k::GdnChunkSpanDev*>(base + off_chunked), chunked.data(),
                                  static_cast<int64_t>(chunked.size()), dims.num_k_heads, dims.num_v_heads, dims.k_dim,
                                  dims.v_dim, out.as<float>(), out.strides[0], chunk_scratch.f32(), window,
                                  cuda::launch_stream());
  }
};

}  // namespace

const Ops& cuda_ops() {
  static const CudaOps ops;
  return ops;
}

}  // namespace specserve
