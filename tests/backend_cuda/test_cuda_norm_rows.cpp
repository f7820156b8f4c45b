// The held-row norm kernels (norm.cu: register slots, a resident grid, the next group loaded early, the
// bf16 copy packed from registers) against the one-block-a-row kernels they replaced (norm_reference.h):
// the same bits in every output (the residual x, the normed rows, their bf16 copy XbOut with its +0
// columns and padding rows) across widths and row counts, and a row's bits independent of how many rows
// the launch has.
#include <cstdint>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/norm_reference.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

namespace k = cuda::kernels;

constexpr int64_t kWidths[] = {64, 1000, 4096, 5120, 5121, 8192};
constexpr int64_t kRowCounts[] = {1, 7, 33, 200, 2048};  // 200: between one and two groups a block
constexpr int64_t kMaxRows = 2048;

// A NaN-poisoned XbOut for [M, d] in the matmul's layout (rows rounded up to 16, pitch d rounded up to 16
// plus 128: xb_pitch with the gemv's k tile).
struct XbCopy {
  DeviceBuffer regs;
  k::XbOut out;
  XbCopy(int64_t M, int64_t d) {
    out.pitch = (d + 15) / 16 * 16 + 128;
    out.rows = (M + 15) / 16 * 16;
    regs = poisoned(size_t(out.rows * out.pitch / 2));
    out.regs = static_cast<uint32_t*>(regs.data());
  }
  std::vector<float> get() const { return download(regs, size_t(out.rows * out.pitch / 2)); }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && bit_equal(a.data(), b.data(), a.size());
}

// Random rows of width d, `rows` of them (the first M rows are used).
struct Inputs {
  std::vector<float> x, y, w;
  explicit Inputs(int64_t d, int64_t rows = kMaxRows)
      : x(randn(size_t(rows * d), 71 + uint32_t(d))),
        y(randn(size_t(rows * d), 72 + uint32_t(d))),
        w(randn(size_t(d), 73, 0.3f)) {}
};

// qwen3.6-27b's gated norm: 48 value heads of 128 a row, 2,048 rows (more groups than resident blocks:
// the blocks walk groups, loading the next one early).
constexpr int64_t kGatedGroups = 48 * kMaxRows;

TEST_F(Gpu, AddRmsNormHeldRowsGiveReferenceBits) {
  for (int64_t d : kWidths) {
    const Inputs in(d);
    const DeviceBuffer dy = DeviceBuffer::from(in.y), dw = DeviceBuffer::from(in.w);
    for (int64_t M : kRowCounts)
      for (int kind : {0, 1}) {
        const size_t n = size_t(M * d);
        const std::vector<float> x(in.x.begin(), in.x.begin() + n);
        DeviceBuffer x_ref = DeviceBuffer::from(x), x_new = DeviceBuffer::from(x), x_plain = DeviceBuffer::from(x),
                     o_ref = poisoned(n), o_new = poisoned(n), o_plain = poisoned(n);
        XbCopy xb_ref(M, d), xb_new(M, d);
        const auto* y = static_cast<const float*>(dy.data());
        const auto* w = static_cast<const float*>(dw.data());
        k::add_rms_norm_reference(static_cast<float*>(x_ref.data()), y, w, static_cast<float*>(o_ref.data()), M, d,
                                  kind, 1e-6f, cuda::cuda_stream(), xb_ref.out);
        k::add_rms_norm(static_cast<float*>(x_new.data()), y, w, static_cast<float*>(o_new.data()), M, d, kind, 1e-6f,
                        cuda::cuda_stream(), xb_new.out);
        k::add_rms_norm(static_cast<float*>(x_plain.data()), y, w, static_cast<float*>(o_plain.data()), M, d, kind,
                        1e-6f, cuda::cuda_stream());
        const auto want_x = download(x_ref, n), want_o = download(o_ref, n);
        EXPECT_TRUE(same_bits(download(x_new, n), want_x)) << M << "x" << d << " kind " << kind;
        EXPECT_TRUE(same_bits(download(o_new, n), want_o)) << M << "x" << d << " kind " << kind;
        EXPECT_TRUE(same_bits(xb_new.get(), xb_ref.get())) << "xb " << M << "x" << d << " kind " << kind;
        EXPECT_TRUE(same_bits(download(x_plain, n), want_x)) << "no xb " << M << "x" << d;
        EXPECT_TRUE(same_bits(download(o_plain, n), want_o)) << "no xb " << M << "x" << d;
      }
  }
}

