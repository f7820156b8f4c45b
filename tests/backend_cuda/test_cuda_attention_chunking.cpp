// The split-KV attention's chunking (backend/cuda/attention_chunking.cuh) on the host: every window is
// covered exactly once by at most 16 chunks of whole 64-key tiles, and the count is not monotonic (the
// reason a call sizes its scratch by the maximum over its rows).
#include <gtest/gtest.h>

#include "backend/cuda/attention_chunking.cuh"

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
  EXPECT_EQ(chunking(1024).chunks, 16);
  EXPECT_EQ(chunking(1024).keys, 64);
  EXPECT_EQ(chunking(1025).chunks, 9);
  EXPECT_EQ(chunking(1025).keys, 128);
}

}  // namespace
}  // namespace specserve::cuda_test
