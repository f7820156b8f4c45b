// The CUDA collectives — NCCL's (backend/cuda/nccl_collective.h) and the one-GPU one
// (backend/cuda/device_collective.h) — and their in-order sum (backend/cuda/ordered_sum.h), against the CPU
// simulation's collective (backend/collective.h) bit for bit:
//   - kernels::ordered_sum for 1 to 4 gathered partials, values whose sum depends on the order of additions,
//     subnormals and signed zeros, into a strided output;
//   - the one-GPU collective for 1 to 4 ranks: partials side by side or apart, outputs strided, shared or
//     apart, a row the same alone and among 16; column gathers of uneven (and empty) parts;
//   - a one-rank NCCL communicator: all_reduce_sum and all_gather_columns equal the CPU simulation, and a
//     row's bits are the same in a 1-row and a 16-row call.
// The NCCL tests need libnccl.so.2 (2.18 or newer) on the loader's path and skip, saying so, without it:
//   LD_LIBRARY_PATH=<dir of libnccl.so.2> build/tests/backend_cuda/test_backend_cuda --gtest_filter='*Nccl*'
// Several GPUs (N > 1 ranks through NCCL) are not tested here: one GPU holds one NCCL rank.
#include <cstdlib>
#include <functional>
#include <string>

#include "backend/collective.h"
#include "backend/cuda/device_collective.h"
#include "backend/cuda/nccl_collective.h"
#include "backend/cuda/ordered_sum.h"
#include "backend/nccl_library.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

// Wide magnitudes, so that the order of additions changes results; a few subnormals and negative zeros.
std::vector<float> partial_values(size_t n, uint32_t seed) {
  std::vector<float> v = randn(n, seed, 100.0f);
  for (size_t i = 0; i < n; ++i) {
    if (i % 7 == 3) v[i] *= 1e-7f;
    if (i % 11 == 5) v[i] *= 1e6f;
    if (i % 13 == 6) v[i] = 1e-41f * static_cast<float>(i % 5);  // subnormal (or zero)
    if (i % 17 == 8) v[i] = -0.0f;
  }
  return v;
}

TensorView strided(void* p, int64_t rows, int64_t cols, int64_t ld, Device d) {
  TensorView v = TensorView::contiguous(p, DType::F32, {rows, cols}, d);
  v.strides[0] = ld;
  return v;
}

TEST_F(Gpu, OrderedSumMatchesTheCpuCollective) {
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 37}, {16, 37}, {5, 1024}, {3, 1}}) {
      SCOPED_TRACE(testing::Message() << ranks << " ranks, " << rows << " x " << cols);
      const size_t count = static_cast<size_t>(rows * cols);
      std::vector<float> gathered;
      std::vector<Tensor> parts;
      for (int q = 0; q < ranks; ++q) {
        std::vector<float> p = partial_values(count, 100 + 10 * static_cast<uint32_t>(ranks) + q);
        if (ranks == 4) p[0] = std::vector<float>{1.0f, 1e8f, -1e8f, 1.0f}[static_cast<size_t>(q)];  // 1 in order
        parts.push_back(Tensor::empty(DType::F32, {rows, cols}));
        std::memcpy(parts.back().as<float>(), p.data(), count * 4);
        gathered.insert(gathered.end(), p.begin(), p.end());
      }
      Tensor want = Tensor::empty(DType::F32, {rows, cols});
      const std::vector<TensorView> views(parts.begin(), parts.end());
      in_process_collective(ranks)->all_reduce_sum(views, std::vector<TensorView>(static_cast<size_t>(ranks), want));
      if (ranks == 4) {
        EXPECT_EQ(want.as<float>()[0], 1.0f);
      }

      const int64_t ld = cols + 3;  // a strided output: the gaps must stay untouched (NaN)
      DeviceBuffer g = DeviceBuffer::from(gathered), out = poisoned(static_cast<size_t>(rows * ld));
      cuda::kernels::ordered_sum(g.as<float>(), ranks, rows, cols, out.as<float>(), ld, cuda::cuda_stream());
      const std::vector<float> got = download(out, static_cast<size_t>(rows * ld));
      for (int64_t i = 0; i < rows; ++i) {
        ASSERT_TRUE(bit_equal(got.data() + i * ld, want.as<float>() + i * cols, static_cast<size_t>(cols)))
            << "row " << i;
        for (int64_t c = cols; c < ld; ++c) ASSERT_TRUE(std::isnan(got[static_cast<size_t>(i * ld + c)]));
      }
    }
}

