#pragma once
// Sequences of random keys, values and queries in a paged cache on the host (for the CPU) and in one
// NaN-poisoned device pool (for the GPU), and calls over spans of their rows: what the attention kernels'
// tests (test_cuda_attention_prefill.cpp, test_cuda_attention_split_tc.cpp) share.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"

namespace specserve::cuda_test {

// Sequences of given lengths with their keys, values and queries; the cache blocks on the host (for the
// CPU) and in one NaN-poisoned device pool in a shuffled order (for the GPU).
struct Prompts {
  KvGeometry geo;
  int nh;
  std::vector<int> lengths;
  std::vector<std::vector<float>> k, v, q;                   // [seq][position * width]
  std::vector<std::vector<std::vector<float>>> host_blocks;  // [seq][block]
  std::vector<std::vector<void*>> host_tables, dev_tables;   // blocks geo.block_bytes() apart in the pool
  DeviceBuffer pool;

  Prompts(KvGeometry g, int heads, std::vector<int> lens, uint32_t seed) : geo(g), nh(heads), lengths(std::move(lens)) {
    int total = 0;
    for (int L : lengths) total += (L + kKvBlockSize - 1) / kKvBlockSize;
    pool = poisoned(size_t(total) * size_t(geo.block_bytes()) / 4);
    std::vector<int> order(static_cast<size_t>(total));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    int next = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const int L = lengths[s], nb = (L + kKvBlockSize - 1) / kKvBlockSize;
      k.push_back(randn(size_t(L) * size_t(kv_width()), seed + 10 * uint32_t(s) + 1));
      v.push_back(randn(size_t(L) * size_t(kv_width()), seed + 10 * uint32_t(s) + 2));
      q.push_back(randn(size_t(L) * size_t(q_width()), seed + 10 * uint32_t(s) + 3));
      host_blocks.emplace_back();
      host_tables.emplace_back();
      dev_tables.emplace_back();
      for (int b = 0; b < nb; ++b) {
        host_blocks.back().emplace_back(size_t(geo.block_elems()), 0.0f);
        host_tables.back().push_back(host_blocks.back().back().data());
        dev_tables.back().push_back(pool.as<char>() + int64_t(order[size_t(next++)]) * geo.block_bytes());
      }
    }
  }
  int64_t kv_width() const { return int64_t(geo.num_kv_heads) * geo.head_dim; }
  int64_t q_width() const { return int64_t(nh) * geo.head_dim; }
  // Every slot of the device cache back to NaN (positions not stored yet hold garbage).
  void forget() { pool.fill_f32(NAN); }
};

// Rows [p0, p1) of sequence `seq` in one call.
struct Span {
  int seq, p0, p1;
};

inline std::vector<AttentionRow> rows_of(const Prompts& c, const std::vector<std::vector<void*>>& tables,
                                         const std::vector<Span>& spans) {
  std::vector<AttentionRow> rows;
  for (const Span& s : spans)
    for (int p = s.p0; p < s.p1; ++p) rows.push_back({tables[size_t(s.seq)].data(), p, 0});
  return rows;
}

// The spans' keys and values into the device cache (and the host one with `host`).
inline void store(Prompts& c, int layer, const std::vector<Span>& spans, bool host) {
  std::vector<float> k, v;
  for (const Span& s : spans) {
    const int64_t w = c.kv_width();
    k.insert(k.end(), c.k[size_t(s.seq)].begin() + s.p0 * w, c.k[size_t(s.seq)].begin() + s.p1 * w);
    v.insert(v.end(), c.v[size_t(s.seq)].begin() + s.p0 * w, c.v[size_t(s.seq)].begin() + s.p1 * w);
  }
  const int64_t R = int64_t(k.size()) / c.kv_width();
  if (host)
    cpu_ops().kv_store(host_view(k.data(), DType::F32, {R, c.kv_width()}),
                       host_view(v.data(), DType::F32, {R, c.kv_width()}), c.geo, layer,
                       rows_of(c, c.host_tables, spans));
  DeviceBuffer dk = DeviceBuffer::from(k), dv = DeviceBuffer::from(v);
  cuda_ops().kv_store(dev_view(dk, DType::F32, {R, c.kv_width()}), dev_view(dv, DType::F32, {R, c.kv_width()}), c.geo,
                      layer, rows_of(c, c.dev_tables, spans));
}

inline std::vector<float> queries(const Prompts& c, const std::vector<Span>& spans) {
  std::vector<float> q;
  const int64_t w = c.q_width();
  for (const Span& s : spans)
    q.insert(q.end(), c.q[size_t(s.seq)].begin() + s.p0 * w, c.q[size_t(s.seq)].begin() + s.p1 * w);
  return q;
}

inline float scale_of(const Prompts& c) { return 1.0f / std::sqrt(float(c.geo.head_dim)); }

// The rows of `span` inside an output laid out by `spans` (all rows of the span present).
inline std::vector<float> rows_in(const Prompts& c, const std::vector<float>& out, const std::vector<Span>& spans,
                                  const Span& span) {
  int64_t r = 0;
  for (const Span& s : spans) {
    if (s.seq == span.seq && s.p0 <= span.p0 && span.p1 <= s.p1) {
      const int64_t b = (r + span.p0 - s.p0) * c.q_width(), e = (r + span.p1 - s.p0) * c.q_width();
      return std::vector<float>(out.begin() + b, out.begin() + e);
    }
    r += s.p1 - s.p0;
  }
  ADD_FAILURE() << "span not in the call";
  return {};
}

}  // namespace specserve::cuda_test