TEST_F(Gpu, RmsNormHeldRowsGiveReferenceBits) {
  for (int64_t d : kWidths) {
    const Inputs in(d);
    const DeviceBuffer dx = DeviceBuffer::from(in.x), dw = DeviceBuffer::from(in.w);
    const auto* x = static_cast<const float*>(dx.data());
    const auto* w = static_cast<const float*>(dw.data());
    for (int64_t M : kRowCounts)
      for (int kind : {0, 1}) {
        const size_t n = size_t(M * d);
        DeviceBuffer o_ref = poisoned(n), o_new = poisoned(n);
        XbCopy xb_ref(M, d), xb_new(M, d);
        k::rms_norm_reference(x, w, static_cast<float*>(o_ref.data()), M, d, kind, 1e-6f, cuda::cuda_stream(),
                              xb_ref.out);
        k::rms_norm(x, w, static_cast<float*>(o_new.data()), M, d, kind, 1e-6f, cuda::cuda_stream(), xb_new.out);
        const auto want = download(o_ref, n);
        EXPECT_TRUE(same_bits(download(o_new, n), want)) << M << "x" << d << " kind " << kind;
        EXPECT_TRUE(same_bits(xb_new.get(), xb_ref.get())) << "xb " << M << "x" << d << " kind " << kind;
        // In place (y aliases x), as the model's QK norms run.
        DeviceBuffer inplace = DeviceBuffer::from(std::vector<float>(in.x.begin(), in.x.begin() + n));
        k::rms_norm(static_cast<const float*>(inplace.data()), w, static_cast<float*>(inplace.data()), M, d, kind,
                    1e-6f, cuda::cuda_stream());
        EXPECT_TRUE(same_bits(download(inplace, n), want)) << "in place " << M << "x" << d;
      }
  }
}

TEST_F(Gpu, RmsNormGatedHeldRowsGiveReferenceBits) {
  for (int64_t d : {int64_t{128}, int64_t{256}, int64_t{19}}) {
    const Inputs in(d, kGatedGroups);
    const DeviceBuffer dx = DeviceBuffer::from(in.x), dz = DeviceBuffer::from(in.y), dw = DeviceBuffer::from(in.w);
    for (int64_t M : {int64_t{1}, int64_t{7}, int64_t{2048}, kGatedGroups - 5, kGatedGroups}) {
      const size_t n = size_t(M * d);
      DeviceBuffer o_ref = poisoned(n), o_new = poisoned(n);
      const auto* x = static_cast<const float*>(dx.data());
      const auto* z = static_cast<const float*>(dz.data());
      const auto* w = static_cast<const float*>(dw.data());
      k::rms_norm_gated_reference(x, z, w, static_cast<float*>(o_ref.data()), M, d, 1e-6f, cuda::cuda_stream());
      k::rms_norm_gated(x, z, w, static_cast<float*>(o_new.data()), M, d, 1e-6f, cuda::cuda_stream());
      const auto want = download(o_ref, n);
      EXPECT_TRUE(same_bits(download(o_new, n), want)) << "gated " << M << "x" << d;
      // In place (y aliases x), as the DeltaNet block runs it.
      DeviceBuffer inplace = DeviceBuffer::from(std::vector<float>(in.x.begin(), in.x.begin() + n));
      k::rms_norm_gated(static_cast<const float*>(inplace.data()), z, w, static_cast<float*>(inplace.data()), M, d,
                        1e-6f, cuda::cuda_stream());
      EXPECT_TRUE(same_bits(download(inplace, n), want)) << "gated in place " << M << "x" << d;
    }
  }
  for (int64_t d : kWidths) {
    const Inputs in(d);
    const DeviceBuffer dx = DeviceBuffer::from(in.x), dz = DeviceBuffer::from(in.y), dw = DeviceBuffer::from(in.w);
    for (int64_t M : kRowCounts) {
      const size_t n = size_t(M * d);
      DeviceBuffer o_ref = poisoned(n), o_new = poisoned(n);
      const auto* x = static_cast<const float*>(dx.data());
      const auto* z = static_cast<const float*>(dz.data());
      const auto* w = static_cast<const float*>(dw.data());
      k::rms_norm_gated_reference(x, z, w, static_cast<float*>(o_ref.data()), M, d, 1e-6f, cuda::cuda_stream());
      k::rms_norm_gated(x, z, w, static_cast<float*>(o_new.data()), M, d, 1e-6f, cuda::cuda_stream());
      EXPECT_TRUE(same_bits(download(o_new, n), download(o_ref, n))) << "gated " << M << "x" << d;
    }
  }
}

