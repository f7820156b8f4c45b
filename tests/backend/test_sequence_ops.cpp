// Attention over the paged cache and the Gated DeltaNet kernels: agreement with plain references, and
// the invariances the verifier relies on (an extend row equals a decode row bit for bit; the chunked
// prefill agrees with the recurrence and does not depend on where a prompt is split at chunk
// boundaries).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "core/dtype.h"
#include "core/error.h"

namespace specserve {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

TensorView view(std::vector<float>& v, Shape s) { return TensorView::contiguous(v.data(), DType::F32, s); }

struct PagedCache {
  KvGeometry geo;
  std::vector<std::vector<float>> storage;  // block_elems floats a block: room for either dtype
  std::vector<void*> table;
  PagedCache(KvGeometry g, int positions) : geo(g) {
    for (int b = 0; b < (positions + kKvBlockSize - 1) / kKvBlockSize; ++b) {
      storage.emplace_back(geo.block_elems(), 0.0f);
      table.push_back(storage.back().data());
    }
  }
};

std::vector<float> bf16_rounded(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = bf16_to_f32(f32_to_bf16(x[i]));
  return r;
}

TEST(Attention, MatchesReferenceAndExtendEqualsDecode) {
  const int nh = 4, nkv = 2, hd = 24, T = 37;
  KvGeometry geo{2, nkv, hd};
  PagedCache cache(geo, T);
  auto q = randn(T * nh * hd, 1), k = randn(T * nkv * hd, 2), v = randn(T * nkv * hd, 3);
  std::vector<AttentionRow> rows(T);
  for (int t = 0; t < T; ++t) rows[t] = {cache.table.data(), t};
  const Ops& ops = cpu_ops();
  ops.kv_store(view(k, {T, nkv * hd}), view(v, {T, nkv * hd}), geo, 1, rows);
  std::vector<float> all(T * nh * hd);
  const float scale = 1.0f / std::sqrt(float(hd));
  ops.attention(view(q, {T, nh * hd}), geo, 1, rows, nh, scale, view(all, {T, nh * hd}));
  // Reference in double.
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < nh; ++h) {
      int g = h / (nh / nkv);
      std::vector<double> s(t + 1);
      double mx = -1e300, sum = 0;
      for (int j = 0; j <= t; ++j) {
        double d = 0;
        for (int i = 0; i < hd; ++i) d += double(q[(t * nh + h) * hd + i]) * k[(j * nkv + g) * hd + i];
        s[j] = d * scale;
        mx = std::max(mx, s[j]);
      }
      for (auto& x : s) sum += (x = std::exp(x - mx));
      for (int i = 0; i < hd; ++i) {
        double o = 0;
        for (int j = 0; j <= t; ++j) o += s[j] / sum * v[(j * nkv + g) * hd + i];
        ASSERT_NEAR(all[(t * nh + h) * hd + i], o, 1e-5);
      }
    }
  // Each row alone (a decode) gives the same bits as inside the batch (an extend).
  for (int t = 0; t < T; ++t) {
    std::vector<float> one(nh * hd);
    TensorView qrow = view(q, {T, nh * hd}).rows(t, t + 1);
    ops.attention(qrow, geo, 1, std::span(&rows[t], 1), nh, scale, view(one, {1, nh * hd}));
    ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * nh * hd, one.size() * 4)) << "row " << t;
  }
}

struct GdnCase {
  GdnDims d{2, 4, 16, 12, 4};
  int T;
  std::vector<float> qkv, g, beta;
  explicit GdnCase(int t) : T(t) {
    qkv = randn(size_t(T) * d.conv_dim(), 11);
    auto a = randn(size_t(T) * d.num_v_heads, 12), b = randn(size_t(T) * d.num_v_heads, 13);
    auto alog = randn(d.num_v_heads, 14, 0.5f), dt = randn(d.num_v_heads, 15, 0.5f);
    cpu_ops().gdn_prepare(view(qkv, {T, d.conv_dim()}), view(a, {T, d.num_v_heads}), view(b, {T, d.num_v_heads}),
                          view(alog, {d.num_v_heads}), view(dt, {d.num_v_heads}), d);
    g = a;
    beta = b;
  }
  // Runs the rule over rows [r0, r1) from `state` in spans of `split` rows.
  std::vector<float> run(std::vector<float>& state, int r0, int r1, bool chunked, int split, std::vector<float>& out) {
    out.assign(size_t(T) * d.value_dim(), 0.0f);
    for (int r = r0; r < r1; r += split) {
      GdnSpan sp{state.data(), r, std::min(split, r1 - r), r, chunked};
      cpu_ops().gated_delta_rule(view(qkv, {T, d.conv_dim()}), view(g, {T, d.num_v_heads}),
                                 view(beta, {T, d.num_v_heads}), std::span(&sp, 1), d, view(out, {T, d.value_dim()}));
    }
    return state;
  }
};

