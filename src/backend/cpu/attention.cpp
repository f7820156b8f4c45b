// Causal GQA attention over the paged KV cache (docs/MODELS.md §1.4). Per (row, query head) the scores,
// softmax and weighted sum walk its own sequence's keys window_start..position (window_start is 0
// except for sliding-window layers) in increasing order with no split, so the result depends only
// on the row and its sequence's cache: one decode row and the same row inside a K-row extend give
// the same bits.
//
// Memory traffic: one task per (run of consecutive rows of one sequence, KV head). It reads each
// key and value of that head once for all the run's rows and the query heads of the group (an
// extend's K rows and GQA's group would otherwise re-read the cache K·group times). Only the loop
// nest changes: every (row, head) still computes each score, the max, the exp-sum and the
// weighted sum with the same expressions in the same key order as a lone row.
//
// A bf16 cache (KvGeometry::dtype) holds k and v rounded to nearest even (convert_from_f32); each key
// and value is widened to f32 (exact) before it is used, so the arithmetic, and the result, are those
// of an f32 cache holding the rounded values.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/simd.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace specserve::cpu {

void kv_store(const TensorView& k, const TensorView& v, const KvGeometry& geo, int layer,
              std::span<const AttentionRow> rows) {
  const int64_t width = int64_t{geo.num_kv_heads} * geo.head_dim;
  SS_CHECK(k.dtype == DType::F32 && v.dtype == DType::F32 && k.ndim() == 2 && v.ndim() == 2 && k.dim(1) == width &&
               v.dim(1) == width && k.strides[1] == 1 && v.strides[1] == 1,
           "kv_store: k {} / v {} must be f32 [rows, {}]", k.describe(), v.describe(), width);
  SS_CHECK(k.dim(0) == static_cast<int64_t>(rows.size()) && v.dim(0) == k.dim(0), "kv_store: {} rows for {} specs",
           k.dim(0), rows.size());
  SS_CHECK(geo.dtype == DType::F32 || geo.dtype == DType::BF16, "kv_store: a KV cache of {} is not supported",
           dtype_name(geo.dtype));
  for (size_t r = 0; r < rows.size(); ++r) {
    const int32_t pos = rows[r].position;
    void* block = rows[r].blocks[pos / kKvBlockSize];
    const int slot = pos % kKvBlockSize;
    for (int h = 0; h < geo.num_kv_heads; ++h) {
      const float* ks = k.as<const float>() + r * k.strides[0] + h * geo.head_dim;
      const float* vs = v.as<const float>() + r * v.strides[0] + h * geo.head_dim;
      convert_from_f32(ks, geo.dtype, geo.locate(block, layer, 0, h, slot), static_cast<size_t>(geo.head_dim));
      convert_from_f32(vs, geo.dtype, geo.locate(block, layer, 1, h, slot), static_cast<size_t>(geo.head_dim));
    }
  }
}

namespace {
// Key or value j of KV head kvh as f32: a pointer into an f32 cache, or widened into `wide` [head_dim]
// from a bf16 one (exact).
const float* kv_f32(void* const* blocks, const KvGeometry& geo, int layer, int which, int kvh, int64_t j, float* wide) {
  void* block = blocks[j / kKvBlockSize];
  const int slot = static_cast<int>(j % kKvBlockSize);
  if (!geo.bf16()) return geo.at<const float>(block, layer, which, kvh, slot);
  convert_to_f32(geo.at<const uint16_t>(block, layer, which, kvh, slot), DType::BF16, wide,
                 static_cast<size_t>(geo.head_dim));
  return wide;
}
}  // namespace

