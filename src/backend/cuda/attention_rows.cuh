#pragma once
// Which rows of an attention call share a CTA of the multi-row partial kernel (attention_rows.cu): plain C++
// on the host, so tests/backend_cuda/test_cuda_attention_chunking.cpp checks it without a GPU.
//
// Rows can share a CTA when their chunks cover the same keys: the same block table (one sequence), the
// same window start and the same chunk size (attn::chunking's keys per chunk, a function of the row's
// window). Then every row's chunk c starts at key window_start + c * keys and is walked in the same
// 64-key tiles; only where a row's window ends differs (its last chunk may be shorter, or the row may
// have fewer chunks), and each row stops at its own end. A verify's rows (one sequence at consecutive
// positions) qualify unless their windows straddle a change of the chunk size (1024 keys, 2048, ...) or
// slide (a window start per row).
#include <cstdint>
#include <vector>

#include "backend/cuda/attention_chunking.cuh"
#include "backend/cuda/kernels.h"

namespace specserve::cuda::attn {

// When the rows that can share CTAs do. Auto: when the one-row kernel would take at least two waves
// (a verify of several sequences, a prefill); within about one wave every CTA runs at once and a CTA
// serving 4 rows does 4 rows' serial work, which measured slower (H200, session 8: 16 verify rows of the
// 27B 0.3-0.45 ms per step, of the 8B at K <= 8 0.1-0.3 ms; docs/history/GPU_PERF_NOTES.md). Never and
// Always: whenever they do not or do group (tests of both kernels). Which
// kernel serves a row never changes its bits.
enum class RowGrouping { Auto, Never, Always };
void set_row_grouping(RowGrouping g);
RowGrouping row_grouping();

// The query heads a CTA of the multi-row kernel holds when each KV head serves `group` query heads: an
// item has at most item_queries(group) / group rows.
inline int item_queries(int group) { return group <= 4 ? 16 : 32; }

// The call's rows, in order, cut into items of at most max_rows consecutive rows whose chunks agree (above):
// the items' first rows followed by R. The tensor-core split kernel (attention_split_tc.cu) takes them as
// they are (a row alone is an item of one: a decode).
inline std::vector<int32_t> split_items(const kernels::KvRow* rows, int64_t R, int max_rows) {
  std::vector<int32_t> starts;
  auto keys = [&](int64_t r) { return chunking(int64_t{rows[r].position} + 1 - rows[r].window_start).keys; };
  for (int64_t r = 0; r < R;) {
    starts.push_back(static_cast<int32_t>(r));
    int64_t e = r + 1;
    while (e < R && e - r < max_rows && rows[e].table == rows[r].table &&
           rows[e].window_start == rows[r].window_start && keys(e) == keys(r))
      ++e;
    r = e;
  }
  starts.push_back(static_cast<int32_t>(R));
  return starts;
}

// Cuts the call's rows, in order, into items of at most per_item consecutive rows whose chunks agree
// (split_items), and returns the items' first rows followed by R (items + 1 entries). Empty when that would
// not halve the CTAs (fewer than two rows per item on average): then every row goes to the single-row
// kernel.
inline std::vector<int32_t> row_items(const kernels::KvRow* rows, int64_t R, int per_item) {
  if (per_item < 2 || R < 2) return {};  // (a decode: nothing to group)
  std::vector<int32_t> starts = split_items(rows, R, per_item);
  if (2 * static_cast<int64_t>(starts.size() - 1) > R) return {};
  return starts;
}

}  // namespace specserve::cuda::attn
