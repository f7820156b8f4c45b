// Gated DeltaNet kernels (docs/MODELS.md §3.3): causal depthwise conv + SiLU, the f32 gates and L2 norms,
// and the gated delta rule in its two forms. The recurrent form (decode and extend, one token at a
// time) is the one that must agree bit for bit between a K-row extend and K decodes: it is the same
// loop for both. The chunked form is used for prefill only; its chunks are aligned to absolute
// positions (multiples of kGdnChunk), so where a prompt is split into prefill calls does not matter
// as long as the splits fall on multiples of kGdnChunk.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/op_checks.h"
#include "backend/cpu/row_parallel.h"
#include "backend/cpu/simd.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace specserve::cpu {

void causal_conv_silu(const TensorView& x, const TensorView& window, const TensorView& w, const TensorView& out) {
  check_causal_conv_operands(x, window, w, out);
  const int64_t n = x.dim(0), C = x.dim(1), Kc = w.dim(1);
  const float* ws = w.as<const float>();
  for_rows(n, C * Kc * 2, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out.as<float>() + t * out.strides[0];
      for (int64_t c = 0; c < C; ++c) {
        float acc = 0.0f;
        for (int64_t j = 0; j < Kc; ++j) {
          const int64_t src = t - (Kc - 1) + j;  // row index relative to x; negative = window
          const float v =
              src >= 0 ? x.as<const float>()[src * x.strides[0] + c] : window.as<const float>()[(Kc - 1 + src) * C + c];
          acc += ws[c * Kc + j] * v;
        }
        o[c] = silu(acc);
      }
    }
  });
}

void gdn_prepare(const TensorView& qkv, const TensorView& a, const TensorView& b, const TensorView& a_log,
                 const TensorView& dt_bias, const GdnDims& dims) {
  const int64_t R = qkv.dim(0);
  SS_CHECK(qkv.dtype == DType::F32 && qkv.ndim() == 2 && qkv.dim(1) == dims.conv_dim() && qkv.strides[1] == 1,
           "gdn_prepare: qkv {} must be f32 [rows, {}]", qkv.describe(), dims.conv_dim());
  SS_CHECK(a.is_contiguous() && b.is_contiguous() && a.numel() == R * dims.num_v_heads && b.numel() == a.numel(),
           "gdn_prepare: a {} / b {} must be [rows, {}]", a.describe(), b.describe(), dims.num_v_heads);
  SS_CHECK(a_log.dtype == DType::F32 && dt_bias.dtype == DType::F32 && a_log.numel() == dims.num_v_heads &&
               dt_bias.numel() == dims.num_v_heads,
           "gdn_prepare: A_log / dt_bias must be f32 [{}]", dims.num_v_heads);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dims.k_dim));
  const int Hv = dims.num_v_heads;
  for_rows(R, dims.conv_dim() * 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = qkv.as<float>() + r * qkv.strides[0];
      for (int part = 0; part < 2; ++part) {  // q then k
        for (int h = 0; h < dims.num_k_heads; ++h) {
          float* v = row + part * dims.key_dim() + h * dims.k_dim;
          const float inv = 1.0f / std::sqrt(sum_squares(v, dims.k_dim) + 1e-6f);
          if (part == 0)
            for (int i = 0; i < dims.k_dim; ++i) v[i] = (v[i] * inv) * q_scale;
          else
            for (int i = 0; i < dims.k_dim; ++i) v[i] = v[i] * inv;
        }
      }
      float* ar = a.as<float>() + r * Hv;
      float* br = b.as<float>() + r * Hv;
      for (int h = 0; h < Hv; ++h) {
        br[h] = sigmoid(br[h]);
        ar[h] = -std::exp(a_log.as<const float>()[h]) * softplus(ar[h] + dt_bias.as<const float>()[h]);
      }
    }
  });
}