// A row normed in a launch of many rows (the resident grid, each block walking rows with the next one
// loaded early: 2,048 rows of 4,096 or 5,120, 98,304 of 128) has the bits of the same row normed alone,
// in 7 rows and in 33 (a block a row).
TEST_F(Gpu, HeldNormRowBitsDoNotDependOnRowCount) {
  for (int64_t d : {int64_t{5120}, int64_t{4096}, int64_t{128}}) {
    const int64_t M = d == 128 ? kGatedGroups : kMaxRows;
    const Inputs in(d, M);
    const size_t n = size_t(M * d);
    const DeviceBuffer dx = DeviceBuffer::from(in.x), dy = DeviceBuffer::from(in.y), dw = DeviceBuffer::from(in.w);
    const auto* x = static_cast<const float*>(dx.data());
    const auto* y = static_cast<const float*>(dy.data());
    const auto* w = static_cast<const float*>(dw.data());
    DeviceBuffer all_res = DeviceBuffer::from(in.x), all_add = poisoned(n), all_norm = poisoned(n),
                 all_gated = poisoned(n);
    XbCopy all_xb(M, d);
    k::add_rms_norm(static_cast<float*>(all_res.data()), y, w, static_cast<float*>(all_add.data()), M, d, 1, 1e-6f,
                    cuda::cuda_stream(), all_xb.out);
    k::rms_norm(x, w, static_cast<float*>(all_norm.data()), M, d, 0, 1e-6f, cuda::cuda_stream());
    k::rms_norm_gated(x, y, w, static_cast<float*>(all_gated.data()), M, d, 1e-6f, cuda::cuda_stream());
    const auto res = download(all_res, n), add = download(all_add, n), norm = download(all_norm, n),
               gated = download(all_gated, n), xb = all_xb.get();
    for (const auto& [first, rows] :
         {std::pair<int64_t, int64_t>{0, 1}, {1000, 1}, {M - 1, 1}, {129, 7}, {1500, 33}, {M - 33, 33}}) {
      const size_t off = size_t(first * d), m = size_t(rows * d);
      const std::vector<float> xs(in.x.begin() + off, in.x.begin() + off + m);
      DeviceBuffer res1 = DeviceBuffer::from(xs), add1 = poisoned(m), norm1 = poisoned(m), gated1 = poisoned(m);
      XbCopy xb1(rows, d);
      k::add_rms_norm(static_cast<float*>(res1.data()), y + off, w, static_cast<float*>(add1.data()), rows, d, 1, 1e-6f,
                      cuda::cuda_stream(), xb1.out);
      k::rms_norm(x + off, w, static_cast<float*>(norm1.data()), rows, d, 0, 1e-6f, cuda::cuda_stream());
      k::rms_norm_gated(x + off, y + off, w, static_cast<float*>(gated1.data()), rows, d, 1e-6f, cuda::cuda_stream());
      const std::string at = std::to_string(rows) + " rows at " + std::to_string(first) + ", d " + std::to_string(d);
      EXPECT_TRUE(bit_equal(download(res1, m).data(), res.data() + off, m)) << at;
      EXPECT_TRUE(bit_equal(download(add1, m).data(), add.data() + off, m)) << at;
      EXPECT_TRUE(bit_equal(download(norm1, m).data(), norm.data() + off, m)) << at;
      EXPECT_TRUE(bit_equal(download(gated1, m).data(), gated.data() + off, m)) << at;
      // The copy's rows (pitch / 2 registers each, the padding columns included).
      const size_t regs = size_t(xb1.out.pitch / 2);
      EXPECT_TRUE(bit_equal(xb1.get().data(), xb.data() + size_t(first) * regs, size_t(rows) * regs)) << "xb " << at;
    }
  }
}

}  // namespace
}  // namespace specserve::cuda_test