TEST_F(Gpu, OneGpuCollectiveSumsAsTheCpuSimulation) {
  const int64_t rows = 16, cols = 37, ld = cols + 3;
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks");
    const size_t count = static_cast<size_t>(rows * cols);
    std::vector<float> side_by_side;
    std::vector<Tensor> host_parts;
    for (int q = 0; q < ranks; ++q) {
      const std::vector<float> p = partial_values(count, 300 + static_cast<uint32_t>(10 * ranks + q));
      host_parts.push_back(Tensor::empty(DType::F32, {rows, cols}));
      std::memcpy(host_parts.back().as<float>(), p.data(), count * 4);
      side_by_side.insert(side_by_side.end(), p.begin(), p.end());
    }
    Tensor want = Tensor::empty(DType::F32, {rows, cols});
    in_process_collective(ranks)->all_reduce_sum(std::vector<TensorView>(host_parts.begin(), host_parts.end()),
                                                 std::vector<TensorView>(static_cast<size_t>(ranks), want));
    const auto c = cuda::device_collective(ranks);
    EXPECT_EQ(c->ranks(), ranks);
    DeviceBuffer together = DeviceBuffer::from(side_by_side);
    std::vector<DeviceBuffer> apart;
    for (int q = 0; q < ranks; ++q)
      apart.push_back(
          DeviceBuffer::from(std::vector<float>(side_by_side.begin() + q * static_cast<int64_t>(count),
                                                side_by_side.begin() + (q + 1) * static_cast<int64_t>(count))));
    const TensorView all_rows = dev_view(together, DType::F32, {ranks * rows, cols});
    for (const bool in_place : {true, false}) {
      SCOPED_TRACE(in_place ? "partials side by side" : "partials apart");
      std::vector<TensorView> parts;
      for (int q = 0; q < ranks; ++q)
        parts.push_back(in_place ? all_rows.rows(q * rows, (q + 1) * rows)
                                 : dev_view(apart[static_cast<size_t>(q)], DType::F32, {rows, cols}));
      // Rank 0 writes a strided output; the others their own outputs, but for the last, which shares rank 0's.
      std::vector<DeviceBuffer> outs_mem;
      std::vector<TensorView> outs;
      DeviceBuffer first = poisoned(static_cast<size_t>(rows * ld));
      outs.push_back(strided(first.data(), rows, cols, ld, Device::CUDA));
      for (int q = 1; q < ranks; ++q) {
        if (q == ranks - 1 && ranks > 2) {
          outs.push_back(outs[0]);
          continue;
        }
        outs_mem.push_back(poisoned(count));
        outs.push_back(dev_view(outs_mem.back(), DType::F32, {rows, cols}));
      }
      c->all_reduce_sum(parts, outs);
      const std::vector<float> got = download(first, static_cast<size_t>(rows * ld));
      for (int64_t i = 0; i < rows; ++i) {
        ASSERT_TRUE(bit_equal(got.data() + i * ld, want.as<float>() + i * cols, static_cast<size_t>(cols))) << i;
        for (int64_t k = cols; k < ld; ++k) ASSERT_TRUE(std::isnan(got[static_cast<size_t>(i * ld + k)]));
      }
      for (DeviceBuffer& o : outs_mem) EXPECT_TRUE(bit_equal(download(o, count).data(), want.as<float>(), count));
      // Each row alone (a decode row) gets the bits it has among the 16 (a verify's rows).
      for (int64_t i = 0; i < rows; i += 5) {
        std::vector<TensorView> one_parts;
        for (const TensorView& p : parts) one_parts.push_back(p.rows(i, i + 1));
        DeviceBuffer one = poisoned(static_cast<size_t>(cols));
        c->all_reduce_sum(one_parts,
                          std::vector<TensorView>(static_cast<size_t>(ranks), dev_view(one, DType::F32, {1, cols})));
        ASSERT_TRUE(bit_equal(download(one, static_cast<size_t>(cols)).data(), want.as<float>() + i * cols,
                              static_cast<size_t>(cols)))
            << "row " << i << " alone";
      }
    }
  }
}

