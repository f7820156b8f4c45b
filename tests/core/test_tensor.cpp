#include <mutex>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

using namespace specserve;

TEST(Tensor, ShapesAndViews) {
  Tensor t = Tensor::zeros(DType::F32, {3, 4});
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.as<float>()) % 64, 0u);
  std::iota(t.as<float>(), t.as<float>() + 12, 0.0f);
  TensorView r = t.view().rows(1, 3);
  EXPECT_EQ(r.shape, (Shape{2, 4}));
  EXPECT_EQ(r.as<float>()[0], 4.0f);
  TensorView row2 = t.view()[2];
  EXPECT_EQ(row2.ndim(), 1);
  EXPECT_EQ(row2.as<float>()[3], 11.0f);
  EXPECT_TRUE(t.view().reshape({12}).is_contiguous());
  EXPECT_THROW(t.view().reshape({5}), Error);
  EXPECT_THROW(t.view().rows(2, 4), Error);
  EXPECT_EQ(t.view().describe(), "F32[3, 4]");
}

TEST(Tensor, ConvertBf16) {
  Tensor t = Tensor::empty(DType::F32, {5});
  for (int i = 0; i < 5; ++i) t.as<float>()[i] = 0.5f * i;
  Tensor b = from_f32(t, DType::BF16);
  Tensor back = to_f32(b);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back.as<float>()[i], 0.5f * i);
}

TEST(Error, ContextIsPrepended) {
  try {
    with_context("loading x", [] { fail("bad {}", 3); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "loading x: bad 3");
  }
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(
          n,
          [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[i]++;
          },
          4);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
    }
  }
}

// Row slices of a block-scaled fp8 matrix move its scale grid with them: from a 128-row block (the grid's rows
// from that block on) or inside one block (that block's scale row alone); a slice that would start a block of
// the view inside one of the matrix's is refused.
TEST(TensorView, RowsOfABlockScaledMatrixKeepTheirScaleBlocks) {
  std::vector<uint8_t> codes(300 * 260);
  std::vector<float> scales(3 * 3);
  TensorView m = TensorView::contiguous(codes.data(), DType::F8_E4M3, {300, 260});
  m.scales = scales.data();
  ASSERT_EQ(m.scale_shape(), Shape({3, 3}));
  const TensorView from_block = m.rows(128, 300);
  EXPECT_EQ(from_block.scales, scales.data() + 3);
  EXPECT_EQ(from_block.scale_shape(), Shape({2, 3}));
  const TensorView inside = m.rows(150, 256);
  EXPECT_EQ(inside.scales, scales.data() + 3);
  EXPECT_EQ(inside.scale_shape(), Shape({1, 3}));
  EXPECT_EQ(m.rows(260, 300).scales, scales.data() + 6);
  EXPECT_THROW(m.rows(150, 257), Error);
  EXPECT_THROW(m.rows(1, 200), Error);
}

TEST(ThreadPool, ChunkBoundariesRespectGrain) {
  ThreadPool pool(3);
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  pool.parallel_for(
      100,
      [&](int64_t b, int64_t e) {
        std::lock_guard lock(m);
        chunks.push_back({b, e});
      },
      16);
  for (auto [b, e] : chunks) {
    EXPECT_EQ(b % 16, 0);
    EXPECT_TRUE(e == 100 || e % 16 == 0);
  }
}

TEST(CpuFeatures, BaselineIsPresent) {
  // The build's baseline is AVX2+FMA+F16C; a machine without them could not run this binary.
  EXPECT_TRUE(cpu_features().avx2);
  EXPECT_TRUE(cpu_features().fma);
  if (use_avx512_bf16()) {
    EXPECT_TRUE(use_avx512());
  }
}
