#pragma once
// How the split-KV attention (attention.cu) cuts a row's window into chunks: plain C++ that also
// compiles on the host, so tests/backend_cuda/test_cuda_attention_chunking.cpp checks it without a GPU.
//
// A window of n keys (window_start .. position) is cut into at most kMaxChunks chunks of the same
// whole number of kTileKeys-key tiles, counted from the window's start. The cut depends on n alone, so a
// row's chunks (and its bits) are the same alone or in any batch. The chunk count is not monotonic in n
// (4096 keys: 64 chunks of 64; 4097: 33 of 128), so a call sizes its scratch by the maximum over its
// rows, not by the longest window.
#include <cstdint>

#ifdef __CUDACC__
#define SS_ATTN_HD __host__ __device__ __forceinline__
#else
#define SS_ATTN_HD inline
#endif

namespace specserve::cuda::attn {

inline constexpr int kTileKeys = 64;
// 64 chunks: a decode row at long context is spread over 64 CTAs per KV head instead of 16 (at 32k
// positions a CTA streamed 2,048 keys one 64-key tile at a time, and the KV read ran at ~20 % of the copy
// bandwidth: docs/DECISIONS.md §3). Up to 1,024 keys the chunks are single tiles either way.
inline constexpr int kMaxChunks = 64;

struct Chunking {
  int64_t keys;    // keys per chunk (a multiple of kTileKeys)
  int64_t chunks;  // chunks of the window
};

SS_ATTN_HD Chunking chunking(int64_t n) {
  const int64_t tiles = (n + kTileKeys - 1) / kTileKeys;
  const int64_t keys = kTileKeys * ((tiles + kMaxChunks - 1) / kMaxChunks);
  return {keys, (n + keys - 1) / keys};
}

}  // namespace specserve::cuda::attn
