// cuda_ops().attention on a bf16 cache at head dims 128 and 256: the tensor-core split kernel
// (attention_split_tc.cu) against cpu_ops().attention, and its rule bit for bit (docs/DESIGN.md §1.1): a
// row gives the same bits alone (a decode, with every later slot of its cache unwritten) as inside a
// verify of 16 rows, beside other sequences' rows, and whichever rows share its CTA.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/attention_split_tc.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"
#include "kv_prompts.h"

namespace specserve::cuda_test {
namespace {

struct SplitCase {
  int nh, nkv, hd;
};

std::string case_name(const ::testing::TestParamInfo<SplitCase>& i) {
  return "heads" + std::to_string(i.param.nh) + "_kv" + std::to_string(i.param.nkv) + "_hd" +
         std::to_string(i.param.hd);
}

// cuda_ops().attention over the rows (one call); the outputs in row order. Checks that the split kernel
// served it.
std::vector<float> attend(const Prompts& c, int layer, const std::vector<AttentionRow>& rows,
                          const std::vector<float>& q) {
  const auto R = int64_t(rows.size());
  DeviceBuffer dq = DeviceBuffer::from(q), out = poisoned(q.size());
  const uint64_t before = cuda::kernels::attention_split_tc_calls();
  cuda_ops().attention(dev_view(dq, DType::F32, {R, c.q_width()}), c.geo, layer, rows, c.nh, scale_of(c),
                       dev_view(out, DType::F32, {R, c.q_width()}));
  EXPECT_EQ(cuda::kernels::attention_split_tc_calls(), before + 1) << "the split kernel served the call";
  return download(out, q.size());
}

std::vector<float> row_of(const Prompts& c, const std::vector<float>& out, int64_t r) {
  return std::vector<float>(out.begin() + r * c.q_width(), out.begin() + (r + 1) * c.q_width());
}

class AttentionSplitTc : public Gpu, public ::testing::WithParamInterface<SplitCase> {};

// The split kernel's form (attention_split_tc.h) for a scope, Auto again after it.
struct WalkScope {
  explicit WalkScope(cuda::attn::SplitWalk w) { cuda::attn::set_split_walk(w); }
  ~WalkScope() { cuda::attn::set_split_walk(cuda::attn::SplitWalk::Auto); }
};

constexpr cuda::attn::SplitWalk kForms[] = {cuda::attn::SplitWalk::Never, cuda::attn::SplitWalk::Always};
const char* form_name(cuda::attn::SplitWalk w) { return w == cuda::attn::SplitWalk::Never ? "split" : "walk"; }

// Decode rows at many window lengths (one key, one tile, 1,024 and 1,025 keys, 5,000: chunks of 128 keys
// past 4,096), a verify of 16 rows straddling 4,096, and sliding-window rows, in one call: each row within bf16
// rounding of the CPU (q, keys, values and the probabilities are bf16 in the products; a misplaced chunk
// or fragment is off by O(1)).
TEST_P(AttentionSplitTc, AgreesWithCpu) {
  const auto [nh, nkv, hd] = GetParam();
  const int layer = 1;
  Prompts c(KvGeometry{2, nkv, hd, DType::BF16}, nh, {5000, 4105, 70}, 11);
  store(c, layer, {{0, 0, 5000}, {1, 0, 4105}, {2, 0, 70}}, /*host=*/true);
  std::vector<Span> spans = {{0, 0, 1}, {0, 63, 64}, {0, 1023, 1025}, {0, 4999, 5000}, {1, 4089, 4105}, {2, 69, 70}};
  std::vector<AttentionRow> dev = rows_of(c, c.dev_tables, spans), host = rows_of(c, c.host_tables, spans);
  // Sliding windows: two rows of sequence 0 see only their last 700 and 1,500 keys.
  for (const int p : {3000, 4500}) {
    spans.push_back({0, p, p + 1});
    const int w0 = p - (p == 3000 ? 699 : 1499);
    dev.push_back({c.dev_tables[0].data(), p, w0});
    host.push_back({c.host_tables[0].data(), p, w0});
  }
  const std::vector<float> q = queries(c, spans);
  const auto R = int64_t(dev.size());
  std::vector<float> want(q.size());
  cpu_ops().attention(host_view(q.data(), DType::F32, {R, c.q_width()}), c.geo, layer, host, nh, scale_of(c),
                      host_view(want.data(), DType::F32, {R, c.q_width()}));
  for (const auto form : kForms) {
    const WalkScope scope(form);
    const std::vector<float> got = attend(c, layer, dev, q);
    for (float x : got) ASSERT_TRUE(std::isfinite(x));
    for (int64_t r = 0; r < R; ++r)
      EXPECT_LT(rel_err(row_of(c, got, r), row_of(c, want, r)), 1e-2)
          << form_name(form) << ": row " << r << " at " << dev[size_t(r)].position;
  }
}

// The walking form (one CTA walks an item's chunks and merges them in registers) against the split form (a CTA a
// chunk, then the combine kernel), bit for bit over whole calls (head dim 256 takes the split form in both): verifies
// of 8 and 16 rows whose rows have 8 or 9 chunks, a verify straddling the chunk-size change at 1,024 keys and the one
// at 4,096, decode rows of one chunk and of many, sliding windows; and the walk counted only when it took the call.
TEST_P(AttentionSplitTc, WalkEqualsSplit) {
  const auto [nh, nkv, hd] = GetParam();
  const int layer = 1;
  Prompts c(KvGeometry{2, nkv, hd, DType::BF16}, nh, {530, 1040, 4100, 60}, 31);
  store(c, layer, {{0, 0, 530}, {1, 0, 1040}, {2, 0, 4100}, {3, 0, 60}}, /*host=*/false);
  std::vector<Span> spans = {{0, 505, 513}, {0, 514, 530},   {1, 1016, 1032}, {2, 4088, 4100},
                             {3, 40, 41},   {2, 2000, 2001}, {1, 1035, 1040}, {3, 59, 60}};
  std::vector<AttentionRow> rows = rows_of(c, c.dev_tables, spans);
  for (const int p : {3000, 4050}) {  // sliding windows of 700 and 100 keys
    spans.push_back({2, p, p + 1});
    rows.push_back({c.dev_tables[2].data(), p, p - (p == 3000 ? 699 : 99)});
  }
  const std::vector<float> q = queries(c, spans);
  std::vector<float> got[2];
  for (int f = 0; f < 2; ++f) {
    const WalkScope scope(kForms[f]);
    const uint64_t walked = cuda::kernels::attention_split_walk_calls();
    got[f] = attend(c, layer, rows, q);
    EXPECT_EQ(cuda::kernels::attention_split_walk_calls(), walked + uint64_t(f == 1 && hd == 128))
        << form_name(kForms[f]) << " (the walking form serves head dim 128)";
  }
  for (float x : got[0]) ASSERT_TRUE(std::isfinite(x));
  const auto R = int64_t(rows.size());
  for (int64_t r = 0; r < R; ++r)
    EXPECT_TRUE(bit_equal(row_of(c, got[1], r).data(), row_of(c, got[0], r).data(), size_t(c.q_width())))
        << "row " << r << " at " << rows[size_t(r)].position;
}

// The walking form writes its output's bf16 copy for the o projection (kernels.h: XbOut) as the combine kernel
// does: the matmul enqueued right after reads it and gets the bits of the same matmul of a device copy of the
// output, with the copy's scratch poisoned first; 2 sequences x 8 rows (a gemv that reads a bf16 copy).
TEST_P(AttentionSplitTc, WalkWritesTheOProjectionsCopy) {
  const auto [nh, nkv, hd] = GetParam();
  if (hd != 128) GTEST_SKIP() << "the walking form serves head dim 128";
  const WalkScope scope(cuda::attn::SplitWalk::Always);
  Prompts c(KvGeometry{1, nkv, hd, DType::BF16}, nh, {300, 700}, 37);
  store(c, 0, {{0, 0, 300}, {1, 0, 700}}, /*host=*/false);
  const std::vector<Span> spans = {{0, 292, 300}, {1, 692, 700}};
  const std::vector<float> q = queries(c, spans);
  const int64_t R = int64_t(q.size()) / c.q_width(), K = c.q_width(), N = 64;
  const DeviceBuffer w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 9, 0.5f)));
  const TensorView W = dev_view(w, DType::BF16, {N, K});
  {  // poison the copy's scratch: the same matmul of NaN rows
    DeviceBuffer x = DeviceBuffer::from(std::vector<float>(size_t(R * K), NAN)), y = poisoned(size_t(R * N));
    cuda_ops().matmul(dev_view(x, DType::F32, {R, K}), W, dev_view(y, DType::F32, {R, N}));
  }
  DeviceBuffer dq = DeviceBuffer::from(q), out = poisoned(q.size()), copy(q.size() * 4);
  const DeviceBuffer y_fused = poisoned(size_t(R * N)), y_plain = poisoned(size_t(R * N));
  const TensorView OUT = dev_view(out, DType::F32, {R, K});
  const uint64_t walked = cuda::kernels::attention_split_walk_calls();
  const uint64_t before = cuda::kernels::matmul_xb_reused();
  cuda_ops().attention(dev_view(dq, DType::F32, {R, K}), c.geo, 0, rows_of(c, c.dev_tables, spans), c.nh, scale_of(c),
                       OUT);
  cuda_ops().matmul(OUT, W, dev_view(y_fused, DType::F32, {R, N}));
  EXPECT_EQ(cuda::kernels::attention_split_walk_calls(), walked + 1) << "the walking form served the call";
  EXPECT_EQ(cuda::kernels::matmul_xb_reused(), before + 1) << "the matmul read the kernel's copy";
  cuda_memory().copy(copy.data(), out.data(), q.size() * 4);
  cuda_ops().matmul(dev_view(copy, DType::F32, {R, K}), W, dev_view(y_plain, DType::F32, {R, N}));
  const auto plain = download(y_plain, size_t(R * N));
  for (float x : plain) ASSERT_TRUE(std::isfinite(x));
  EXPECT_TRUE(bit_equal(download(y_fused, size_t(R * N)).data(), plain.data(), plain.size()));
}