TEST_F(Gpu, OneGpuCollectiveGathersColumnsAsTheCpuSimulation) {
  const int64_t rows = 3, ld = 9;
  const std::vector<int64_t> widths = {4, 0, 5, 3};  // uneven vocabulary blocks; a strided part (pitch ld)
  const int64_t total = 12;
  std::vector<std::vector<float>> host(widths.size());
  std::vector<TensorView> host_parts, parts;
  std::vector<DeviceBuffer> dev;
  for (size_t q = 0; q < widths.size(); ++q) {
    host[q] = partial_values(static_cast<size_t>(rows * ld), 40 + static_cast<uint32_t>(q));
    host_parts.push_back(strided(host[q].data(), rows, widths[q], ld, Device::CPU));
    dev.push_back(DeviceBuffer::from(host[q]));
    parts.push_back(strided(dev.back().data(), rows, widths[q], ld, Device::CUDA));
  }
  const int ranks = static_cast<int>(widths.size());
  Tensor want = Tensor::empty(DType::F32, {rows, total});
  in_process_collective(ranks)->all_gather_columns(host_parts, std::vector<TensorView>(widths.size(), want));
  DeviceBuffer a = poisoned(static_cast<size_t>(rows * total)), b = poisoned(static_cast<size_t>(rows * total));
  const TensorView va = dev_view(a, DType::F32, {rows, total}), vb = dev_view(b, DType::F32, {rows, total});
  cuda::device_collective(ranks)->all_gather_columns(parts, std::vector<TensorView>{va, vb, va, vb});
  for (DeviceBuffer* out : {&a, &b})
    EXPECT_TRUE(bit_equal(download(*out, static_cast<size_t>(rows * total)).data(), want.as<float>(),
                          static_cast<size_t>(rows * total)));
}

class NcclGpu : public Gpu {
 protected:
  void SetUp() override {
    Gpu::SetUp();
    if (IsSkipped()) return;
    try {
      lib_ = nccl::load_nccl_library("");
    } catch (const Error& e) {
      GTEST_SKIP() << "NCCL tests need libnccl.so.2 on the loader's path (LD_LIBRARY_PATH): " << e.what();
    }
    std::printf("NCCL %s (%s)\n", lib_->version_text().c_str(), lib_->path().c_str());
  }
  std::unique_ptr<Collective> one_rank() const { return cuda::nccl_collective(lib_, {cuda::NcclRank{0, nullptr}}); }
  std::shared_ptr<const nccl::NcclLibrary> lib_;
};

TEST_F(NcclGpu, OneRankAllReduceIsTheCpuSimulationAndRowInvariant) {
  const auto c = one_rank();
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  EXPECT_EQ(c->ranks(), 1);
  const int64_t rows = 16, cols = 320, ld = cols + 8;
  const std::vector<float> p = partial_values(static_cast<size_t>(rows * cols), 7);
  Tensor host = Tensor::empty(DType::F32, {rows, cols}), want = Tensor::empty(DType::F32, {rows, cols});
  std::memcpy(host.as<float>(), p.data(), p.size() * 4);
  const TensorView host_parts[] = {host}, host_outs[] = {want};
  in_process_collective(1)->all_reduce_sum(host_parts, host_outs);

  DeviceBuffer part = DeviceBuffer::from(p), all = poisoned(static_cast<size_t>(rows * ld));
  const TensorView part_view = dev_view(part, DType::F32, {rows, cols});
  // Each row alone first (a decode row), then all 16 in one call (a verify), which also grows the gather
  // buffer past the one-row size.
  std::vector<std::vector<float>> single;
  for (int64_t i = 0; i < rows; ++i) {
    DeviceBuffer one = poisoned(static_cast<size_t>(cols));
    const TensorView row_parts[] = {part_view.rows(i, i + 1)}, row_outs[] = {dev_view(one, DType::F32, {1, cols})};
    c->all_reduce_sum(row_parts, row_outs);
    single.push_back(download(one, static_cast<size_t>(cols)));
  }
  const TensorView parts[] = {part_view}, outs[] = {strided(all.data(), rows, cols, ld, Device::CUDA)};
  c->all_reduce_sum(parts, outs);
  const std::vector<float> sixteen = download(all, static_cast<size_t>(rows * ld));
  for (int64_t i = 0; i < rows; ++i) {
    ASSERT_TRUE(bit_equal(sixteen.data() + i * ld, want.as<float>() + i * cols, static_cast<size_t>(cols)))
        << "row " << i << " differs from the CPU simulation";
    ASSERT_TRUE(bit_equal(single[static_cast<size_t>(i)].data(), sixteen.data() + i * ld, static_cast<size_t>(cols)))
        << "row " << i << " differs between the 1-row and the 16-row call";
    for (int64_t k = cols; k < ld; ++k) ASSERT_TRUE(std::isnan(sixteen[static_cast<size_t>(i * ld + k)]));
  }
}

