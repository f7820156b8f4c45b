// cuda_ops().attention_prefill (attention_prefill.cu, the prefill flash-attention kernel) against
// cpu_ops().attention, and its determinism rule bit for bit (docs/DESIGN.md §1.2): a prompt's rows give the
// same bits in one call as cut into chunks (each chunk's keys stored after the earlier ones', the slots
// past it NaN), and alone as beside other sequences' rows.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <span>
#include <tuple>

#include "backend/cuda/attention_prefill.h"
#include "backend/head_rows.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"
#include "kv_prompts.h"

namespace specserve::cuda_test {
namespace {

struct PrefillCase {
  int nh, nkv, hd;
  DType kv = DType::F32;  // the cache's element type
};

// cuda_ops().attention_prefill over the spans' rows (one call); the output rows in span order.
std::vector<float> prefill(const Prompts& c, int layer, const std::vector<Span>& spans) {
  const std::vector<float> q = queries(c, spans);
  const int64_t R = int64_t(q.size()) / c.q_width();
  DeviceBuffer dq = DeviceBuffer::from(q), out = poisoned(q.size());
  cuda_ops().attention_prefill(dev_view(dq, DType::F32, {R, c.q_width()}), c.geo, layer,
                               rows_of(c, c.dev_tables, spans), c.nh, scale_of(c),
                               dev_view(out, DType::F32, {R, c.q_width()}));
  return download(out, q.size());
}

// One query head per CTA of the kernel for the scope's life (the default serves two of an even group).
struct OneHeadPerCta {
  OneHeadPerCta() { cuda::kernels::set_prefill_heads(cuda::kernels::PrefillHeads::One); }
  ~OneHeadPerCta() { cuda::kernels::set_prefill_heads(cuda::kernels::PrefillHeads::Auto); }
  OneHeadPerCta(const OneHeadPerCta&) = delete;
  OneHeadPerCta& operator=(const OneHeadPerCta&) = delete;
};

// Another prefill kernel serving a bf16 cache for the scope's life (the default is the wgmma kernel; an f32
// cache takes the staged one either way).
struct KernelScope {
  explicit KernelScope(cuda::kernels::PrefillKernel k) { cuda::kernels::set_prefill_kernel(k); }
  ~KernelScope() { cuda::kernels::set_prefill_kernel(cuda::kernels::PrefillKernel::Wgmma); }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
};
using cuda::kernels::PrefillKernel;
const char* kernel_name(PrefillKernel k) {
  return k == PrefillKernel::Wgmma ? "wgmma" : k == PrefillKernel::Pipelined ? "pipelined" : "staged";
}

std::string case_name(const ::testing::TestParamInfo<PrefillCase>& i) {
  return "heads" + std::to_string(i.param.nh) + "_kv" + std::to_string(i.param.nkv) + "_hd" +
         std::to_string(i.param.hd) + (i.param.kv == DType::BF16 ? "_bf16cache" : "");
}

class AttentionPrefill : public Gpu, public ::testing::WithParamInterface<PrefillCase> {};

// Several sequences in one call (a 300-row prompt, a 1100-row one, a prompt's later chunk starting at
// position 37, a 5-row prompt) agree with the CPU's attention to bf16 rounding (q, keys, values and the
// probabilities are bf16 in the tensor-core products; a misplaced fragment would be off by O(1)), through
// the kernel; and each sequence's rows alone give the bits they have in the call, as do a prompt's rows in
// two runs with another sequence's rows between them, and the call with one query head per CTA. The
// pipelined and staged kernels agree with the CPU too, and their rows alone keep their bits.
TEST_P(AttentionPrefill, AgreesWithCpuAndSequencesAreBatchInvariant) {
  const auto [nh, nkv, hd, kv] = GetParam();
  const int layer = 1;
  Prompts c(KvGeometry{2, nkv, hd, kv}, nh, {300, 1100, 90, 5}, 7);
  store(c, layer, {{0, 0, 300}, {1, 0, 1100}, {2, 0, 90}, {3, 0, 5}}, /*host=*/true);
  const std::vector<Span> spans = {{0, 0, 300}, {1, 0, 1100}, {2, 37, 90}, {3, 0, 5}};
  const uint64_t before = cuda::kernels::attention_prefill_calls();
  const std::vector<float> got = prefill(c, layer, spans);
  EXPECT_EQ(cuda::kernels::attention_prefill_calls(), before + 1) << "the prefill kernel served the call";
  {
    const OneHeadPerCta one;
    EXPECT_TRUE(bit_equal(prefill(c, layer, spans).data(), got.data(), got.size())) << "one head per CTA";
  }

  const std::vector<float> q = queries(c, spans);
  const int64_t R = int64_t(q.size()) / c.q_width();
  std::vector<float> want(q.size());
  cpu_ops().attention(host_view(q.data(), DType::F32, {R, c.q_width()}), c.geo, layer, rows_of(c, c.host_tables, spans),
                      nh, scale_of(c), host_view(want.data(), DType::F32, {R, c.q_width()}));
  for (float x : got) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(rel_err(got, want), 1e-2);
  for (int64_t r = 0; r < R; ++r) {
    const std::vector<float> g(got.begin() + r * c.q_width(), got.begin() + (r + 1) * c.q_width()),
        w(want.begin() + r * c.q_width(), want.begin() + (r + 1) * c.q_width());
    ASSERT_LT(rel_err(g, w), 1e-2) << "row " << r;
  }
  for (const PrefillKernel k : {PrefillKernel::Pipelined, PrefillKernel::Staged}) {
    const KernelScope other(k);
    const std::vector<float> s = prefill(c, layer, spans);
    EXPECT_LT(rel_err(s, want), 1e-2) << "the " << kernel_name(k) << " kernel";
    EXPECT_TRUE(bit_equal(prefill(c, layer, {spans[1]}).data(), rows_in(c, s, spans, spans[1]).data(),
                          size_t(spans[1].p1 - spans[1].p0) * size_t(c.q_width())))
        << "the " << kernel_name(k) << " kernel, a sequence alone";
  }
  for (const Span& s : spans) {
    const std::vector<float> alone = prefill(c, layer, {s});
    EXPECT_TRUE(bit_equal(alone.data(), rows_in(c, got, spans, s).data(), alone.size()))
        << "sequence " << s.seq << " alone";
  }
  const std::vector<Span> split = {{1, 0, 350}, {0, 0, 300}, {1, 350, 1100}};
  const std::vector<float> mixed = prefill(c, layer, split);
  for (const Span& s : split)
    EXPECT_TRUE(bit_equal(rows_in(c, mixed, split, s).data(), rows_in(c, got, spans, s).data(),
                          size_t(s.p1 - s.p0) * size_t(c.q_width())))
        << "sequence " << s.seq << " rows " << s.p0 << ".." << s.p1 << " in two runs";
}

// A 700-row prompt in one call against other cuttings into chunks, each chunk's keys and values stored only
// after the earlier chunks ran and every later slot NaN: the same bits, row for row. The default (wgmma)
// kernel takes four cuttings (every other one with one query head per CTA), the pipelined and the staged
// kernels one each, every kernel against its own one call.
TEST_P(AttentionPrefill, ChunkingsGiveTheBitsOfOneCall) {
  const auto [nh, nkv, hd, kv] = GetParam();
  const int layer = 0;
  const int L = 700;
  Prompts c(KvGeometry{2, nkv, hd, kv}, nh, {L}, 21);
  store(c, layer, {{0, 0, L}}, /*host=*/false);
  const PrefillKernel kernels[] = {PrefillKernel::Wgmma, PrefillKernel::Pipelined, PrefillKernel::Staged};
  std::vector<float> whole[3];
  for (int k = 0; k < 3; ++k) {
    const KernelScope scope(kernels[k]);
    whole[k] = prefill(c, layer, {{0, 0, L}});
    for (float x : whole[k]) ASSERT_TRUE(std::isfinite(x));
  }

  std::vector<int> singles = {0, 130};
  for (int p = 131; p <= 142; ++p) singles.push_back(p);
  singles.push_back(L);
  struct Run {
    std::vector<int> cut;
    int kernel;
    bool one_head;
  };
  const std::vector<Run> runs = {{{0, 64, L}, 0, false}, {{0, 300, 301, L}, 0, true},   {{0, 1, 65, 333, L}, 0, false},
                                 {singles, 0, true},     {{0, 1, 65, 333, L}, 1, true}, {singles, 2, false}};
  for (const Run& run : runs) {
    std::optional<OneHeadPerCta> one;
    if (run.one_head) one.emplace();
    const KernelScope scope(kernels[run.kernel]);
    const std::vector<float>& reference = whole[run.kernel];
    c.forget();
    for (size_t i = 0; i + 1 < run.cut.size(); ++i) {
      const Span chunk{0, run.cut[i], run.cut[i + 1]};
      store(c, layer, {chunk}, /*host=*/false);
      const std::vector<float> got = prefill(c, layer, {chunk});
      const std::vector<float> want(reference.begin() + chunk.p0 * c.q_width(),
                                    reference.begin() + chunk.p1 * c.q_width());
      ASSERT_TRUE(bit_equal(got.data(), want.data(), got.size()))
          << "chunk [" << chunk.p0 << ", " << chunk.p1 << ") of cutting " << ::testing::PrintToString(run.cut)
          << ", the " << kernel_name(kernels[run.kernel]) << " kernel";
    }
  }
}

// Head dim 128 and 256 take the kernel with 4 and 6 query heads per KV head (two heads per CTA), and 3 (one).
INSTANTIATE_TEST_SUITE_P(Heads, AttentionPrefill,
                         ::testing::Values(PrefillCase{8, 2, 128}, PrefillCase{12, 2, 128}, PrefillCase{8, 2, 256},
                                           PrefillCase{6, 1, 256}, PrefillCase{6, 2, 128},
                                           PrefillCase{8, 2, 128, DType::BF16}, PrefillCase{8, 2, 256, DType::BF16},
                                           PrefillCase{6, 2, 128, DType::BF16}),
                         case_name);

// The wgmma and pipelined kernels write their output's bf16 copy for the o projection (kernels.h: XbOut): the prefill
// GEMM of the output enqueued right after reads that copy and gets the bits of the same GEMM of a device copy
// of the output (which converts x itself), with the conversion scratch poisoned with NaN first (a register
// the kernel failed to write, a tail column or a padding row, would show). Row counts off the 16-row grid.
TEST_F(Gpu, AttentionPrefillWritesTheOProjectionsCopy) {
  if (!cuda::kernels::wgmma_available()) GTEST_SKIP() << "the prefill GEMM needs sm_90a";
  for (const auto& [kernel, nh, hd] :
       {std::tuple{PrefillKernel::Wgmma, 8, 128}, std::tuple{PrefillKernel::Wgmma, 6, 256},
        std::tuple{PrefillKernel::Pipelined, 8, 128}, std::tuple{PrefillKernel::Pipelined, 6, 256}}) {
    SCOPED_TRACE(std::string(kernel_name(kernel)) + " head dim " + std::to_string(hd));
    const KernelScope scope(kernel);
    Prompts c(KvGeometry{1, 2, hd, DType::BF16}, nh, {203, 77}, 41);
    store(c, 0, {{0, 0, 203}, {1, 0, 77}}, /*host=*/false);
    const std::vector<Span> spans = {{0, 0, 203}, {1, 20, 77}};
    const std::vector<float> q = queries(c, spans);
    const int64_t R = int64_t(q.size()) / c.q_width(), K = c.q_width(), N = 96;
    const DeviceBuffer w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 9, 0.5f)));
    DeviceBuffer dq = DeviceBuffer::from(q), out = poisoned(q.size()), copy(q.size() * 4);
    const DeviceBuffer y_fused = poisoned(size_t(R * N)), y_plain = poisoned(size_t(R * N));
    const TensorView OUT = dev_view(out, DType::F32, {R, K}), W = dev_view(w, DType::BF16, {N, K});
    {  // poison the conversion scratch: a prefill GEMM of NaN rows as wide and as many as the call's
      const std::vector<float> nan(size_t(R * K), NAN);
      DeviceBuffer x = DeviceBuffer::from(nan);
      cuda_ops().matmul_prefill(dev_view(x, DType::F32, {R, K}), W,
                                dev_view(poisoned(size_t(R * N)), DType::F32, {R, N}));
    }
    const uint64_t before = cuda::kernels::matmul_xb_reused();
    cuda_ops().attention_prefill(dev_view(dq, DType::F32, {R, K}), c.geo, 0, rows_of(c, c.dev_tables, spans), c.nh,
                                 scale_of(c), OUT);
    cuda_ops().matmul_prefill(OUT, W, dev_view(y_fused, DType::F32, {R, N}));
    EXPECT_EQ(cuda::kernels::matmul_xb_reused(), before + 1) << "the GEMM read the kernel's copy";
    cuda_memory().copy(copy.data(), out.data(), q.size() * 4);
    cuda_ops().matmul_prefill(dev_view(copy, DType::F32, {R, K}), W, dev_view(y_plain, DType::F32, {R, N}));
    const auto plain = download(y_plain, size_t(R * N));
    for (float x : plain) ASSERT_TRUE(std::isfinite(x));
    EXPECT_TRUE(bit_equal(download(y_fused, size_t(R * N)).data(), plain.data(), plain.size()));
  }
}

