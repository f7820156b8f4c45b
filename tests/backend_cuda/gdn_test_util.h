#pragma once
// Prepared Gated DeltaNet rule inputs for the CUDA-vs-CPU tests: random rows through
// cpu_ops().gdn_prepare (L2-normalised q and k, q scaled by dk^-0.5, g < 0, beta in (0, 1)), copied to
// the device unchanged, and the rule run on either backend over the same rows.
#include <cmath>
#include <span>
#include <vector>

#include "cuda_test_util.h"

namespace specserve::cuda_test {

struct GdnInputs {
  GdnDims d;
  int64_t T;
  std::vector<float> qkv, g, beta;
  DeviceBuffer dqkv, dg, dbeta;

  GdnInputs(GdnDims dims, int64_t rows, uint32_t seed) : d(dims), T(rows) {
    const int64_t Hv = d.num_v_heads;
    qkv = randn(size_t(T * d.conv_dim()), seed);
    g = randn(size_t(T * Hv), seed + 1);
    beta = randn(size_t(T * Hv), seed + 2);
    auto alog = randn(size_t(Hv), seed + 3, 0.5f), dt = randn(size_t(Hv), seed + 4, 0.5f);
    cpu_ops().gdn_prepare(host_view(qkv.data(), DType::F32, {T, d.conv_dim()}),
                          host_view(g.data(), DType::F32, {T, Hv}), host_view(beta.data(), DType::F32, {T, Hv}),
                          host_view(alog.data(), DType::F32, {Hv}), host_view(dt.data(), DType::F32, {Hv}), d);
    dqkv = DeviceBuffer::from(qkv);
    dg = DeviceBuffer::from(g);
    dbeta = DeviceBuffer::from(beta);
  }
  size_t out_floats() const { return size_t(T * d.value_dim()); }
  size_t state_floats() const { return size_t(d.state_floats()); }

  // `out` is filled with `fill` first: rows outside the spans keep it.
  void cpu(std::span<const GdnSpan> spans, std::vector<float>& out, float fill = NAN) {
    out.assign(out_floats(), fill);
    cpu_ops().gated_delta_rule(host_view(qkv.data(), DType::F32, {T, d.conv_dim()}),
                               host_view(g.data(), DType::F32, {T, d.num_v_heads}),
                               host_view(beta.data(), DType::F32, {T, d.num_v_heads}), spans, d,
                               host_view(out.data(), DType::F32, {T, d.value_dim()}));
  }
  void gpu(std::span<const GdnSpan> spans, DeviceBuffer& out) {
    cuda_ops().gated_delta_rule(
        dev_view(dqkv, DType::F32, {T, d.conv_dim()}), dev_view(dg, DType::F32, {T, d.num_v_heads}),
        dev_view(dbeta, DType::F32, {T, d.num_v_heads}), spans, d, dev_view(out, DType::F32, {T, d.value_dim()}));
  }
};

}  // namespace specserve::cuda_test
