// cuda_ops() against cpu_ops() for the paged KV cache, attention (one row, rows of one sequence, the free
// order) and the heads' preparation before it; and their bit-identities on the GPU (a query row alone
// equals the row inside a batch of other sequences' rows). The Gated DeltaNet ops:
// test_cuda_gated_deltanet_ops.cpp.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <span>
#include <string>

#include "backend/cuda/attention_rows.cuh"
#include "backend/cuda/matmul_free_order.h"
#include "gdn_test_util.h"

namespace specserve::cuda_test {
namespace {

// ---- paged KV + attention -----------------------------------------------------------------------------

struct AttnCase {
  int nh, nkv, hd;
  DType kv = DType::F32;  // the cache's element type
};

// Every case with an f32 cache, then again with a bf16 cache (its CUDA kernels read the stored bf16 and
// widen it exactly, as the CPU does: the same bit-identities hold, and the same tolerances but where the
// tensor-core split kernel serves: split_tc_tol).
std::vector<AttnCase> with_bf16_cache(std::vector<AttnCase> cases) {
  const size_t n = cases.size();
  for (size_t i = 0; i < n; ++i) {
    AttnCase c = cases[i];
    c.kv = DType::BF16;
    cases.push_back(c);
  }
  return cases;
}
// The CPU tolerance of Ops::attention: a bf16 cache at head dims 128 and 256 (at most 8 query heads per KV
// head) takes the tensor-core split kernel (attention_split_tc.cu), whose q and probabilities are bf16 in
// the products (a misplaced chunk or fragment would be off by O(1)); the CUDA-core kernels agree to 1e-5.
double split_tc_tol(const AttnCase& c) {
  const bool split = c.kv == DType::BF16 && (c.hd == 128 || c.hd == 256) && c.nh / c.nkv <= 8;
  return split ? 1e-2 : 1e-5;
}

std::string attn_case_name(const ::testing::TestParamInfo<AttnCase>& i) {
  return "heads" + std::to_string(i.param.nh) + "_kv" + std::to_string(i.param.nkv) + "_hd" +
         std::to_string(i.param.hd) + (i.param.kv == DType::BF16 ? "_bf16cache" : "");
}

// Sequences of given lengths with their blocks on the host (for the CPU) and in one device pool in a
// shuffled order (for the GPU), plus each sequence's host table of device block pointers. The blocks are
// geo.block_bytes() apart in the pool (f32 or bf16 elements).
struct Caches {
  KvGeometry geo;
  std::vector<int> lengths;
  std::vector<std::vector<std::vector<float>>> host_blocks;  // [seq][block], block_elems floats: room for either
  std::vector<std::vector<void*>> host_tables, dev_tables;
  DeviceBuffer pool;

