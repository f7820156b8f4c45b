// Runs the CUDA chunked Gated DeltaNet kernels (src/backend/cuda/gated_deltanet_chunked.cu) on the host
// through cuda_emu.h and checks them the way tests/backend_cuda/test_cuda_gdn_chunked.cpp does on a GPU:
// against the CPU's chunked form (the chunk() of src/backend/cpu/gated_deltanet.cpp, restated here) within
// 1e-5, each span alone giving the bits it gives in a mixed call, and scratch windows of 1 and 3 chunks
// giving the bits of one window; several shapes, aligned and unaligned qkv rows. Prints one line per
// case with a hash of its bits (compare two runs, e.g. EMU_REVERSE=1, to see a race). Built and run by
// run.sh; exit status 1 when a case fails.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/kernels.h"

namespace k = specserve::cuda::kernels;

namespace {

struct Dims {
  int Hk, Hv, dk, dv;
  int key_dim() const { return Hk * dk; }
  int conv() const { return 2 * Hk * dk + Hv * dv; }
  int value_dim() const { return Hv * dv; }
  size_t state_floats() const { return size_t(Hv) * size_t(dk) * size_t(dv); }
};

std::vector<float> randn(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Random rows prepared as gdn_prepare does: unit q (scaled by dk^-0.5) and k, g < 0, beta in (0, 1).
// `pad` extra floats per row make the rows unaligned for pad % 4 != 0.
struct Inputs {
  Dims d;
  int64_t T, ld;
  std::vector<float> qkv, g, beta;
  Inputs(Dims dims, int64_t rows, unsigned seed, int pad) : d(dims), T(rows), ld(dims.conv() + pad) {
    qkv = randn(size_t(T * ld), seed);
    g = randn(size_t(T * d.Hv), seed + 1);
    beta = randn(size_t(T * d.Hv), seed + 2);
    const auto a_log = randn(size_t(d.Hv), seed + 3, 0.5f), dt = randn(size_t(d.Hv), seed + 4, 0.5f);
    const float q_scale = 1.0f / std::sqrt(float(d.dk));
    for (int64_t r = 0; r < T; ++r) {
      float* row = qkv.data() + r * ld;
      for (int part = 0; part < 2; ++part)
        for (int h = 0; h < d.Hk; ++h) {
          float* v = row + part * d.key_dim() + h * d.dk;
          float ss = 0;
          for (int i = 0; i < d.dk; ++i) ss += v[i] * v[i];
          const float inv = 1.0f / std::sqrt(ss + 1e-6f);
          for (int i = 0; i < d.dk; ++i) v[i] = part == 0 ? (v[i] * inv) * q_scale : v[i] * inv;
        }
      for (int h = 0; h < d.Hv; ++h) {
        float& b = beta[size_t(r * d.Hv + h)];
        b = 1.0f / (1.0f + std::exp(-b));
        float& a = g[size_t(r * d.Hv + h)];
        const float x = a + dt[size_t(h)];
        a = -std::exp(a_log[size_t(h)]) * (x > 20 ? x : std::log1p(std::exp(x)));
      }
    }
  }
};

struct Span {
  int64_t position, rows, begin;
};

// The CPU's chunk() over rows [r0, r0 + L) of value head h.
void cpu_chunk(const Inputs& in, int h, float* S, int64_t r0, int64_t L, float* out) {
  const Dims& d = in.d;
  const int dk = d.dk, dv = d.dv, kh = h / (d.Hv / d.Hk);
  auto q = [&](int64_t r) { return in.qkv.data() + r * in.ld + kh * dk; };
  auto kr = [&](int64_t r) { return in.qkv.data() + r * in.ld + d.key_dim() + kh * dk; };
  auto v = [&](int64_t r) { return in.qkv.data() + r * in.ld + 2 * d.key_dim() + h * dv; };
  auto gate = [&](int64_t r) { return in.g[size_t(r * d.Hv + h)]; };
  auto b = [&](int64_t r) { return in.beta[size_t(r * d.Hv + h)]; };
  auto dot = [&](const float* x, const float* y) {
    float s = 0;
    for (int i = 0; i < dk; ++i) s += x[i] * y[i];
    return s;
  };
  const auto n = [](int64_t x) { return static_cast<size_t>(x); };
  std::vector<float> G(n(L)), A(n(L * L)), P(n(L * L)), U(n(L * dv)), W(n(L * dk)), S_add(n(int64_t{dk} * dv));
  float acc = 0;
  for (int64_t i = 0; i < L; ++i) G[size_t(i)] = acc += gate(r0 + i);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) {
      const float decay = j <= i ? std::exp(G[size_t(i)] - G[size_t(j)]) : 0.0f;
      A[size_t(i * L + j)] = j < i ? (b(r0 + i) * dot(kr(r0 + i), kr(r0 + j))) * decay : 0.0f;
      P[size_t(i * L + j)] = j <= i ? dot(q(r0 + i), kr(r0 + j)) * decay : 0.0f;
    }
  for (int64_t i = 0; i < L; ++i) {
    float* u = &U[size_t(i * dv)];
    float* w = &W[size_t(i * dk)];
    for (int j = 0; j < dv; ++j) u[j] = v(r0 + i)[j] * b(r0 + i);
    for (int j = 0; j < dk; ++j) w[j] = (kr(r0 + i)[j] * b(r0 + i)) * std::exp(G[size_t(i)]);
    for (int64_t m = 0; m < i; ++m) {
      const float a = A[size_t(i * L + m)];
      for (int j = 0; j < dv; ++j) u[j] -= a * U[size_t(m * dv + j)];
      for (int j = 0; j < dk; ++j) w[j] -= a * W[size_t(m * dk + j)];
    }
  }
  for (int64_t i = 0; i < L; ++i)
    for (int a = 0; a < dk; ++a)
      for (int j = 0; j < dv; ++j) U[size_t(i * dv + j)] -= W[size_t(i * dk + a)] * S[a * dv + j];
  for (int64_t i = 0; i < L; ++i) {
    float* o = out + (r0 + i) * d.value_dim() + h * dv;
    std::fill(o, o + dv, 0.0f);
    for (int a = 0; a < dk; ++a) {
      const float qa = q(r0 + i)[a] * std::exp(G[size_t(i)]);
      for (int j = 0; j < dv; ++j) o[j] += qa * S[a * dv + j];
    }
    for (int64_t m = 0; m <= i; ++m)
      for (int j = 0; j < dv; ++j) o[j] += P[size_t(i * L + m)] * U[size_t(m * dv + j)];
  }
  std::fill(S_add.begin(), S_add.end(), 0.0f);
  for (int64_t m = 0; m < L; ++m) {
    const float decay = std::exp(G[size_t(L - 1)] - G[size_t(m)]);
    for (int a = 0; a < dk; ++a) {
      const float ka = kr(r0 + m)[a] * decay;
      for (int j = 0; j < dv; ++j) S_add[size_t(a * dv + j)] += ka * U[size_t(m * dv + j)];
    }
  }
  const float e_last = std::exp(G[size_t(L - 1)]);
  for (size_t e = 0; e < S_add.size(); ++e) S[e] = S[e] * e_last + S_add[e];
}

void cpu_run(const Inputs& in, const std::vector<Span>& spans, std::vector<std::vector<float>>& states,
             std::vector<float>& out) {
  for (size_t s = 0; s < spans.size(); ++s)
    for (int h = 0; h < in.d.Hv; ++h)
      for (int64_t r = 0; r < spans[s].rows;) {
        const int64_t pos = spans[s].position + r;
        const int64_t len = std::min<int64_t>(spans[s].rows - r, 64 - pos % 64);
        cpu_chunk(in, h, states[s].data() + size_t(h) * in.d.dk * in.d.dv, spans[s].begin + r, len, out.data());
        r += len;
      }
}

// The kernels over spans[order[0]], spans[order[1]], ... in one call; window 0: the op's window.
void emu_run(const Inputs& in, const std::vector<Span>& spans, std::vector<std::vector<float>>& states,
             std::vector<float>& out, int64_t window, const std::vector<size_t>& order) {
  const Dims& d = in.d;
  std::vector<k::GdnChunkSpanDev> dev;
  for (size_t i : order) dev.push_back({states[i].data(), spans[i].begin, spans[i].rows, spans[i].position});
  const int64_t chunks = k::gdn_number_chunks(dev.data(), int64_t(dev.size()));
  if (window == 0) window = k::gdn_chunked_window(chunks, d.Hv, d.dk, d.dv);
  std::vector<float> scratch(size_t(window * k::gdn_chunk_scratch_floats(d.Hv, d.dk, d.dv)), NAN);
  k::gated_delta_rule_chunked(in.qkv.data(), in.ld, in.g.data(), in.beta.data(), dev.data(), dev.data(),
                              int64_t(dev.size()), d.Hk, d.Hv, d.dk, d.dv, out.data(), d.value_dim(), scratch.data(),
                              window, nullptr);
}

double rel_err(const float* a, const float* b, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

uint64_t hash_bits(const std::vector<float>& v, uint64_t h) {
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    h = (h ^ u) * 1099511628211ull;
  }
  return h;
}

}  // namespace