TEST(KvGeometry, BytesFollowTheElementType) {
  const KvGeometry f32{3, 2, 64}, bf16{3, 2, 64, DType::BF16};
  EXPECT_EQ(f32.block_elems(), bf16.block_elems());
  EXPECT_EQ(f32.block_bytes(), 4 * f32.block_elems());
  EXPECT_EQ(bf16.block_bytes(), 2 * bf16.block_elems());
  EXPECT_EQ(f32.offset(2, 1, 1, 5), bf16.offset(2, 1, 1, 5));
  EXPECT_EQ(resolve_kv_dtype("auto", DType::F32), DType::F32);
  EXPECT_EQ(resolve_kv_dtype("auto", DType::BF16), DType::BF16);
  EXPECT_EQ(resolve_kv_dtype("bf16", DType::F32), DType::BF16);
  EXPECT_EQ(resolve_kv_dtype("f32", DType::BF16), DType::F32);
  EXPECT_THROW(resolve_kv_dtype("fp8", DType::BF16), Error);
}

// A bf16 cache stores k and v rounded to nearest even, and attention over it gives the bits of attention
// over an f32 cache holding the rounded values (docs/DESIGN.md §1.1), for every row alone or together,
// windowed or not.
TEST(Attention, Bf16CacheEqualsF32CacheOfRoundedValues) {
  const int nh = 6, nkv = 2, hd = 32, T = 45;
  const KvGeometry g32{2, nkv, hd}, g16{2, nkv, hd, DType::BF16};
  PagedCache c32(g32, T), c16(g16, T);
  auto q = randn(T * nh * hd, 11), k = randn(T * nkv * hd, 12), v = randn(T * nkv * hd, 13);
  k[5] = 1.00390625f;  // halfway between two bf16 values: rounds to even (1.0)
  auto kr = bf16_rounded(k), vr = bf16_rounded(v);
  std::vector<AttentionRow> r32(T), r16(T);
  for (int t = 0; t < T; ++t) {
    const int w = t % 3 == 0 ? std::max(0, t - 9) : 0;  // some rows windowed
    r32[t] = {c32.table.data(), t, w};
    r16[t] = {c16.table.data(), t, w};
  }
  const Ops& ops = cpu_ops();
  ops.kv_store(view(kr, {T, nkv * hd}), view(vr, {T, nkv * hd}), g32, 1, r32);
  ops.kv_store(view(k, {T, nkv * hd}), view(v, {T, nkv * hd}), g16, 1, r16);
  // The stored bits: convert_from_f32's rounding.
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < nkv; ++h)
      for (int d = 0; d < hd; ++d) {
        const int i = (t * nkv + h) * hd + d;
        void* block = c16.table[t / kKvBlockSize];
        ASSERT_EQ(g16.at<uint16_t>(block, 1, 0, h, t % kKvBlockSize)[d], f32_to_bf16(k[i])) << i;
        ASSERT_EQ(g16.at<uint16_t>(block, 1, 1, h, t % kKvBlockSize)[d], f32_to_bf16(v[i])) << i;
      }
  EXPECT_EQ(g16.at<uint16_t>(c16.table[0], 1, 0, 0, 0)[5], f32_to_bf16(1.0f));
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> o32(T * nh * hd), o16(T * nh * hd);
  ops.attention(view(q, {T, nh * hd}), g32, 1, r32, nh, scale, view(o32, {T, nh * hd}));
  ops.attention(view(q, {T, nh * hd}), g16, 1, r16, nh, scale, view(o16, {T, nh * hd}));
  ASSERT_EQ(0, std::memcmp(o32.data(), o16.data(), o32.size() * 4));
  for (int t = 0; t < T; ++t) {
    std::vector<float> one(nh * hd);
    ops.attention(view(q, {T, nh * hd}).rows(t, t + 1), g16, 1, std::span(&r16[t], 1), nh, scale,
                  view(one, {1, nh * hd}));
    ASSERT_EQ(0, std::memcmp(one.data(), o16.data() + t * nh * hd, one.size() * 4)) << "row " << t;
  }
  // The fused head preparation stores the same bits as kv_store.
  PagedCache fused(g16, T);
  std::vector<AttentionRow> rf(T);
  for (int t = 0; t < T; ++t) rf[t] = {fused.table.data(), t};
  std::vector<float> qn(hd, 1.0f), kn(hd, 1.0f), qq = q, kk = k;
  QkPrep prep{view(qn, {hd}), view(kn, {hd}), NormKind::Plain, 1e-6f, hd, 10000.0};
  ops.qk_norm_rope_kv_store(view(qq, {T, nh * hd}), view(kk, {T, nkv * hd}), view(v, {T, nkv * hd}), prep, g16, 0, rf);
  PagedCache plain(g16, T);
  std::vector<AttentionRow> rp(T);
  for (int t = 0; t < T; ++t) rp[t] = {plain.table.data(), t};
  ops.kv_store(view(kk, {T, nkv * hd}), view(v, {T, nkv * hd}), g16, 0, rp);
  for (size_t b = 0; b < fused.storage.size(); ++b)
    ASSERT_EQ(0, std::memcmp(fused.storage[b].data(), plain.storage[b].data(), size_t(g16.block_bytes()))) << b;
}