// Qwen3.5's output gate applied in the kernels' epilogue (Ops::attention_prefill with a gate read in place from
// the [query | gate] heads of q_proj's output): the bits of the ungated call followed by mul_sigmoid, for every
// kernel; and the o projection's bf16 copy the wgmma and pipelined kernels write holds the gated values (the
// prefill GEMM reading it gets the bits of the GEMM of a device copy of out).
TEST_F(Gpu, AttentionPrefillAppliesTheOutputGate) {
  for (const PrefillKernel kernel : {PrefillKernel::Wgmma, PrefillKernel::Pipelined, PrefillKernel::Staged})
    for (const auto& [nh, hd] : {std::pair{8, 128}, std::pair{6, 256}}) {
      SCOPED_TRACE(std::string(kernel_name(kernel)) + " head dim " + std::to_string(hd));
      const KernelScope scope(kernel);
      Prompts c(KvGeometry{1, 2, hd, DType::BF16}, nh, {150, 90}, 43);
      store(c, 0, {{0, 0, 150}, {1, 0, 90}}, /*host=*/false);
      const std::vector<Span> spans = {{0, 0, 150}, {1, 30, 90}};
      const std::vector<float> q = queries(c, spans);
      const int64_t R = int64_t(q.size()) / c.q_width(), K = c.q_width(), N = 64;
      // The gates at offset hd of each head's 2 hd block, as q_proj writes them.
      const DeviceBuffer gates = DeviceBuffer::from(randn(size_t(R * 2 * K), 17, 2.0f));
      const TensorView gate = head_slice(dev_view(gates, DType::F32, {R, 2 * K}), nh, hd, hd);
      DeviceBuffer dq = DeviceBuffer::from(q), fused = poisoned(q.size()), plain = poisoned(q.size());
      const TensorView Q = dev_view(dq, DType::F32, {R, K});
      cuda_ops().attention_prefill(Q, c.geo, 0, rows_of(c, c.dev_tables, spans), c.nh, scale_of(c),
                                   dev_view(fused, DType::F32, {R, K}), &gate);
      const DeviceBuffer w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 9, 0.5f)));
      const TensorView W = dev_view(w, DType::BF16, {N, K});
      const DeviceBuffer y_fused = poisoned(size_t(R * N)), y_plain = poisoned(size_t(R * N));
      const bool gemm = cuda::kernels::wgmma_available();
      if (gemm)
        cuda_ops().matmul_prefill(dev_view(fused, DType::F32, {R, K}), W, dev_view(y_fused, DType::F32, {R, N}));
      cuda_ops().attention_prefill(Q, c.geo, 0, rows_of(c, c.dev_tables, spans), c.nh, scale_of(c),
                                   dev_view(plain, DType::F32, {R, K}));
      cuda_ops().mul_sigmoid(dev_view(plain, DType::F32, {R, K}), gate);
      const std::vector<float> want = download(plain, q.size());
      for (float x : want) ASSERT_TRUE(std::isfinite(x));
      EXPECT_TRUE(bit_equal(download(fused, q.size()).data(), want.data(), want.size())) << "the gated rows";
      if (gemm) {
        cuda_ops().matmul_prefill(dev_view(plain, DType::F32, {R, K}), W, dev_view(y_plain, DType::F32, {R, N}));
        EXPECT_TRUE(
            bit_equal(download(y_fused, size_t(R * N)).data(), download(y_plain, size_t(R * N)).data(), size_t(R * N)))
            << "the o projection of the gated rows";
      }
    }
}