TEST_F(NcclGpu, OneRankGathersColumnsAsTheCpuSimulation) {
  const auto c = one_rank();
  const int64_t rows = 3, cols = 5, ld = 8;  // a strided part goes through the padded send buffer
  const std::vector<float> p = partial_values(static_cast<size_t>(rows * ld), 11);
  Tensor want = Tensor::empty(DType::F32, {rows, cols});
  std::vector<float> host(p);
  const TensorView host_parts[] = {strided(host.data(), rows, cols, ld, Device::CPU)}, host_outs[] = {want};
  in_process_collective(1)->all_gather_columns(host_parts, host_outs);

  for (const bool contiguous : {false, true}) {
    SCOPED_TRACE(contiguous ? "contiguous part" : "strided part");
    DeviceBuffer part = DeviceBuffer::from(p), out = poisoned(static_cast<size_t>(rows * cols));
    if (contiguous) {
      std::vector<float> packed;
      for (int64_t i = 0; i < rows; ++i) packed.insert(packed.end(), p.begin() + i * ld, p.begin() + i * ld + cols);
      part = DeviceBuffer::from(packed);
    }
    const TensorView parts[] = {contiguous ? dev_view(part, DType::F32, {rows, cols})
                                           : strided(part.data(), rows, cols, ld, Device::CUDA)};
    const TensorView outs[] = {dev_view(out, DType::F32, {rows, cols})};
    c->all_gather_columns(parts, outs);
    const std::vector<float> got = download(out, static_cast<size_t>(rows * cols));
    EXPECT_TRUE(bit_equal(got.data(), want.as<float>(), got.size()));
  }
}

TEST_F(NcclGpu, RefusesWhatItCannotSend) {
  const auto error_of = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(error_of([&] {
              cuda::nccl_collective(lib_, {{0, nullptr}, {0, nullptr}});
            }).find("listed for ranks 0 and 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              cuda::nccl_collective(lib_, {{cuda::device_count(), nullptr}});
            }).find("CUDA device(s)"),
            std::string::npos);
  const auto c = one_rank();
  Tensor host = Tensor::zeros(DType::F32, {2, 4});
  DeviceBuffer dev = poisoned(16), wide = poisoned(32);
  const TensorView on_host[] = {host}, on_device[] = {dev_view(dev, DType::F32, {2, 4})},
                   gapped[] = {strided(wide.data(), 2, 4, 16, Device::CUDA)};
  EXPECT_NE(error_of([&] { c->all_reduce_sum(on_host, on_device); }).find("f32 device matrices"), std::string::npos);
  EXPECT_NE(error_of([&] { c->all_reduce_sum(gapped, on_device); }).find("contiguous partials"), std::string::npos);
  const TensorView two[] = {on_device[0], on_device[0]};
  EXPECT_NE(error_of([&] { c->all_reduce_sum(two, two); }).find("2 views for 1 ranks"), std::string::npos);
}

}  // namespace
}  // namespace specserve::cuda_test