int main() {
  // The last two: several 128-column tiles of the output kernel, the second with a tail of 10 columns
  // (value rows not 16-byte aligned in the scratch).
  const Dims shapes[] = {{2, 2, 16, 12},  {1, 3, 48, 80},  {2, 4, 128, 128}, {2, 2, 32, 32},
                         {1, 2, 192, 40}, {2, 2, 64, 256}, {1, 2, 32, 138}};
  int failures = 0;
  for (const Dims& d : shapes)
    for (const int pad : {0, 1}) {
      std::vector<Span> spans = {{5, 200, 0}, {64, 65, 0}, {130, 1, 0}, {37, 300, 0}, {63, 7, 0}, {0, 64, 0}};
      int64_t T = 0;
      for (auto& s : spans) {
        s.begin = T;
        T += s.rows;
      }
      const Inputs in(d, T, 131 + unsigned(pad), pad);
      const size_t SF = d.state_floats(), n_out = size_t(T) * size_t(d.value_dim());
      std::vector<std::vector<float>> s0;
      for (size_t i = 0; i < spans.size(); ++i) s0.push_back(randn(SF, 200 + unsigned(i), 0.3f));
      auto cpu_states = s0;
      std::vector<float> cpu_out(n_out, NAN);
      cpu_run(in, spans, cpu_states, cpu_out);
      const std::vector<size_t> order = {3, 0, 5, 1, 4, 2};
      auto states = s0;
      std::vector<float> out(n_out, NAN);
      emu_run(in, spans, states, out, 0, order);
      const double err_out = rel_err(out.data(), cpu_out.data(), n_out);
      double err_state = 0;
      for (size_t i = 0; i < spans.size(); ++i)
        err_state = std::max(err_state, rel_err(states[i].data(), cpu_states[i].data(), SF));
      bool bits = true;
      for (const int64_t window : {1, 3}) {
        auto w_states = s0;
        std::vector<float> w_out(n_out, NAN);
        emu_run(in, spans, w_states, w_out, window, order);
        bits = bits && w_out == out;
        for (size_t i = 0; i < spans.size(); ++i) bits = bits && w_states[i] == states[i];
      }
      for (size_t i = 0; i < spans.size(); ++i) {
        auto a_states = s0;
        std::vector<float> a_out(n_out, NAN);
        emu_run(in, spans, a_states, a_out, 0, {i});
        const size_t o = size_t(spans[i].begin) * size_t(d.value_dim()), n = size_t(spans[i].rows) * d.value_dim();
        bits = bits && std::memcmp(a_out.data() + o, out.data() + o, n * 4) == 0 && a_states[i] == states[i];
      }
      uint64_t h = hash_bits(out, 1469598103934665603ull);
      for (const auto& s : states) h = hash_bits(s, h);
      const bool ok = err_out < 1e-5 && err_state < 1e-5 && bits;
      failures += ok ? 0 : 1;
      std::printf("Hk %d Hv %d dk %d dv %d pad %d: bits %016llx, out err %.3g, state err %.3g, %s, %s\n", d.Hk, d.Hv,
                  d.dk, d.dv, pad, static_cast<unsigned long long>(h), err_out, err_state,
                  bits ? "window/alone bits same" : "BITS DIFFER", ok ? "ok" : "FAIL");
      std::fflush(stdout);
    }
  return failures == 0 ? 0 : 1;
}
