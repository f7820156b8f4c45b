// CudaOps' gated DeltaNet ops (linear attention): the causal convolution with SiLU, the gate
// preparation and the gated delta rule (token by token and chunked).
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/staging.h"
#include "backend/cuda/step_graphs.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace specserve::cuda {

void CudaOps::causal_conv_silu(const TensorView& x, const TensorView& window, const TensorView& w,
                               const TensorView& out) const {
  for (const TensorView* t : {&x, &window, &w, &out}) on_device("causal_conv_silu", *t);
  check_causal_conv_operands(x, window, w, out);
  const int64_t n = x.dim(0), C = x.dim(1), Kc = w.dim(1);
  SS_CHECK(n == 0 || x.data != out.data, "causal_conv_silu: out must not alias x on CUDA");
  k::causal_conv_silu(x.as<const float>(), x.strides[0], window.as<const float>(), w.as<const float>(), out.as<float>(),
                      out.strides[0], n, C, static_cast<int>(Kc), cuda::launch_stream());
}

void CudaOps::causal_conv_silu_spans(const TensorView& x, std::span<const ConvSpan> spans, const TensorView& w,
                                     const TensorView& out) const {
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
                            w.as<const float>(), out.as<float>(), out.strides[0], x.dim(1), static_cast<int>(w.dim(1)),
                            cuda::launch_stream());
}

void CudaOps::gdn_prepare(const TensorView& qkv, const TensorView& a, const TensorView& b, const TensorView& a_log,
                          const TensorView& dt_bias, const GdnDims& dims) const {
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

void CudaOps::gated_delta_rule(const TensorView& qkv, const TensorView& g, const TensorView& beta,
                               std::span<const GdnSpan> spans, const GdnDims& dims, const TensorView& out) const {
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

}  // namespace specserve::cuda