namespace {

struct HeadIo {
  const float* qkv;
  int64_t ld;  // floats between rows of qkv
  const float* g;
  const float* beta;
  float* out;
  int64_t ld_out;
  GdnDims d;
  int head;  // value head
  int kh;    // its q/k head
  const float* q(int64_t r) const { return qkv + r * ld + int64_t{kh} * d.k_dim; }
  const float* k(int64_t r) const { return qkv + r * ld + d.key_dim() + int64_t{kh} * d.k_dim; }
  const float* v(int64_t r) const { return qkv + r * ld + 2 * d.key_dim() + int64_t{head} * d.v_dim; }
  float gate(int64_t r) const { return g[r * d.num_v_heads + head]; }
  float b(int64_t r) const { return beta[r * d.num_v_heads + head]; }
  float* o(int64_t r) const { return out + r * ld_out + int64_t{head} * d.v_dim; }
};

// Recurrent form (docs/MODELS.md §3.3 step 6) over rows [r0, r1) of one head; S [dk, dv]. The first step
// reads the state from S_in (S itself when null or equal), the same arithmetic either way.
void recurrent(const HeadIo& io, float* S, const float* S_in, int64_t r0, int64_t r1) {
  const int dk = io.d.k_dim, dv = io.d.v_dim;
  std::vector<float> mem(dv), u(dv);
  for (int64_t r = r0; r < r1; ++r) {
    const float* q = io.q(r);
    const float* k = io.k(r);
    const float* v = io.v(r);
    const float alpha = std::exp(io.gate(r));
    const float beta = io.b(r);
    std::fill(mem.begin(), mem.end(), 0.0f);
    const float* src = (r == r0 && S_in != nullptr) ? S_in : S;
    for (int i = 0; i < dk; ++i) {
      float* s = S + int64_t{i} * dv;
      const float* si = src + int64_t{i} * dv;
      for (int j = 0; j < dv; ++j) {
        s[j] = si[j] * alpha;
        mem[j] += s[j] * k[i];
      }
    }
    for (int j = 0; j < dv; ++j) u[j] = (v[j] - mem[j]) * beta;
    float* o = io.o(r);
    std::fill(o, o + dv, 0.0f);
    for (int i = 0; i < dk; ++i) {
      float* s = S + int64_t{i} * dv;
      for (int j = 0; j < dv; ++j) {
        s[j] = s[j] + k[i] * u[j];
        o[j] += s[j] * q[i];
      }
    }
  }
}

// Chunked form (docs/MODELS.md §3.3 step 7) over one chunk of rows [r0, r0 + L), L <= kGdnChunk.
void chunk(const HeadIo& io, float* S, int64_t r0, int64_t L, std::vector<float>& scratch) {
  const int dk = io.d.k_dim, dv = io.d.v_dim;
  scratch.resize(static_cast<size_t>(L + 2 * L * L + L * dv + L * dk + dk * dv));
  float* G = scratch.data();  // [L] cumulative log-decay
  float* A = G + L;           // [L, L] strictly lower: (beta_i k_i . k_j) e^{G_i - G_j}
  float* P = A + L * L;       // [L, L] lower incl. diagonal: (q_i . k_j) e^{G_i - G_j}
  float* U = P + L * L;       // [L, dv] solve (I + A) U = diag(beta) V, then v_new = U - W S0
  float* W = U + L * dv;      // [L, dk] solve (I + A) W = diag(beta) K e^{G}
  float* S_add = W + L * dk;  // [dk, dv] the chunk's addition to the decayed state
  float acc = 0.0f;
  for (int64_t i = 0; i < L; ++i) {
    acc += io.gate(r0 + i);
    G[i] = acc;
  }
  for (int64_t i = 0; i < L; ++i) {
    const float bi = io.b(r0 + i);
    for (int64_t j = 0; j < L; ++j) {
      if (j < i)
        A[i * L + j] = (bi * dot_f32(io.k(r0 + i), io.k(r0 + j), dk)) * std::exp(G[i] - G[j]);
      else
        A[i * L + j] = 0.0f;
      P[i * L + j] = j <= i ? dot_f32(io.q(r0 + i), io.k(r0 + j), dk) * std::exp(G[i] - G[j]) : 0.0f;
    }
  }
  // Forward substitution with the unit lower-triangular I + A.
  for (int64_t i = 0; i < L; ++i) {
    const float bi = io.b(r0 + i);
    const float ei = std::exp(G[i]);
    const float* v = io.v(r0 + i);
    const float* k = io.k(r0 + i);
    float* u = U + i * dv;
    float* w = W + i * dk;
    for (int j = 0; j < dv; ++j) u[j] = v[j] * bi;
    for (int j = 0; j < dk; ++j) w[j] = (k[j] * bi) * ei;
    for (int64_t m = 0; m < i; ++m) {
      const float a = A[i * L + m];
      for (int j = 0; j < dv; ++j) u[j] -= a * U[m * dv + j];
      for (int j = 0; j < dk; ++j) w[j] -= a * W[m * dk + j];
    }
  }
  // v_new_i = U_i - W_i S0 (in place in U); outputs; then the state update.
  for (int64_t i = 0; i < L; ++i) {
    float* u = U + i * dv;
    const float* w = W + i * dk;
    for (int a = 0; a < dk; ++a) {
      const float* s = S + int64_t{a} * dv;
      for (int j = 0; j < dv; ++j) u[j] -= w[a] * s[j];
    }
  }
  for (int64_t i = 0; i < L; ++i) {
    float* o = io.o(r0 + i);
    const float* q = io.q(r0 + i);
    const float ei = std::exp(G[i]);
    std::fill(o, o + dv, 0.0f);
    for (int a = 0; a < dk; ++a) {
      const float qa = q[a] * ei;
      const float* s = S + int64_t{a} * dv;
      for (int j = 0; j < dv; ++j) o[j] += qa * s[j];
    }
    for (int64_t m = 0; m <= i; ++m) {
      const float p = P[i * L + m];
      const float* u = U + m * dv;
      for (int j = 0; j < dv; ++j) o[j] += p * u[j];
    }
  }
  const float e_last = std::exp(G[L - 1]);
  std::fill(S_add, S_add + int64_t{dk} * dv, 0.0f);
  for (int64_t m = 0; m < L; ++m) {
    const float* k = io.k(r0 + m);
    const float decay = std::exp(G[L - 1] - G[m]);
    const float* u = U + m * dv;
    for (int a = 0; a < dk; ++a) {
      const float ka = k[a] * decay;
      float* s = S_add + int64_t{a} * dv;
      for (int j = 0; j < dv; ++j) s[j] += ka * u[j];
    }
  }
  for (int64_t e = 0, n = int64_t{dk} * dv; e < n; ++e) S[e] = S[e] * e_last + S_add[e];
}

}  // namespace