void attention(const TensorView& q, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows, int num_heads,
               float scale, const TensorView& out) {
  const int hd = geo.head_dim;
  const int64_t width = int64_t{num_heads} * hd;
  SS_CHECK(q.dtype == DType::F32 && out.dtype == DType::F32 && q.ndim() == 2 && out.ndim() == 2 && q.dim(1) == width &&
               out.dim(1) == width && q.strides[1] == 1 && out.strides[1] == 1,
           "attention: q {} / out {} must be f32 [rows, {}]", q.describe(), out.describe(), width);
  SS_CHECK(q.dim(0) == static_cast<int64_t>(rows.size()) && out.dim(0) == q.dim(0), "attention: {} rows for {} specs",
           q.dim(0), rows.size());
  SS_CHECK(num_heads % geo.num_kv_heads == 0, "attention: {} heads not a multiple of {} KV heads", num_heads,
           geo.num_kv_heads);
  SS_CHECK(geo.dtype == DType::F32 || geo.dtype == DType::BF16, "attention: a KV cache of {} is not supported",
           dtype_name(geo.dtype));
  for (const auto& row : rows)
    SS_CHECK(row.window_start >= 0 && row.window_start <= row.position,
             "attention: window start {} outside [0, position {}]", row.window_start, row.position);
  const int group = num_heads / geo.num_kv_heads;
  const int nkv = geo.num_kv_heads;

  // Runs of up to kRunRows consecutive rows that share a sequence (the same block table). The cap gives
  // a long prefill chunk many tasks (with one KV head, a 2048-row chunk was one task on one thread) and
  // bounds a task's scores to kRunRows·group rows; decode and verify rows fit in one run, so they still
  // read each key once. A row's arithmetic is the same in any run, so its bits do not change.
  constexpr int64_t kRunRows = 64;
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t r = 0; r < static_cast<int64_t>(rows.size()); ++r) {
    if (runs.empty() || rows[r].blocks != rows[runs.back().first].blocks || r - runs.back().first == kRunRows)
      runs.push_back({r, r});
    runs.back().second = r + 1;
  }
  const int64_t tasks = static_cast<int64_t>(runs.size()) * nkv;

  auto body = [&](int64_t t0, int64_t t1) {
    std::vector<float> scores;
    std::vector<float> wide(static_cast<size_t>(hd));
    for (int64_t t = t0; t < t1; ++t) {
      const auto [r0, r1] = runs[t / nkv];
      const int kvh = static_cast<int>(t % nkv);
      void* const* blocks = rows[r0].blocks;
      int64_t lo = rows[r0].window_start, hi = rows[r0].position;
      for (int64_t r = r0; r < r1; ++r) {
        lo = std::min<int64_t>(lo, rows[r].window_start);
        hi = std::max<int64_t>(hi, rows[r].position);
      }
      const int64_t span = hi + 1 - lo;
      const int64_t members = (r1 - r0) * group;  // member m: row r0 + m / group, head kvh·group + m % group
      scores.resize(static_cast<size_t>(members * span));
      auto q_of = [&](int64_t m) {
        return q.as<const float>() + (r0 + m / group) * q.strides[0] + int64_t{kvh * group + m % group} * hd;
      };
      auto out_of = [&](int64_t m) {
        return out.as<float>() + (r0 + m / group) * out.strides[0] + int64_t{kvh * group + m % group} * hd;
      };
      // Scores: key j once for every member whose keys w..position contain it.
      for (int64_t j = lo; j <= hi; ++j) {
        const float* kv = kv_f32(blocks, geo, layer, 0, kvh, j, wide.data());
        for (int64_t m = 0; m < members; ++m) {
          const AttentionRow& row = rows[r0 + m / group];
          if (j < row.window_start || j > row.position) continue;
          scores[m * span + (j - lo)] = dot_f32(q_of(m), kv, hd) * scale;
        }
      }
      // Softmax per member over its own keys, in key order; the weights overwrite the scores.
      for (int64_t m = 0; m < members; ++m) {
        const AttentionRow& row = rows[r0 + m / group];
        float* sc = scores.data() + m * span + (row.window_start - lo);
        const int64_t n = int64_t{row.position} + 1 - row.window_start;
        float mx = -INFINITY;
        for (int64_t i = 0; i < n; ++i) mx = std::max(mx, sc[i]);
        float sum = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
          sc[i] = std::exp(sc[i] - mx);
          sum += sc[i];
        }
        const float inv = 1.0f / sum;
        for (int64_t i = 0; i < n; ++i) sc[i] *= inv;
        float* o = out_of(m);
        std::fill(o, o + hd, 0.0f);
      }
      // Weighted sum: value j once for every member, accumulated in key order per member.
      for (int64_t j = lo; j <= hi; ++j) {
        const float* vv = kv_f32(blocks, geo, layer, 1, kvh, j, wide.data());
        for (int64_t m = 0; m < members; ++m) {
          const AttentionRow& row = rows[r0 + m / group];
          if (j < row.window_start || j > row.position) continue;
          const float p = scores[m * span + (j - lo)];
          float* o = out_of(m);
          for (int d = 0; d < hd; ++d) o[d] += p * vv[d];
        }
      }
    }
  };
  int64_t work = 0;
  for (const auto& row : rows) work += int64_t{row.position + 1 - row.window_start} * num_heads * hd * 4;
  if (tasks <= 1 || work < (1 << 15))
    body(0, tasks);
  else
    ThreadPool::global().parallel_for(tasks, body, 1);
}

}  // namespace specserve::cpu