// A verify of 16 rows (positions p0 .. p0 + 15) in one call; each row alone, as its decode step sees the
// cache (keys up to its own position stored, every later slot NaN); the verify beside other sequences'
// decode and verify rows, and its rows in reverse order (other items): the same bits, row for row. At
// p0 = 4,088 the verify straddles the change of chunk size at 4,096 keys (two items), at 2,100 it does not. The
// verify alone also in the walking form (the decodes stay split: one row's eight CTAs do not fill a GPU).
TEST_P(AttentionSplitTc, RowBitsIgnoreTheCall) {
  const auto [nh, nkv, hd] = GetParam();
  const int layer = 0;
  for (const int p0 : {2100, 4088}) {
    const int L = p0 + 16;
    Prompts c(KvGeometry{2, nkv, hd, DType::BF16}, nh, {L, 3000}, 23 + uint32_t(p0));
    store(c, layer, {{0, 0, L}, {1, 0, 3000}}, /*host=*/false);
    const Span verify{0, p0, L};
    const std::vector<float> whole = attend(c, layer, rows_of(c, c.dev_tables, {verify}), queries(c, {verify}));
    for (float x : whole) ASSERT_TRUE(std::isfinite(x));
    {  // the verify in the walking form
      const WalkScope scope(cuda::attn::SplitWalk::Always);
      const std::vector<float> walked = attend(c, layer, rows_of(c, c.dev_tables, {verify}), queries(c, {verify}));
      EXPECT_TRUE(bit_equal(walked.data(), whole.data(), whole.size())) << "p0 " << p0 << ": walked";
    }

    const std::vector<Span> mixed = {{1, 2000, 2001}, verify, {1, 2984, 3000}};
    const std::vector<float> beside = attend(c, layer, rows_of(c, c.dev_tables, mixed), queries(c, mixed));
    EXPECT_TRUE(bit_equal(rows_in(c, beside, mixed, verify).data(), whole.data(), whole.size()))
        << "p0 " << p0 << ": beside other sequences' rows";

    std::vector<AttentionRow> reversed = rows_of(c, c.dev_tables, {verify});
    std::reverse(reversed.begin(), reversed.end());
    std::vector<float> q_rev;
    for (int p = L - 1; p >= p0; --p) {
      const std::vector<float> qp = queries(c, {{0, p, p + 1}});
      q_rev.insert(q_rev.end(), qp.begin(), qp.end());
    }
    const std::vector<float> rev = attend(c, layer, reversed, q_rev);
    for (int i = 0; i < 16; ++i)
      EXPECT_TRUE(bit_equal(row_of(c, rev, 15 - i).data(), row_of(c, whole, i).data(), size_t(c.q_width())))
          << "p0 " << p0 << ": row " << i << " in reverse order";

    for (const int p : {p0, p0 + 7, p0 + 8, L - 1}) {
      c.forget();
      store(c, layer, {{0, 0, p + 1}}, /*host=*/false);
      const Span one{0, p, p + 1};
      const std::vector<float> alone = attend(c, layer, rows_of(c, c.dev_tables, {one}), queries(c, {one}));
      EXPECT_TRUE(bit_equal(alone.data(), row_of(c, whole, p - p0).data(), alone.size()))
          << "p0 " << p0 << ": the decode of position " << p;
    }
  }
}

// Head dims 128 and 256 with 4 (the 8B: 64 pairs for a verify, four warps), 6 (the 27B: 96, eight warps),
// 8 and 1 query heads per KV head.
INSTANTIATE_TEST_SUITE_P(Heads, AttentionSplitTc,
                         ::testing::Values(SplitCase{8, 2, 128}, SplitCase{12, 2, 256}, SplitCase{16, 2, 128},
                                           SplitCase{2, 2, 256}),
                         case_name);

}  // namespace
}  // namespace specserve::cuda_test
