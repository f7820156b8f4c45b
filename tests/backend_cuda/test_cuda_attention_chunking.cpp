// The split-KV attention's chunking (backend/cuda/attention_chunking.cuh) on the host: every window is
// covered exactly once by at most 64 chunks of whole 64-key tiles, and the count is not monotonic (the
// reason a call sizes its scratch by the maximum over its rows). And which rows share a CTA of the
// multi-row kernel (attention_rows.cuh).
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/attention_chunking.cuh"
#include "backend/cuda/attention_rows.cuh"

namespace specserve::cuda_test {
namespace {

using cuda::attn::chunking;

TEST(AttentionChunking, CoversEachWindowOnceWithFewWholeTileChunks) {
  for (int64_t n = 1; n <= 70000; n += n < 3000 ? 1 : 97) {
    const auto c = chunking(n);
    ASSERT_GE(c.chunks, 1) << n;
    ASSERT_LE(c.chunks, cuda::attn::kMaxChunks) << n;
    ASSERT_EQ(c.keys % cuda::attn::kTileKeys, 0) << n;
    ASSERT_GE(c.chunks * c.keys, n) << n;        // the last chunk reaches the window's end
    ASSERT_LT((c.chunks - 1) * c.keys, n) << n;  // and is not empty
  }
}

TEST(AttentionChunking, CountIsNotMonotonicInTheWindow) {
  EXPECT_EQ(chunking(64).chunks, 1);
  EXPECT_EQ(chunking(65).chunks, 2);
  EXPECT_EQ(chunking(4096).chunks, 64);
  EXPECT_EQ(chunking(4096).keys, 64);
  EXPECT_EQ(chunking(4097).chunks, 33);
  EXPECT_EQ(chunking(4097).keys, 128);
  EXPECT_EQ(chunking(32768).chunks, 64);
  EXPECT_EQ(chunking(32768).keys, 512);
}

// Rows at consecutive positions p0 .. p0 + k - 1 of block table `table`, window start ws.
std::vector<cuda::kernels::KvRow> run_of(int64_t table, int p0, int k, int ws = 0) {
  std::vector<cuda::kernels::KvRow> rows;
  for (int p = p0; p < p0 + k; ++p) rows.push_back({table, p, ws});
  return rows;
}

std::vector<int32_t> items_of(const std::vector<cuda::kernels::KvRow>& rows, int per_item) {
  return cuda::attn::row_items(rows.data(), static_cast<int64_t>(rows.size()), per_item);
}

TEST(AttentionChunking, RowsShareACtaWhereTheirChunksAgree) {
  using V = std::vector<int32_t>;
  // A verify of the 8B (windows 505..520, 64-key chunks), four rows per item.
  EXPECT_EQ(items_of(run_of(0, 504, 16), 4), (V{0, 4, 8, 12, 16}));
  EXPECT_EQ(items_of(run_of(0, 504, 16), 5), (V{0, 5, 10, 15, 16}));
  // Windows 4089..4104: 64-key chunks up to 4096 keys, then 128: an item ends there.
  EXPECT_EQ(items_of(run_of(0, 4088, 16), 16), (V{0, 8, 16}));
  EXPECT_EQ(items_of(run_of(0, 4090, 12), 4), (V{0, 4, 6, 10, 12}));
  // A new item at another block table and at another window start.
  auto rows = run_of(0, 100, 3);
  for (const auto& more : {run_of(1, 103, 3), run_of(1, 106, 2, 5)}) rows.insert(rows.end(), more.begin(), more.end());
  EXPECT_EQ(items_of(rows, 16), (V{0, 3, 6, 8}));
  // Sliding windows (a start per row) share nothing; neither do rows of one-row items.
  std::vector<cuda::kernels::KvRow> sliding;
  for (int p = 200; p < 216; ++p) sliding.push_back({0, p, p - 99});
  EXPECT_TRUE(items_of(sliding, 4).empty());
  EXPECT_TRUE(items_of(run_of(0, 504, 16), 1).empty());
  // Not when more than half the rows would keep a CTA each: 4 items for 5 rows; then for 8 rows.
  rows = run_of(0, 10, 2);
  for (int s = 1; s <= 3; ++s) rows.push_back({s, 10, 0});
  EXPECT_TRUE(items_of(rows, 4).empty());
  for (int p = 11; p < 14; ++p) rows.push_back({3, p, 0});
  EXPECT_EQ(items_of(rows, 4), (V{0, 2, 3, 4, 8}));
}

// The tensor-core split kernel's items: the same cuts, always made (a decode is an item of one row).
TEST(AttentionChunking, SplitItemsAlwaysCutRunsWhoseChunksAgree) {
  using V = std::vector<int32_t>;
  auto split = [](const std::vector<cuda::kernels::KvRow>& rows, int max_rows) {
    return cuda::attn::split_items(rows.data(), static_cast<int64_t>(rows.size()), max_rows);
  };
  EXPECT_EQ(split(run_of(0, 700, 1), 16), (V{0, 1}));
  EXPECT_EQ(split(run_of(0, 504, 16), 16), (V{0, 16}));
  EXPECT_EQ(split(run_of(0, 504, 20), 16), (V{0, 16, 20}));
  EXPECT_EQ(split(run_of(0, 4088, 16), 16), (V{0, 8, 16}));  // 64-key chunks, then 128
  std::vector<cuda::kernels::KvRow> rows;
  for (int s = 0; s < 3; ++s) rows.push_back({s, 10, 0});  // three sequences' decode rows
  auto verify = run_of(3, 50, 16);
  rows.insert(rows.end(), verify.begin(), verify.end());
  EXPECT_EQ(split(rows, 16), (V{0, 1, 2, 3, 19}));
  std::vector<cuda::kernels::KvRow> sliding;
  for (int p = 200; p < 203; ++p) sliding.push_back({0, p, p - 99});
  EXPECT_EQ(split(sliding, 16), (V{0, 1, 2, 3}));
  EXPECT_EQ(split({}, 16), (V{0}));
}

}  // namespace
}  // namespace specserve::cuda_test
