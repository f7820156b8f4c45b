// The attention op's window_start (backend/ops.h AttentionRow), added for the drafter's sliding
// layers: a row attends to keys window_start..position only. Checked bit for bit against the same
// keys stored at the start of a fresh cache (window 0: the unchanged path), and against a direct
// f64 computation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/ops.h"
#include "core/aligned_buffer.h"
#include "core/tensor.h"

namespace specserve {
namespace {

constexpr int kHeads = 4, kKv = 2, kHd = 16;

struct Cache {
  KvGeometry geo{1, kKv, kHd};
  std::vector<std::vector<float>> storage;
  std::vector<void*> blocks;
  explicit Cache(int positions) {
    for (int i = 0; i < (positions + kKvBlockSize - 1) / kKvBlockSize; ++i) {
      storage.emplace_back(static_cast<size_t>(geo.block_elems()), 0.0f);
      blocks.push_back(storage.back().data());
    }
  }
  void store(const Tensor& k, const Tensor& v, int first_position) {
    std::vector<AttentionRow> rows;
    for (int r = 0; r < k.shape()[0]; ++r) rows.push_back({blocks.data(), first_position + r});
    cpu_ops().kv_store(k, v, geo, 0, rows);
  }
};

Tensor random_rows(int rows, int width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n;
  Tensor t = Tensor::empty(DType::F32, {rows, width});
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = n(rng);
  return t;
}

TEST(AttentionWindow, EqualsTheSameKeysAttendedFromTheStart) {
  const int positions = 40, w = 21, pos = 37;  // keys 21..37 (crossing block boundaries)
  const Tensor k = random_rows(positions, kKv * kHd, 1), v = random_rows(positions, kKv * kHd, 2);
  const Tensor q = random_rows(1, kHeads * kHd, 3);
  Cache full(positions);
  full.store(k, v, 0);
  Cache shifted(positions);
  const int n = pos - w + 1;
  Tensor ks = Tensor::empty(DType::F32, {n, kKv * kHd}), vs = Tensor::empty(DType::F32, {n, kKv * kHd});
  std::copy(k.as<float>() + w * kKv * kHd, k.as<float>() + (pos + 1) * kKv * kHd, ks.as<float>());
  std::copy(v.as<float>() + w * kKv * kHd, v.as<float>() + (pos + 1) * kKv * kHd, vs.as<float>());
  shifted.store(ks, vs, 0);

  Tensor windowed = Tensor::empty(DType::F32, {1, kHeads * kHd}), plain = Tensor::empty(DType::F32, {1, kHeads * kHd});
  const float scale = 0.25f;
  const AttentionRow wrow{full.blocks.data(), pos, w};
  cpu_ops().attention(q, full.geo, 0, std::span(&wrow, 1), kHeads, scale, windowed);
  const AttentionRow prow{shifted.blocks.data(), n - 1};
  cpu_ops().attention(q, shifted.geo, 0, std::span(&prow, 1), kHeads, scale, plain);
  for (int i = 0; i < kHeads * kHd; ++i) ASSERT_EQ(windowed.as<float>()[i], plain.as<float>()[i]) << i;

  // And the numbers: softmax over keys w..pos only, in f64.
  for (int h = 0; h < kHeads; ++h) {
    const int kvh = h / (kHeads / kKv);
    std::vector<double> s;
    double mx = -1e300, sum = 0;
    for (int j = w; j <= pos; ++j) {
      double d = 0;
      for (int i = 0; i < kHd; ++i)
        d += double(q.as<float>()[h * kHd + i]) * k.as<float>()[j * kKv * kHd + kvh * kHd + i];
      s.push_back(d * scale);
      mx = std::max(mx, s.back());
    }
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int i = 0; i < kHd; ++i) {
      double o = 0;
      for (int j = w; j <= pos; ++j) o += s[j - w] / sum * v.as<float>()[j * kKv * kHd + kvh * kHd + i];
      EXPECT_NEAR(windowed.as<float>()[h * kHd + i], o, 1e-5);
    }
  }
}

TEST(AttentionWindow, RejectsAWindowPastThePosition) {
  Cache c(16);
  const Tensor q = random_rows(1, kHeads * kHd, 4);
  Tensor out = Tensor::empty(DType::F32, {1, kHeads * kHd});
  const AttentionRow bad{c.blocks.data(), 3, 4};
  EXPECT_ANY_THROW(cpu_ops().attention(q, c.geo, 0, std::span(&bad, 1), kHeads, 1.0f, out));
}

}  // namespace
}  // namespace specserve