// What the kernel does not serve (another head dim, a sliding window) is attention()'s, bit for bit.
TEST_F(Gpu, AttentionPrefillFallsBackToAttention) {
  for (const int hd : {64, 128}) {
    Prompts c(KvGeometry{1, 2, hd}, 4, {200}, 31);
    store(c, 0, {{0, 0, 200}}, /*host=*/false);
    std::vector<AttentionRow> rows = rows_of(c, c.dev_tables, {{0, 100, 200}});
    if (hd == 128)
      for (auto& row : rows) row.window_start = std::max(0, row.position - 40);
    const std::vector<float> q = queries(c, {{0, 100, 200}});
    DeviceBuffer dq = DeviceBuffer::from(q), a = poisoned(q.size()), b = poisoned(q.size());
    const TensorView Q = dev_view(dq, DType::F32, {100, c.q_width()});
    const uint64_t before = cuda::kernels::attention_prefill_calls();
    cuda_ops().attention_prefill(Q, c.geo, 0, rows, c.nh, scale_of(c), dev_view(a, DType::F32, {100, c.q_width()}));
    EXPECT_EQ(cuda::kernels::attention_prefill_calls(), before) << "head dim " << hd;
    cuda_ops().attention(Q, c.geo, 0, rows, c.nh, scale_of(c), dev_view(b, DType::F32, {100, c.q_width()}));
    EXPECT_TRUE(bit_equal(download(a, q.size()).data(), download(b, q.size()).data(), q.size())) << "head dim " << hd;
  }
}