void gated_delta_rule(const TensorView& qkv, const TensorView& g, const TensorView& beta,
                      std::span<const GdnSpan> spans, const GdnDims& dims, const TensorView& out) {
  const int64_t R = qkv.dim(0);
  SS_CHECK(qkv.dtype == DType::F32 && qkv.ndim() == 2 && qkv.dim(1) == dims.conv_dim() && qkv.strides[1] == 1,
           "gated_delta_rule: qkv {} must be f32 [rows, {}]", qkv.describe(), dims.conv_dim());
  SS_CHECK(g.is_contiguous() && beta.is_contiguous() && g.numel() == R * dims.num_v_heads && beta.numel() == g.numel(),
           "gated_delta_rule: g / beta must be [rows, {}]", dims.num_v_heads);
  SS_CHECK(out.dtype == DType::F32 && out.ndim() == 2 && out.dim(0) == R && out.dim(1) == dims.value_dim() &&
               out.strides[1] == 1,
           "gated_delta_rule: out {} must be [rows, {}]", out.describe(), dims.value_dim());
  SS_CHECK(dims.num_v_heads % dims.num_k_heads == 0, "gated_delta_rule: Hv {} not a multiple of Hk {}",
           dims.num_v_heads, dims.num_k_heads);
  for (const auto& s : spans) {
    SS_CHECK(s.row_begin >= 0 && s.rows >= 0 && s.row_begin + s.rows <= R, "gated_delta_rule: span out of range");
    SS_CHECK(s.state_in == nullptr || !s.chunked, "gated_delta_rule: state_in is for stepped spans only");
  }
  const int Hv = dims.num_v_heads, ratio = dims.num_v_heads / dims.num_k_heads;
  const int64_t tasks = static_cast<int64_t>(spans.size()) * Hv;
  auto body = [&](int64_t t0, int64_t t1) {
    std::vector<float> scratch;
    for (int64_t t = t0; t < t1; ++t) {
      const GdnSpan& sp = spans[t / Hv];
      const int h = static_cast<int>(t % Hv);
      HeadIo io{qkv.as<const float>(),
                qkv.strides[0],
                g.as<const float>(),
                beta.as<const float>(),
                out.as<float>(),
                out.strides[0],
                dims,
                h,
                h / ratio};
      const int64_t head_off = int64_t{h} * dims.k_dim * dims.v_dim;
      float* S = sp.state + head_off;
      if (!sp.chunked) {
        recurrent(io, S, sp.state_in ? sp.state_in + head_off : nullptr, sp.row_begin, sp.row_begin + sp.rows);
        continue;
      }
      int64_t r = 0;
      while (r < sp.rows) {
        const int64_t pos = sp.position + r;
        const int64_t len = std::min<int64_t>(sp.rows - r, kGdnChunk - pos % kGdnChunk);
        chunk(io, S, sp.row_begin + r, len, scratch);
        r += len;
      }
    }
  };
  int64_t work = 0;
  for (const auto& s : spans) work += s.rows * Hv * dims.k_dim * dims.v_dim * 4;
  if (tasks <= 1 || work < (1 << 15))
    body(0, tasks);
  else
    ThreadPool::global().parallel_for(tasks, body, 1);
}

}  // namespace specserve::cpu