TEST(GatedDeltaNet, ChunkedAgreesWithRecurrence) {
  GdnCase c(150);
  std::vector<float> s1(c.d.state_floats(), 0.0f), s2 = s1, o1, o2;
  c.run(s1, 0, c.T, false, c.T, o1);
  c.run(s2, 0, c.T, true, c.T, o2);
  double max_out = 0, err = 0;
  for (size_t i = 0; i < o1.size(); ++i) {
    max_out = std::max(max_out, double(std::fabs(o1[i])));
    err = std::max(err, double(std::fabs(o1[i] - o2[i])));
  }
  EXPECT_LT(err, 1e-5 * std::max(1.0, max_out));
  for (size_t i = 0; i < s1.size(); ++i) ASSERT_NEAR(s1[i], s2[i], 1e-5);
}

TEST(GatedDeltaNet, RecurrenceIsRowByRowIdentical) {
  GdnCase c(40);
  std::vector<float> s1(c.d.state_floats(), 0.0f), s2 = s1, o1, o2;
  c.run(s1, 0, c.T, false, c.T, o1);
  c.run(s2, 0, c.T, false, 1, o2);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(s1, s2);
}

TEST(GatedDeltaNet, StateInLeavesSourceUntouchedAndMatchesInPlace) {
  GdnCase c(12);
  std::vector<float> s0 = randn(c.d.state_floats(), 16, 0.3f), in_place = s0, out1, out2(size_t(c.T) * c.d.value_dim());
  c.run(in_place, 0, c.T, false, c.T, out1);
  std::vector<float> src = s0, dst(s0.size(), -7.0f);
  GdnSpan sp{dst.data(), 0, c.T, 0, false, src.data()};
  cpu_ops().gated_delta_rule(view(c.qkv, {c.T, c.d.conv_dim()}), view(c.g, {c.T, c.d.num_v_heads}),
                             view(c.beta, {c.T, c.d.num_v_heads}), std::span(&sp, 1), c.d,
                             view(out2, {c.T, c.d.value_dim()}));
  EXPECT_EQ(src, s0);
  EXPECT_EQ(dst, in_place);
  EXPECT_EQ(out1, out2);
}

TEST(GatedDeltaNet, ChunkedPrefillSplitAtChunkBoundariesIsIdentical) {
  GdnCase c(200);
  std::vector<float> s1(c.d.state_floats(), 0.0f), s2 = s1, o1, o2;
  c.run(s1, 0, c.T, true, c.T, o1);
  c.run(s2, 0, c.T, true, kGdnChunk, o2);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(s1, s2);
}

TEST(Conv, MatchesDefinitionWithWindow) {
  const int C = 5, Kc = 4, n = 6;
  auto x = randn(n * C, 21), win = randn((Kc - 1) * C, 22), w = randn(C * Kc, 23);
  std::vector<float> out(n * C);
  cpu_ops().causal_conv_silu(view(x, {n, C}), view(win, {Kc - 1, C}), view(w, {C, Kc}), view(out, {n, C}));
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (int j = 0; j < Kc; ++j) {
        int src = t - (Kc - 1) + j;
        acc += double(w[c * Kc + j]) * (src >= 0 ? x[src * C + c] : win[(Kc - 1 + src) * C + c]);
      }
      ASSERT_NEAR(out[t * C + c], acc / (1 + std::exp(-acc)), 1e-5);
    }
}