// The tiles (host code, no device needed): runs of one sequence at consecutive positions cut every 64 rows
// from the run's first row; a new tile at another sequence or a gap; the tiles with the most keys first.
TEST(AttentionPrefillPlan, TilesAreRunsOfAtMost64ConsecutiveRows) {
  std::vector<cuda::kernels::KvRow> rows;
  for (int p = 10; p < 150; ++p) rows.push_back({0, p, 0});  // 140 rows: tiles of 64, 64, 12
  for (int p = 0; p < 3; ++p) rows.push_back({7, p, 0});     // another sequence
  rows.push_back({7, 5, 0});                                 // a gap: a tile of its own
  rows.push_back({0, 150, 0});                               // sequence 0 again, after others' rows
  cuda::kernels::KvArgs kv;
  kv.host_rows = rows.data();
  kv.R = int64_t(rows.size());
  const auto plan = cuda::kernels::attention_prefill_plan(kv);
  // first row, rows, last position; longest key range first (ties in row order).
  const std::vector<int32_t> want = {144, 1, 150, 128, 12, 149, 64, 64, 137, 0, 64, 73, 143, 1, 5, 140, 3, 2};
  EXPECT_EQ(plan.tiles, want);
  EXPECT_EQ(plan.num_tiles(), 6);
}

}  // namespace
}  // namespace specserve::cuda_test
