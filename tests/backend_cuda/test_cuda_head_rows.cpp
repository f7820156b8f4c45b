// Qwen3.5's [query | gate] heads read in place on the GPU (backend/head_rows.h): the head preparation
// from a strided view of the queries (qk_norm_rope_kv_store_from) and mul_sigmoid with a strided gate
// give the bits of copying the heads out contiguously first (what the attention block did before) and
// calling the contiguous ops: q, k and every byte of the cache; the product; q_proj's output untouched.
#include <string>
#include <vector>

#include "backend/head_rows.h"
#include "kv_prompts.h"

namespace specserve::cuda_test {
namespace {

struct StridedCase {
  int nh, nkv, hd, rot;
  NormKind norm;
  DType kv = DType::F32;
};

// part 0 (queries) or 1 (gates) of each head of qfull [R, nh * 2 * hd], copied out contiguously.
std::vector<float> split(const std::vector<float>& qfull, int64_t R, int nh, int hd, int part) {
  std::vector<float> out(size_t(R) * nh * hd);
  for (int64_t r = 0; r < R; ++r)
    for (int h = 0; h < nh; ++h)
      for (int i = 0; i < hd; ++i)
        out[(size_t(r) * nh + h) * hd + i] = qfull[(size_t(r) * nh + h) * 2 * hd + size_t(part) * hd + i];
  return out;
}

class StridedHeads : public Gpu, public ::testing::WithParamInterface<StridedCase> {};

TEST_P(StridedHeads, PrepFromQueriesEqualsCopyThenPrep) {
  const StridedCase c = GetParam();
  const KvGeometry geo{2, c.nkv, c.hd, c.kv};
  const int layer = 1;
  // One row (decode), a verify-sized call, and prefill-sized ones (the by-row kernel serves >= 64 rows).
  for (const int R : {1, 17, 64, 300}) {
    SCOPED_TRACE("rows " + std::to_string(R));
    const int64_t qw = int64_t(c.nh) * c.hd, kvw = int64_t(c.nkv) * c.hd;
    const auto qfull = randn(size_t(R) * size_t(2 * qw), 501 + uint32_t(R));
    const auto k = randn(size_t(R) * size_t(kvw), 502, 3.0f), v = randn(size_t(R) * size_t(kvw), 503);
    const auto qn = randn(size_t(c.hd), 504, 0.3f), kn = randn(size_t(c.hd), 505, 0.3f);
    DeviceBuffer dqfull = DeviceBuffer::from(qfull), dq_copy = DeviceBuffer::from(split(qfull, R, c.nh, c.hd, 0)),
                 dq_out = poisoned(size_t(R) * size_t(qw)), k1 = DeviceBuffer::from(k), k2 = DeviceBuffer::from(k),
                 dv = DeviceBuffer::from(v), dqn = DeviceBuffer::from(qn), dkn = DeviceBuffer::from(kn);
    const QkPrep prep{dev_view(dqn, DType::F32, {c.hd}), dev_view(dkn, DType::F32, {c.hd}), c.norm, 1e-6f, c.rot, 1e6};
    Prompts copied(geo, c.nh, {R}, 77), in_place(geo, c.nh, {R}, 77);  // the same poisoned pools and tables
    const std::vector<Span> spans{{0, 0, R}};
    const TensorView V = dev_view(dv, DType::F32, {R, kvw});
    cuda_ops().qk_norm_rope_kv_store(dev_view(dq_copy, DType::F32, {R, qw}), dev_view(k1, DType::F32, {R, kvw}), V,
                                     prep, geo, layer, rows_of(copied, copied.dev_tables, spans));
    const TensorView q_in = head_slice(dev_view(dqfull, DType::F32, {R, 2 * qw}), c.nh, c.hd, 0);
    cuda_ops().qk_norm_rope_kv_store_from(q_in, dev_view(dq_out, DType::F32, {R, qw}),
                                          dev_view(k2, DType::F32, {R, kvw}), V, prep, geo, layer,
                                          rows_of(in_place, in_place.dev_tables, spans));
    const size_t nq = size_t(R) * size_t(qw), nk = k.size(), pool = copied.pool.bytes() / 4;
    const auto q_out = download(dq_out, nq);
    EXPECT_TRUE(bit_equal(q_out.data(), download(dq_copy, nq).data(), nq));
    EXPECT_TRUE(bit_equal(download(k2, nk).data(), download(k1, nk).data(), nk));
    EXPECT_TRUE(bit_equal(download(in_place.pool, pool).data(), download(copied.pool, pool).data(), pool));
    EXPECT_TRUE(bit_equal(download(dqfull, qfull.size()).data(), qfull.data(), qfull.size())) << "q_in was written";
    const auto queries = split(qfull, R, c.nh, c.hd, 0);
    EXPECT_FALSE(bit_equal(q_out.data(), queries.data(), size_t(c.hd))) << "the first head was not prepared";
  }
}

TEST_P(StridedHeads, MulSigmoidWithGateHeadsEqualsCopy) {
  const StridedCase c = GetParam();
  for (const int R : {1, 17, 2049}) {
    SCOPED_TRACE("rows " + std::to_string(R));
    const int64_t qw = int64_t(c.nh) * c.hd;
    const auto qfull = randn(size_t(R) * size_t(2 * qw), 601 + uint32_t(R), 2.0f);
    const auto x = randn(size_t(R) * size_t(qw), 602);
    DeviceBuffer dqfull = DeviceBuffer::from(qfull), dgate = DeviceBuffer::from(split(qfull, R, c.nh, c.hd, 1)),
                 want = DeviceBuffer::from(x), got = DeviceBuffer::from(x);
    cuda_ops().mul_sigmoid(dev_view(want, DType::F32, {R, qw}), dev_view(dgate, DType::F32, {R, qw}));
    cuda_ops().mul_sigmoid(dev_view(got, DType::F32, {R, qw}),
                           head_slice(dev_view(dqfull, DType::F32, {R, 2 * qw}), c.nh, c.hd, c.hd));
    const auto g = download(got, x.size());
    EXPECT_TRUE(bit_equal(g.data(), download(want, x.size()).data(), x.size()));
    EXPECT_FALSE(bit_equal(g.data(), x.data(), x.size())) << "x was not multiplied";
    EXPECT_TRUE(bit_equal(download(dqfull, qfull.size()).data(), qfull.data(), qfull.size())) << "the gate was written";
  }
}

TEST_F(Gpu, StridedHeadsRejectBadViews) {
  DeviceBuffer q = poisoned(4 * 2 * 64), x = poisoned(3 * 64);
  const TensorView gate = head_slice(dev_view(q, DType::F32, {4, 128}), 2, 32, 32);
  EXPECT_THROW(cuda_ops().mul_sigmoid(dev_view(x, DType::F32, {3, 64}), gate), Error);  // 3 rows for 4
  const std::vector<float> host(4 * 64);
  EXPECT_THROW(cuda_ops().mul_sigmoid(host_view(host.data(), DType::F32, {4, 64}), gate), Error);  // x on the host
}

INSTANTIATE_TEST_SUITE_P(Shapes, StridedHeads,
                         ::testing::Values(StridedCase{24, 4, 256, 64, NormKind::ZeroCentred},
                                           StridedCase{24, 4, 256, 64, NormKind::ZeroCentred, DType::BF16},
                                           StridedCase{16, 2, 128, 128, NormKind::Plain, DType::BF16},
                                           StridedCase{6, 3, 96, 48, NormKind::ZeroCentred},
                                           StridedCase{4, 2, 64, 32, NormKind::Plain}),
                         [](const ::testing::TestParamInfo<StridedCase>& i) {
                           return "heads" + std::to_string(i.param.nh) + "_kv" + std::to_string(i.param.nkv) + "_hd" +
                                  std::to_string(i.param.hd) + "_rot" + std::to_string(i.param.rot) +
                                  (i.param.kv == DType::BF16 ? "_bf16cache" : "");
                         });

}  // namespace
}  // namespace specserve::cuda_test