// The per-sequence form: each span reads its own window; bits equal the one-span calls; a span past
// the rows is a clear error.
TEST(Conv, SpansUseTheirOwnWindowsAndEqualOneSpanCalls) {
  const int C = 5, Kc = 4;
  const int64_t lens[] = {2, 0, 5, 1};
  const int64_t R = 8;
  auto x = randn(R * C, 24), w = randn(C * Kc, 25);
  std::vector<std::vector<float>> wins;
  for (int i = 0; i < 4; ++i) wins.push_back(randn((Kc - 1) * C, 26 + uint32_t(i)));
  std::vector<ConvSpan> spans;
  int64_t row = 0;
  for (int i = 0; i < 4; ++i) {
    spans.push_back({view(wins[size_t(i)], {Kc - 1, C}), row, lens[i]});
    row += lens[i];
  }
  std::vector<float> all(R * C, 0.0f), each(R * C, 0.0f);
  cpu_ops().causal_conv_silu_spans(view(x, {R, C}), spans, view(w, {C, Kc}), view(all, {R, C}));
  for (const auto& sp : spans)
    cpu_ops().causal_conv_silu(view(x, {R, C}).rows(sp.row_begin, sp.row_begin + sp.rows), sp.window, view(w, {C, Kc}),
                               view(each, {R, C}).rows(sp.row_begin, sp.row_begin + sp.rows));
  EXPECT_EQ(0, std::memcmp(all.data(), each.data(), all.size() * 4));
  // Span 2's first row sees its own window's last row, not span 0's rows.
  cpu_ops().causal_conv_silu_spans(view(x, {R, C}), std::span(&spans[2], 1), view(w, {C, Kc}), view(each, {R, C}));
  EXPECT_EQ(0, std::memcmp(all.data() + 2 * C, each.data() + 2 * C, size_t(5 * C) * 4));
  std::vector<ConvSpan> bad{{spans[0].window, R - 1, 2}};
  EXPECT_THROW(cpu_ops().causal_conv_silu_spans(view(x, {R, C}), bad, view(w, {C, Kc}), view(all, {R, C})), Error);
}

// The fused residual add + norm is add then rms_norm, bit for bit, on the CPU too.
TEST(Norms, AddRmsNormEqualsAddThenNorm) {
  const int d = 37, n = 3;
  auto x = randn(n * d, 34), y = randn(n * d, 35), w = randn(d, 36);
  auto x2 = x;
  std::vector<float> fused(n * d), apart(n * d);
  cpu_ops().add_rms_norm(view(x, {n, d}), view(y, {n, d}), view(w, {d}), NormKind::ZeroCentred, 1e-6f,
                         view(fused, {n, d}));
  cpu_ops().add(view(x2, {n, d}), view(y, {n, d}));
  cpu_ops().rms_norm(view(x2, {n, d}), view(w, {d}), NormKind::ZeroCentred, 1e-6f, view(apart, {n, d}));
  EXPECT_EQ(x, x2);
  EXPECT_EQ(fused, apart);
}

TEST(Norms, FlavoursMatchDefinitions) {
  const int d = 19, n = 3;
  auto x = randn(n * d, 31), w = randn(d, 32), z = randn(n * d, 33);
  std::vector<float> plain(n * d), zc(n * d), gated(n * d);
  const Ops& ops = cpu_ops();
  ops.rms_norm(view(x, {n, d}), view(w, {d}), NormKind::Plain, 1e-6f, view(plain, {n, d}));
  ops.rms_norm(view(x, {n, d}), view(w, {d}), NormKind::ZeroCentred, 1e-6f, view(zc, {n, d}));
  ops.rms_norm_gated(view(x, {n, d}), view(z, {n, d}), view(w, {d}), 1e-6f, view(gated, {n, d}));
  for (int r = 0; r < n; ++r) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += double(x[r * d + i]) * x[r * d + i];
    double inv = 1 / std::sqrt(ss / d + 1e-6);
    for (int i = 0; i < d; ++i) {
      double h = x[r * d + i] * inv, zz = z[r * d + i];
      EXPECT_NEAR(plain[r * d + i], w[i] * h, 1e-5);
      EXPECT_NEAR(zc[r * d + i], h * (1 + w[i]), 1e-5);
      EXPECT_NEAR(gated[r * d + i], w[i] * h * zz / (1 + std::exp(-zz)), 1e-5);
    }
  }
}

TEST(Rope, RotatesHalvesOfThePartialSlice) {
  const int heads = 2, hd = 8, rot = 4;
  auto x = randn(2 * heads * hd, 41), orig = x;
  std::vector<int32_t> pos = {0, 7};
  cpu_ops().rope(view(x, {2, heads * hd}), heads, hd, rot, 10000.0, pos);
  for (int r = 0; r < 2; ++r)
    for (int h = 0; h < heads; ++h) {
      const float* a = orig.data() + (r * heads + h) * hd;
      const float* b = x.data() + (r * heads + h) * hd;
      for (int i = 0; i < rot / 2; ++i) {
        double ang = pos[r] * std::pow(10000.0, -2.0 * i / rot);
        EXPECT_NEAR(b[i], a[i] * std::cos(ang) - a[i + rot / 2] * std::sin(ang), 1e-5);
        EXPECT_NEAR(b[i + rot / 2], a[i + rot / 2] * std::cos(ang) + a[i] * std::sin(ang), 1e-5);
      }
      for (int i = rot; i < hd; ++i) EXPECT_EQ(b[i], a[i]);
    }
}

}  // namespace
}  // namespace specserve
