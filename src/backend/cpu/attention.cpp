// Causal GQA attention over the paged KV cache (models.md §1.4). One task per (row, query head);
// a row's scores, softmax and weighted sum walk its own sequence's keys window_start..position
// (window_start is 0 except for sliding-window layers) in increasing
// order with no split, so the result depends only on the row and its sequence's cache: one decode
// row and the same row inside a K-row extend give the same bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/simd.h"
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
  const size_t bytes = static_cast<size_t>(geo.head_dim) * 4;
  for (size_t r = 0; r < rows.size(); ++r) {
    const int32_t pos = rows[r].position;
    float* block = rows[r].blocks[pos / kKvBlockSize];
    const int slot = pos % kKvBlockSize;
    for (int h = 0; h < geo.num_kv_heads; ++h) {
      std::memcpy(block + geo.offset(layer, 0, h, slot), k.as<const float>() + r * k.strides[0] + h * geo.head_dim, bytes);
      std::memcpy(block + geo.offset(layer, 1, h, slot), v.as<const float>() + r * v.strides[0] + h * geo.head_dim, bytes);
    }
  }
}

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
  for (const auto& row : rows)
    SS_CHECK(row.window_start >= 0 && row.window_start <= row.position,
             "attention: window start {} outside [0, position {}]", row.window_start, row.position);
  const int group = num_heads / geo.num_kv_heads;
  const int64_t tasks = static_cast<int64_t>(rows.size()) * num_heads;

  auto body = [&](int64_t t0, int64_t t1) {
    std::vector<float> scores;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = t / num_heads;
      const int h = static_cast<int>(t % num_heads);
      const int kvh = h / group;
      const AttentionRow& row = rows[r];
      // Keys w..position (w = 0 unless the row is windowed); scores[i] belongs to position w + i.
      const int64_t w = row.window_start, n = int64_t{row.position} + 1 - w;
      const float* qv = q.as<const float>() + r * q.strides[0] + int64_t{h} * hd;
      scores.resize(static_cast<size_t>(n));
      float mx = -INFINITY;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t j = w + i;
        const float* kv = row.blocks[j / kKvBlockSize] + geo.offset(layer, 0, kvh, static_cast<int>(j % kKvBlockSize));
        scores[i] = dot_f32(qv, kv, hd) * scale;
        mx = std::max(mx, scores[i]);
      }
      float sum = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        scores[i] = std::exp(scores[i] - mx);
        sum += scores[i];
      }
      const float inv = 1.0f / sum;
      float* o = out.as<float>() + r * out.strides[0] + int64_t{h} * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t j = w + i;
        const float p = scores[i] * inv;
        const float* vv = row.blocks[j / kKvBlockSize] + geo.offset(layer, 1, kvh, static_cast<int>(j % kKvBlockSize));
        for (int d = 0; d < hd; ++d) o[d] += p * vv[d];
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