  Caches(KvGeometry g, std::vector<int> lens) : geo(g), lengths(std::move(lens)) {
    int total = 0;
    for (int L : lengths) total += (L + kKvBlockSize - 1) / kKvBlockSize;
    pool = poisoned(size_t(total) * size_t(geo.block_bytes()) / 4);
    std::vector<int> order(total);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(5));
    int next = 0;
    for (int L : lengths) {
      const int nb = (L + kKvBlockSize - 1) / kKvBlockSize;
      host_blocks.emplace_back();
      host_tables.emplace_back();
      dev_tables.emplace_back();
      for (int b = 0; b < nb; ++b) {
        host_blocks.back().emplace_back(size_t(geo.block_elems()), 0.0f);
        host_tables.back().push_back(host_blocks.back().back().data());
        dev_tables.back().push_back(pool.as<char>() + int64_t(order[next++]) * geo.block_bytes());
      }
    }
  }
};

struct RowSpec {
  int seq, pos, window_start;
};

std::vector<AttentionRow> rows_of(const std::vector<RowSpec>& spec, std::vector<std::vector<void*>>& tables) {
  std::vector<AttentionRow> rows;
  for (const auto& s : spec) rows.push_back({tables[size_t(s.seq)].data(), s.pos, s.window_start});
  return rows;
}

class Attention : public Gpu, public ::testing::WithParamInterface<AttnCase> {};

TEST_P(Attention, KvStoreAndAttentionAgreeWithCpuAndRowsAreBatchInvariant) {
  const auto [nh, nkv, hd, kv] = GetParam();
  const int layer = 1;
  // 1500 keys: chunks of two tiles (128 keys), the longest window split in 12.
  Caches c(KvGeometry{2, nkv, hd, kv}, {1, 17, 100, 300, 33, 64, 1500});
  // Every position of every sequence, round-robin across sequences (one call mixes all tables);
  // every third row windowed (8 keys).
  std::vector<RowSpec> spec;
  for (int p = 0;; ++p) {
    bool any = false;
    for (int s = 0; s < int(c.lengths.size()); ++s)
      if (p < c.lengths[size_t(s)]) {
        spec.push_back({s, p, spec.size() % 3 == 2 ? std::max(0, p - 7) : 0});
        any = true;
      }
    if (!any) break;
  }
  const int64_t R = int64_t(spec.size()), kvw = int64_t(nkv) * hd, qw = int64_t(nh) * hd;
  auto k = randn(size_t(R * kvw), 81), v = randn(size_t(R * kvw), 82), q = randn(size_t(R * qw), 83);
  auto host_rows = rows_of(spec, c.host_tables);
  auto dev_rows = rows_of(spec, c.dev_tables);

  cpu_ops().kv_store(host_view(k.data(), DType::F32, {R, kvw}), host_view(v.data(), DType::F32, {R, kvw}), c.geo, layer,
                     host_rows);
  DeviceBuffer dk = DeviceBuffer::from(k), dv = DeviceBuffer::from(v), dq = DeviceBuffer::from(q);
  cuda_ops().kv_store(dev_view(dk, DType::F32, {R, kvw}), dev_view(dv, DType::F32, {R, kvw}), c.geo, layer, dev_rows);

  // The stored keys and values are the CPU's, bit for bit, slot by slot (copies in an f32 cache, the
  // same round-to-nearest-even bf16 in a bf16 one).
  std::vector<char> pool(c.pool.bytes());
  c.pool.download(pool.data(), c.pool.bytes());
  for (size_t s = 0; s < c.lengths.size(); ++s)
    for (int p = 0; p < c.lengths[s]; ++p) {
      void* hb = c.host_tables[s][size_t(p / kKvBlockSize)];
      void* db = pool.data() + (static_cast<char*>(c.dev_tables[s][size_t(p / kKvBlockSize)]) - c.pool.as<char>());
      for (int which = 0; which < 2; ++which)
        for (int h = 0; h < nkv; ++h) {
          const int slot = p % kKvBlockSize;
          ASSERT_EQ(0, std::memcmp(c.geo.locate(hb, layer, which, h, slot), c.geo.locate(db, layer, which, h, slot),
                                   size_t(hd * c.geo.elem_bytes())))
              << "seq " << s << " pos " << p;
        }
    }

  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> want(size_t(R * qw));
  cpu_ops().attention(host_view(q.data(), DType::F32, {R, qw}), c.geo, layer, host_rows, nh, scale,
                      host_view(want.data(), DType::F32, {R, qw}));
  DeviceBuffer dout = poisoned(size_t(R * qw));
  const TensorView Q = dev_view(dq, DType::F32, {R, qw});
  cuda_ops().attention(Q, c.geo, layer, dev_rows, nh, scale, dev_view(dout, DType::F32, {R, qw}));
  auto all = download(dout, size_t(R * qw));
  EXPECT_LT(rel_err(all, want), split_tc_tol(GetParam()));

  // A row alone (a decode) gives the bits it has inside the whole batch.
  for (int64_t r = 0; r < R; r += 7) {
    DeviceBuffer one = poisoned(size_t(qw));
    cuda_ops().attention(Q.rows(r, r + 1), c.geo, layer, std::span(&dev_rows[size_t(r)], 1), nh, scale,
                         dev_view(one, DType::F32, {1, qw}));
    ASSERT_TRUE(bit_equal(download(one, size_t(qw)).data(), all.data() + r * qw, size_t(qw))) << "row " << r;
  }
  // And inside a batch of 8 rows of other sequences: the target row at slot 5.
  const int64_t target = R - 3;
  std::vector<int64_t> picks;
  for (int64_t r = 0; int64_t(picks.size()) < 7; r += 13)
    if (spec[size_t(r)].seq != spec[size_t(target)].seq) picks.push_back(r);
  picks.insert(picks.begin() + 5, target);
  std::vector<float> q8;
  std::vector<AttentionRow> rows8;
  for (int64_t r : picks) {
    q8.insert(q8.end(), q.begin() + r * qw, q.begin() + (r + 1) * qw);
    rows8.push_back(dev_rows[size_t(r)]);
  }
  DeviceBuffer dq8 = DeviceBuffer::from(q8), out8 = poisoned(q8.size());
  cuda_ops().attention(dev_view(dq8, DType::F32, {8, qw}), c.geo, layer, rows8, nh, scale,
                       dev_view(out8, DType::F32, {8, qw}));
  auto got8 = download(out8, q8.size());
  for (int i = 0; i < 8; ++i)
    EXPECT_TRUE(bit_equal(got8.data() + i * qw, all.data() + picks[size_t(i)] * qw, size_t(qw))) << "slot " << i;
}

INSTANTIATE_TEST_SUITE_P(Heads, Attention,
                         ::testing::ValuesIn(with_bf16_cache(
                             {AttnCase{4, 2, 128}, AttnCase{8, 2, 64}, AttnCase{2, 2, 256}, AttnCase{6, 3, 96},
                              AttnCase{12, 2, 256}, AttnCase{16, 1, 32}, AttnCase{8, 2, 128}, AttnCase{16, 2, 128}})),
                         attn_case_name);

// ---- rows of one sequence in one CTA (attention.cu's multi-row kernel) ----------------------------------

// Random keys and values at every position of every sequence of c, on both backends.
void fill_caches(Caches& c, int layer, uint32_t seed) {
  std::vector<RowSpec> spec;
  for (int s = 0; s < int(c.lengths.size()); ++s)
    for (int p = 0; p < c.lengths[size_t(s)]; ++p) spec.push_back({s, p, 0});
  const int64_t R = int64_t(spec.size()), kvw = int64_t(c.geo.num_kv_heads) * c.geo.head_dim;
  auto k = randn(size_t(R * kvw), seed), v = randn(size_t(R * kvw), seed + 1);
  cpu_ops().kv_store(host_view(k.data(), DType::F32, {R, kvw}), host_view(v.data(), DType::F32, {R, kvw}), c.geo, layer,
                     rows_of(spec, c.host_tables));
  DeviceBuffer dk = DeviceBuffer::from(k), dv = DeviceBuffer::from(v);
  cuda_ops().kv_store(dev_view(dk, DType::F32, {R, kvw}), dev_view(dv, DType::F32, {R, kvw}), c.geo, layer,
                      rows_of(spec, c.dev_tables));
}

// K rows of sequence `seq` at positions p0 .. p0 + K - 1 (a verify), window start max(ws, p + 1 - window)
// (window 0: no sliding window).
std::vector<RowSpec> run_of(int seq, int p0, int K, int ws = 0, int window = 0) {
  std::vector<RowSpec> spec;
  for (int p = p0; p < p0 + K; ++p) spec.push_back({seq, p, window > 0 ? std::max(ws, p + 1 - window) : ws});
  return spec;
}

class AttentionRows : public Gpu, public ::testing::WithParamInterface<AttnCase> {};

// Sets a process-wide kernel choice for a scope and restores the previous one after it.
template <class T>
struct Scoped {
  Scoped(T (*get)(), void (*s)(T), T value) : set(s), was(get()) { set(value); }
  ~Scoped() { set(was); }
  void (*set)(T);
  T was;
};

// Calls shaped like verify steps (16 rows of one sequence at consecutive positions, and batches of them
// with other rows) take the multi-row kernel where the head dim allows; every row's output has the bits of the row
// computed alone (a decode, the single-row kernel), and agrees with the CPU.
TEST_P(AttentionRows, VerifyRowsEqualOneRowCalls) {
  const auto [nh, nkv, hd, kv] = GetParam();
  // Every call whose rows group takes the multi-row kernel (by default only launches the one-row kernel
  // would take in two waves or more do).
  Scoped force(cuda::attn::row_grouping, cuda::attn::set_row_grouping, cuda::attn::RowGrouping::Always);
  const int layer = 1, G = nh / nkv;
  Caches c(KvGeometry{2, nkv, hd, kv}, {1100, 560, 300});
  fill_caches(c, layer, 91);
  auto cat = [](std::vector<std::vector<RowSpec>> parts) {
    std::vector<RowSpec> all;
    for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  };
  const std::vector<std::pair<const char*, std::vector<RowSpec>>> calls = {
      {"windows 57..72: the first 64-key tile boundary, one or two chunks", run_of(0, 56, 16)},
      {"windows 505..520 (the 8B verify profile): 8 or 9 chunks", run_of(1, 504, 16)},
      {"windows 1015..1030: chunks of 64 keys, then of 128 from 1025", run_of(0, 1014, 16)},
      {"7 rows, chunks of 128 keys", run_of(0, 1080, 7)},
      {"window start 37, off the block and tile grid", run_of(1, 200, 16, 37)},
      {"a 100-key sliding window not yet full (start 0)", run_of(2, 84, 16, 0, 100)},
      {"two verifies, a sliding verify (a start per row) and a decode row",
       cat({run_of(0, 700, 16), run_of(1, 530, 16), run_of(2, 150, 4, 0, 100), run_of(2, 299, 1)})},
      {"a decode row between two verifies of one sequence",
       cat({run_of(1, 100, 16), run_of(2, 40, 1), run_of(1, 116, 16)})},
  };
  const float scale = 1.0f / std::sqrt(float(hd));
  const int64_t qw = int64_t(nh) * hd;
  uint32_t seed = 400;
  for (const auto& [what, spec] : calls) {
    SCOPED_TRACE(what);
    const int64_t R = int64_t(spec.size());
    // The call's rows group, so it takes the multi-row kernel (head_dim 96 has none: the single-row one).
    std::vector<cuda::kernels::KvRow> krows;
    for (const auto& s : spec) krows.push_back({s.seq, s.pos, s.window_start});
    EXPECT_FALSE(cuda::attn::row_items(krows.data(), R, cuda::attn::item_queries(G) / G).empty());

    auto q = randn(size_t(R * qw), seed++);
    auto host_rows = rows_of(spec, c.host_tables), dev_rows = rows_of(spec, c.dev_tables);
    std::vector<float> want(size_t(R * qw));
    cpu_ops().attention(host_view(q.data(), DType::F32, {R, qw}), c.geo, layer, host_rows, nh, scale,
                        host_view(want.data(), DType::F32, {R, qw}));
    DeviceBuffer dq = DeviceBuffer::from(q);
    const TensorView Q = dev_view(dq, DType::F32, {R, qw});
    std::vector<float> alone(size_t(R * qw));  // each row computed alone (the single-row kernel)
    for (int64_t r = 0; r < R; ++r) {
      DeviceBuffer one = poisoned(size_t(qw));
      cuda_ops().attention(Q.rows(r, r + 1), c.geo, layer, std::span(&dev_rows[size_t(r)], 1), nh, scale,
                           dev_view(one, DType::F32, {1, qw}));
      const auto o = download(one, size_t(qw));
      std::copy(o.begin(), o.end(), alone.begin() + r * qw);
    }
    DeviceBuffer dout = poisoned(size_t(R * qw));
    cuda_ops().attention(Q, c.geo, layer, dev_rows, nh, scale, dev_view(dout, DType::F32, {R, qw}));
    const auto got = download(dout, size_t(R * qw));
    EXPECT_LT(rel_err(got, want), split_tc_tol(GetParam()));
    for (int64_t r = 0; r < R; ++r)
      ASSERT_TRUE(bit_equal(alone.data() + r * qw, got.data() + r * qw, size_t(qw)))
          << "row " << r << " (seq " << spec[size_t(r)].seq << ", position " << spec[size_t(r)].pos << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, AttentionRows,
                         ::testing::ValuesIn(with_bf16_cache(
                             {AttnCase{32, 8, 128}, AttnCase{16, 2, 128}, AttnCase{8, 2, 64}, AttnCase{16, 2, 64},
                              AttnCase{24, 4, 256}, AttnCase{4, 4, 32}, AttnCase{6, 3, 96}})),
                         attn_case_name);

// ---- attention in a free order (attention_free.cu: the drafter's forward) ------------------------------

class FreeOrderAttention : public Gpu, public ::testing::WithParamInterface<AttnCase> {};

// Under MatmulOrder::Free attention takes the free-order kernel (head dims 32, 64, 128; 96 and 256 fall back
// to the fixed order, bit for bit) and agrees with the CPU to bf16 rounding (its q, keys, values and
// probabilities are bf16 in the tensor-core products; a misplaced fragment would be off by O(1)):
// drafter blocks (16 rows of a sequence that see the same keys, over 300 keys: five 64-key tiles,
// the last partial), 40 rows with one key range (cut into items of 32 and 8), a causal run, sliding
// windows, a one-key sequence and a windowed block, all in one call (two key splits and their merge);
// a drafter block alone (one sequence) keeps the fixed-order kernels. After
// the scope, the fixed-order kernels run again (the same bits as before it).
TEST_P(FreeOrderAttention, AgreesWithCpuAndTakesThePath) {
  const auto [nh, nkv, hd, kv] = GetParam();
  const int layer = 1;
  Caches c(KvGeometry{2, nkv, hd, kv}, {40, 300, 1, 70});
  fill_caches(c, layer, 91);
  std::vector<RowSpec> spec;
  for (int i = 0; i < 16; ++i) spec.push_back({1, 299, 0});
  for (int i = 0; i < 40; ++i) spec.push_back({0, 39, 0});
  for (const auto& r : run_of(3, 50, 20)) spec.push_back(r);
  for (const auto& r : run_of(1, 100, 9, 0, 33)) spec.push_back(r);
  spec.push_back({2, 0, 0});
  for (int i = 0; i < 5; ++i) spec.push_back({3, 69, 60});
  const int64_t R = int64_t(spec.size()), qw = int64_t(nh) * hd;
  const auto q = randn(size_t(R * qw), 92);
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> want(size_t(R * qw));
  cpu_ops().attention(host_view(q.data(), DType::F32, {R, qw}), c.geo, layer, rows_of(spec, c.host_tables), nh, scale,
                      host_view(want.data(), DType::F32, {R, qw}));
  DeviceBuffer dq = DeviceBuffer::from(q), fixed = poisoned(size_t(R * qw)), free = poisoned(size_t(R * qw));
  const TensorView Q = dev_view(dq, DType::F32, {R, qw});
  const auto dev_rows = rows_of(spec, c.dev_tables);
  cuda_ops().attention(Q, c.geo, layer, dev_rows, nh, scale, dev_view(fixed, DType::F32, {R, qw}));
  const uint64_t before = cuda::free_order_attentions();
  {
    const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
    cuda_ops().attention(Q, c.geo, layer, dev_rows, nh, scale, dev_view(free, DType::F32, {R, qw}));
  }
  const bool served = cuda::kernels::attention_free_supports(hd);
  EXPECT_EQ(cuda::free_order_attentions(), before + (served ? 1 : 0)) << "the free-order kernel ran where it serves";
  const auto got = download(free, size_t(R * qw));
  if (!served) {
    EXPECT_TRUE(bit_equal(got.data(), download(fixed, size_t(R * qw)).data(), size_t(R * qw))) << "fell back";
  }
  for (float v : got) ASSERT_TRUE(std::isfinite(v));
  const double tol = served ? 1e-2 : split_tc_tol(GetParam());
  EXPECT_LT(rel_err(got, want), tol);
  for (int64_t r = 0; r < R; ++r) {
    const std::vector<float> g(got.begin() + r * qw, got.begin() + (r + 1) * qw),
        w(want.begin() + r * qw, want.begin() + (r + 1) * qw);
    ASSERT_LT(rel_err(g, w), tol) << "row " << r;
  }
  // One drafter block alone: one sequence, which the fixed-order kernels serve.
  {
    DeviceBuffer one = poisoned(size_t(16 * qw));
    const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
    const uint64_t before_one = cuda::free_order_attentions();
    cuda_ops().attention(Q.rows(0, 16), c.geo, layer, std::span(dev_rows.data(), 16), nh, scale,
                         dev_view(one, DType::F32, {16, qw}));
    EXPECT_EQ(cuda::free_order_attentions(), before_one);
    const std::vector<float> w(want.begin(), want.begin() + 16 * qw);
    EXPECT_LT(rel_err(download(one, size_t(16 * qw)), w), split_tc_tol(GetParam()));
  }
  DeviceBuffer after = poisoned(size_t(R * qw));
  cuda_ops().attention(Q, c.geo, layer, dev_rows, nh, scale, dev_view(after, DType::F32, {R, qw}));
  EXPECT_TRUE(bit_equal(download(after, size_t(R * qw)).data(), download(fixed, size_t(R * qw)).data(), size_t(R * qw)))
      << "the fixed order after the scope";
}

INSTANTIATE_TEST_SUITE_P(Heads, FreeOrderAttention,
                         ::testing::ValuesIn(with_bf16_cache(
                             {AttnCase{32, 2, 128}, AttnCase{32, 8, 128}, AttnCase{4, 2, 32}, AttnCase{8, 2, 64},
                              AttnCase{12, 2, 256}, AttnCase{16, 1, 64}, AttnCase{6, 3, 96}, AttnCase{4, 4, 128}})),
                         attn_case_name);

// The fused per-head preparation gives the bits of rms_norm, rope and kv_store called one by one: q
// and k in place, and every byte of the cache (the two pools start with the same poison).
struct HeadPrepCase {
  int nh, nkv, hd, rot;
  NormKind norm;
  DType kv = DType::F32;  // the cache's element type
};

class HeadPrep : public Gpu, public ::testing::WithParamInterface<HeadPrepCase> {
 protected:
  // Random q [Rq rows], k and v [R rows] and head norms, with two device copies of q and k: one for the
  // fused call (q1, k1), one for the ops one by one (q2, k2).
  struct Inputs {
    int64_t qw, kvw;
    std::vector<float> q, k, v, qn, kn;
    DeviceBuffer q1, q2, k1, k2, dv, dqn, dkn;
    QkPrep prep;
    Inputs(const HeadPrepCase& c, int64_t Rq, int64_t R, uint32_t seed)
        : qw(int64_t(c.nh) * c.hd),
          kvw(int64_t(c.nkv) * c.hd),
          q(randn(size_t(std::max<int64_t>(Rq, 1) * qw), seed)),
          k(randn(size_t(R * kvw), seed + 1, 3.0f)),
          v(randn(size_t(R * kvw), seed + 2)),
          qn(randn(size_t(c.hd), seed + 3, 0.3f)),
          kn(randn(size_t(c.hd), seed + 4, 0.3f)),
          q1(DeviceBuffer::from(q)),
          q2(DeviceBuffer::from(q)),
          k1(DeviceBuffer::from(k)),
          k2(DeviceBuffer::from(k)),
          dv(DeviceBuffer::from(v)),
          dqn(DeviceBuffer::from(qn)),
          dkn(DeviceBuffer::from(kn)),
          prep{dev_view(dqn, DType::F32, {c.hd}), dev_view(dkn, DType::F32, {c.hd}), c.norm, 1e-6f, c.rot, 1e6} {}
    TensorView Q(DeviceBuffer& b, int64_t Rq) const { return dev_view(b, DType::F32, {Rq, qw}); }
    TensorView K(DeviceBuffer& b) const { return dev_view(b, DType::F32, {int64_t(k.size()) / kvw, kvw}); }
    TensorView V() { return dev_view(dv, DType::F32, {int64_t(v.size()) / kvw, kvw}); }
  };

  // rms_norm, rope and kv_store one by one on q2 (Rq rows at q_positions) and k2 (at the rows' positions).
  static void apart(Inputs& in, int64_t Rq, std::span<const int32_t> q_positions, const KvGeometry& geo, int layer,
                    std::span<const AttentionRow> rows) {
    const HeadPrepCase c = GetParam();
    std::vector<int32_t> kv_positions;
    for (const auto& row : rows) kv_positions.push_back(row.position);
    const TensorView Q2 = in.Q(in.q2, Rq), K2 = in.K(in.k2);
    if (Rq > 0) cuda_ops().rms_norm(Q2, in.prep.q_norm, c.norm, in.prep.eps, Q2);
    cuda_ops().rms_norm(K2, in.prep.k_norm, c.norm, in.prep.eps, K2);
    if (Rq > 0) cuda_ops().rope(Q2, c.nh, c.hd, c.rot, in.prep.theta, q_positions);
    cuda_ops().rope(K2, c.nkv, c.hd, c.rot, in.prep.theta, kv_positions);
    cuda_ops().kv_store(K2, in.V(), geo, layer, rows);
  }

  // The fused op on q1 / k1 into `fused` and the ops one by one on q2 / k2 into `one_by_one`, for R rows
  // whose queries are the KV rows; every bit compared. Returns the rows' positions.
  static std::vector<int32_t> fused_against_apart(Inputs& in, const std::vector<RowSpec>& spec, const KvGeometry& geo,
                                                  int layer, Caches& fused, Caches& one_by_one) {
    const int64_t R = int64_t(spec.size());
    cuda_ops().qk_norm_rope_kv_store(in.Q(in.q1, R), in.K(in.k1), in.V(), in.prep, geo, layer,
                                     rows_of(spec, fused.dev_tables));
    std::vector<int32_t> positions;
    for (const auto& sp : spec) positions.push_back(sp.pos);
    apart(in, R, positions, geo, layer, rows_of(spec, one_by_one.dev_tables));
    expect_same(in, fused, one_by_one);
    return positions;
  }

  // q, k and every byte of the two caches agree.
  static void expect_same(Inputs& in, Caches& fused, Caches& one_by_one) {
    const size_t nq = in.q.size(), nk = in.k.size(), pool = fused.pool.bytes() / 4;
    EXPECT_TRUE(bit_equal(download(in.q1, nq).data(), download(in.q2, nq).data(), nq));
    EXPECT_TRUE(bit_equal(download(in.k1, nk).data(), download(in.k2, nk).data(), nk));
    EXPECT_TRUE(bit_equal(download(fused.pool, pool).data(), download(one_by_one.pool, pool).data(), pool));
  }
};

TEST_P(HeadPrep, FusedEqualsNormRopeStore) {
  const HeadPrepCase c = GetParam();
  const int layer = 1;
  const KvGeometry geo{3, c.nkv, c.hd, c.kv};
  Caches fused(geo, {1, 40, 300, 17}), one_by_one(geo, {1, 40, 300, 17});
  // A decode row, an extend of 16 rows crossing a block boundary, a prefill-like run, one row.
  std::vector<RowSpec> spec{{0, 0, 0}};
  for (int p = 24; p < 40; ++p) spec.push_back({1, p, 0});
  for (int p = 250; p < 300; ++p) spec.push_back({2, p, std::max(0, p - 7)});
  spec.push_back({3, 16, 0});
  const int64_t R = int64_t(spec.size());
  Inputs in(c, R, R, 301);
  const std::vector<int32_t> positions = fused_against_apart(in, spec, geo, layer, fused, one_by_one);

  // And the result is the CPU's composition within the rope's sincosf tolerance.
  std::vector<float> qc = in.q;
  cpu_ops().rms_norm(host_view(qc.data(), DType::F32, {R, in.qw}), host_view(in.qn.data(), DType::F32, {c.hd}), c.norm,
                     in.prep.eps, host_view(qc.data(), DType::F32, {R, in.qw}));
  cpu_ops().rope(host_view(qc.data(), DType::F32, {R, in.qw}), c.nh, c.hd, c.rot, in.prep.theta, positions);
  EXPECT_LT(rel_err(download(in.q1, in.q.size()), qc), 1e-5);
}

// Calls of 64 rows and more take the by-row kernel, whose blocks each take a run of a row's heads (fewer
// rows: more runs a row, some of them empty at 64 rows): the bits of the ops one by one at every split.
TEST_P(HeadPrep, ByRowRunsEqualNormRopeStore) {
  const HeadPrepCase c = GetParam();
  const int layer = 0;
  const KvGeometry geo{1, c.nkv, c.hd, c.kv};
  for (const int R : {64, 130, 700}) {
    SCOPED_TRACE("rows " + std::to_string(R));
    Caches fused(geo, {R + 5}), one_by_one(geo, {R + 5});
    std::vector<RowSpec> spec;
    for (int p = 5; p < R + 5; ++p) spec.push_back({0, p, 0});
    Inputs in(c, R, R, 17 + R);
    fused_against_apart(in, spec, geo, layer, fused, one_by_one);
  }
}

// The form whose queries are other rows than its keys (the DFlash drafter's: queries for the block rows
// only, at their own positions): the bits of the ops one by one, and with no query rows only k's part.
TEST_P(HeadPrep, RowsFormEqualsNormRopeStore) {
  const HeadPrepCase c = GetParam();
  const int layer = 2;
  const KvGeometry geo{3, c.nkv, c.hd, c.kv};
  for (const int64_t Rq : {int64_t{0}, int64_t{1}, int64_t{21}}) {
    SCOPED_TRACE("query rows " + std::to_string(Rq));
    Caches fused(geo, {25, 33, 49}), one_by_one(geo, {25, 33, 49});
    // Context rows of two sequences, then a block of each.
    std::vector<RowSpec> spec;
    for (int p = 3; p < 9; ++p) spec.push_back({0, p, 0});
    for (int p = 30; p < 33; ++p) spec.push_back({1, p, 0});
    for (int p = 9; p < 25; ++p) spec.push_back({0, p, 0});
    for (int p = 33; p < 49; ++p) spec.push_back({2, p, 0});
    std::vector<int32_t> q_positions;
    for (int64_t r = 0; r < Rq; ++r) q_positions.push_back(static_cast<int32_t>(1000 + 37 * r));
    Inputs in(c, Rq, int64_t(spec.size()), 311);
    cuda_ops().qk_norm_rope_kv_store_rows(in.Q(in.q1, Rq), q_positions, in.K(in.k1), in.V(), in.prep, geo, layer,
                                          rows_of(spec, fused.dev_tables));
    apart(in, Rq, q_positions, geo, layer, rows_of(spec, one_by_one.dev_tables));
    expect_same(in, fused, one_by_one);
    // A query row left as it was would pass the comparison of q: check one moved.
    if (Rq > 0) {
      EXPECT_FALSE(bit_equal(download(in.q1, size_t(in.qw)).data(), in.q.data(), size_t(in.qw)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, HeadPrep,
                         ::testing::Values(HeadPrepCase{32, 8, 128, 128, NormKind::Plain},
                                           HeadPrepCase{24, 4, 256, 64, NormKind::ZeroCentred},
                                           HeadPrepCase{4, 2, 64, 32, NormKind::Plain},
                                           HeadPrepCase{6, 3, 96, 96, NormKind::ZeroCentred},
                                           HeadPrepCase{32, 8, 128, 128, NormKind::Plain, DType::BF16},
                                           HeadPrepCase{24, 4, 256, 64, NormKind::ZeroCentred, DType::BF16}),
                         [](const ::testing::TestParamInfo<HeadPrepCase>& i) {
                           return "heads" + std::to_string(i.param.nh) + "_kv" + std::to_string(i.param.nkv) + "_hd" +
                                  std::to_string(i.param.hd) + "_rot" + std::to_string(i.param.rot) +
                                  (i.param.kv == DType::BF16 ? "_bf16cache" : "");
                         });

}  // namespace
}  // namespace specserve::cuda_test
