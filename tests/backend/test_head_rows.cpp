// Qwen3.5's [query | gate] heads read in place (backend/head_rows.h): the head preparation from a
// strided view of the queries and mul_sigmoid with a strided gate give the bits of splitting the
// heads into contiguous tensors first (the old copies) and calling the contiguous ops.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/head_rows.h"
#include "backend/ops.h"
#include "core/error.h"

namespace specserve {
namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

TensorView view(std::vector<float>& v, Shape s) { return TensorView::contiguous(v.data(), DType::F32, s); }

// part 0 (queries) or 1 (gates) of each head of qfull [R, heads * 2 * hd], copied out contiguously.
std::vector<float> split(const std::vector<float>& qfull, int R, int heads, int hd, int part) {
  std::vector<float> out(size_t(R) * heads * hd);
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd; ++i)
        out[(size_t(r) * heads + h) * hd + i] = qfull[(size_t(r) * heads + h) * 2 * hd + size_t(part) * hd + i];
  return out;
}

struct Cache {
  std::vector<std::vector<float>> storage;
  std::vector<void*> table;
  std::vector<AttentionRow> rows;
  Cache(const KvGeometry& g, int R) {
    for (int b = 0; b < (R + kKvBlockSize - 1) / kKvBlockSize; ++b) {
      storage.emplace_back(g.block_elems(), 0.0f);
      table.push_back(storage.back().data());
    }
    for (int r = 0; r < R; ++r) rows.push_back({table.data(), r});
  }
};

TEST(HeadRows, SliceAndCheck) {
  std::vector<float> x(3 * 4 * 10);
  const TensorView s = head_slice(view(x, {3, 40}), 4, 5, 5);
  EXPECT_EQ(s.as<float>(), x.data() + 5);
  const HeadRows h = check_head_rows("t", s, 4, 5);
  EXPECT_EQ(h.rows, 3);
  EXPECT_EQ(h.ld, 40);
  EXPECT_EQ(h.head_stride, 10);
  const HeadRows flat = check_head_rows("t", view(x, {6, 20}), 4, 5);
  EXPECT_EQ(flat.head_stride, 5);
  EXPECT_EQ(flat.ld, 20);
  EXPECT_THROW(head_slice(view(x, {3, 40}), 4, 5, 6), Error);  // past the head's block
  EXPECT_THROW(head_slice(view(x, {3, 40}), 3, 5, 0), Error);  // 40 is not 3 heads
  EXPECT_THROW(check_head_rows("t", s, 4, 6), Error);          // wrong head_dim
  EXPECT_THROW(check_head_rows("t", view(x, {6, 20}), 3, 5), Error);
}

TEST(HeadRows, MulSigmoidWithStridedGateEqualsCopy) {
  const int R = 7, heads = 3, hd = 24;
  const auto qfull = randn(size_t(R) * heads * 2 * hd, 1);
  auto qf = qfull;
  const auto attn0 = randn(size_t(R) * heads * hd, 2);
  auto want = attn0, got = attn0;
  auto gate = split(qfull, R, heads, hd, 1);
  const Ops& ops = cpu_ops();
  ops.mul_sigmoid(view(want, {R, heads * hd}), view(gate, {R, heads * hd}));
  ops.mul_sigmoid(view(got, {R, heads * hd}), head_slice(view(qf, {R, heads * 2 * hd}), heads, hd, hd));
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4));
  EXPECT_NE(0, std::memcmp(attn0.data(), got.data(), got.size() * 4));  // it did multiply
  ASSERT_EQ(0, std::memcmp(qfull.data(), qf.data(), qf.size() * 4));    // the gate is read only
  std::vector<float> short_x(size_t(R - 1) * heads * hd);
  EXPECT_THROW(
      ops.mul_sigmoid(view(short_x, {R - 1, heads * hd}), head_slice(view(qf, {R, heads * 2 * hd}), heads, hd, hd)),
      Error);
}

void expect_prep_from_equals_copy(const Ops& ops, DType kv_dtype, NormKind kind) {
  const int R = 19, heads = 4, nkv = 2, hd = 32, rot = 16;
  const KvGeometry geo{2, nkv, hd, kv_dtype};
  auto qfull = randn(size_t(R) * heads * 2 * hd, 3);
  const auto qfull0 = qfull;
  const auto k0 = randn(size_t(R) * nkv * hd, 4);
  auto v = randn(size_t(R) * nkv * hd, 5), qn = randn(hd, 6), kn = randn(hd, 7);
  const QkPrep prep{view(qn, {hd}), view(kn, {hd}), kind, 1e-6f, rot, 10000.0};
  // The old way: copy the queries out, prepare in place.
  auto q_copy = split(qfull, R, heads, hd, 0), k1 = k0;
  Cache c1(geo, R);
  ops.qk_norm_rope_kv_store(view(q_copy, {R, heads * hd}), view(k1, {R, nkv * hd}), view(v, {R, nkv * hd}), prep, geo,
                            1, c1.rows);
  // Read in place.
  std::vector<float> q_out(size_t(R) * heads * hd, -1.0f);
  auto k2 = k0;
  Cache c2(geo, R);
  ops.qk_norm_rope_kv_store_from(head_slice(view(qfull, {R, heads * 2 * hd}), heads, hd, 0),
                                 view(q_out, {R, heads * hd}), view(k2, {R, nkv * hd}), view(v, {R, nkv * hd}), prep,
                                 geo, 1, c2.rows);
  ASSERT_EQ(0, std::memcmp(q_copy.data(), q_out.data(), q_out.size() * 4));
  ASSERT_EQ(0, std::memcmp(k1.data(), k2.data(), k1.size() * 4));
  for (size_t b = 0; b < c1.storage.size(); ++b)
    ASSERT_EQ(0, std::memcmp(c1.storage[b].data(), c2.storage[b].data(), size_t(geo.block_bytes()))) << b;
  ASSERT_EQ(0, std::memcmp(qfull0.data(), qfull.data(), qfull.size() * 4));  // q_in untouched
  // A 2-D q_in is the plain copy-free form.
  auto q_plain = split(qfull0, R, heads, hd, 0);
  std::vector<float> q_out2(q_out.size());
  auto k3 = k0;
  Cache c3(geo, R);
  ops.qk_norm_rope_kv_store_from(view(q_plain, {R, heads * hd}), view(q_out2, {R, heads * hd}), view(k3, {R, nkv * hd}),
                                 view(v, {R, nkv * hd}), prep, geo, 1, c3.rows);
  ASSERT_EQ(0, std::memcmp(q_copy.data(), q_out2.data(), q_out2.size() * 4));
  // Bad input: q_in of the wrong head count.
  EXPECT_THROW(ops.qk_norm_rope_kv_store_from(head_slice(view(qfull, {R, heads * 2 * hd}), heads * 2, hd, 0),
                                              view(q_out, {R, heads * hd}), view(k3, {R, nkv * hd}),
                                              view(v, {R, nkv * hd}), prep, geo, 1, c3.rows),
               Error);
}

TEST(HeadRows, PrepFromStridedQueriesEqualsCopy) {
  expect_prep_from_equals_copy(cpu_ops(), DType::F32, NormKind::Plain);
  expect_prep_from_equals_copy(cpu_ops(), DType::BF16, NormKind::ZeroCentred);
}

}  // namespace
}  // namespace specserve
