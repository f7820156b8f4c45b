// The CUDA backend's per-device state (backend/cuda/device_scope.h): the current device as DeviceScope leaves
// it, nested scopes restoring it, and, on a machine with two or more GPUs, a second device with its own
// allocator (buffers on that device, returned to it), stream and launch recorder, where an op gives the bits
// it gives on device 0. On one GPU the second-device tests skip, saying why.
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/step_graphs.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

int runtime_device() {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

int device_of(const void* p) {
  cudaPointerAttributes a{};
  EXPECT_EQ(cudaPointerGetAttributes(&a, p), cudaSuccess);
  return a.device;
}

TEST_F(Gpu, DeviceScopeOfTheCurrentDeviceChangesNothing) {
  const int d = cuda::current_device();
  EXPECT_EQ(d, runtime_device());
  {
    cuda::DeviceScope scope(d);
    EXPECT_EQ(cuda::current_device(), d);
    EXPECT_EQ(runtime_device(), d);
  }
  EXPECT_EQ(cuda::current_device(), d);
  EXPECT_EQ(&cuda_memory(), &cuda_memory(d));
  EXPECT_THROW(cuda::DeviceScope(cuda::kMaxDevices), Error);
  EXPECT_THROW(cuda::DeviceScope(-1), Error);
}

class TwoGpus : public Gpu {
 protected:
  void SetUp() override {
    Gpu::SetUp();
    if (IsSkipped()) return;
    if (cuda::device_count() < 2) GTEST_SKIP() << "one CUDA device: the second-device tests need two";
  }
};

TEST_F(TwoGpus, ScopesNestAndRestore) {
  ASSERT_EQ(cuda::current_device(), 0);
  {
    cuda::DeviceScope one(1);
    EXPECT_EQ(cuda::current_device(), 1);
    EXPECT_EQ(runtime_device(), 1);
    {
      cuda::DeviceScope zero(0);
      EXPECT_EQ(runtime_device(), 0);
    }
    EXPECT_EQ(runtime_device(), 1);
    EXPECT_EQ(&cuda_memory(), &cuda_memory(1));
  }
  EXPECT_EQ(cuda::current_device(), 0);
  EXPECT_EQ(runtime_device(), 0);
}

TEST_F(TwoGpus, EachDeviceHasItsAllocatorAndStream) {
  const Memory& m0 = cuda_memory(0);
  const Memory& m1 = cuda_memory(1);
  ASSERT_NE(&m0, &m1);
  cudaStream_t s0 = cuda::cuda_stream(), s1 = nullptr;
  {
    // Device 1's memory allocates there whichever device is current, and its buffer goes back to it.
    Buffer b(m1, size_t{1} << 20);
    EXPECT_EQ(device_of(b.data()), 1);
    EXPECT_EQ(cuda::current_device(), 0);
    cuda::DeviceScope one(1);
    s1 = cuda::cuda_stream();
    Buffer c(cuda_memory(), 4096);
    EXPECT_EQ(device_of(c.data()), 1);
  }
  EXPECT_NE(s0, s1);
  Buffer z(m0, 4096);
  EXPECT_EQ(device_of(z.data()), 0);
}

// The same rms_norm and matmul on each device, through each device's stream, recorder and staging: the same
// bits (the devices are the same model), and the inputs copied between devices through the host.
TEST_F(TwoGpus, AnOpGivesTheSameBitsOnEitherDevice) {
  const int64_t M = 3, K = 256, N = 96;
  const std::vector<float> x = randn(static_cast<size_t>(M * K), 5), w = randn(static_cast<size_t>(N * K), 6, 0.05f);
  const std::vector<float> g = randn(static_cast<size_t>(K), 7);
  auto run = [&](int device) {
    cuda::DeviceScope scope(device);
    const Memory& mem = cuda_memory();
    MemTensor dx = MemTensor::empty(mem, DType::F32, {M, K}), dw = MemTensor::empty(mem, DType::BF16, {N, K});
    MemTensor dg = MemTensor::empty(mem, DType::F32, {K}), dy = MemTensor::empty(mem, DType::F32, {M, N});
    MemTensor dn = MemTensor::empty(mem, DType::F32, {M, K});
    mem.upload(dx.as<void>(), x.data(), x.size() * 4);
    const std::vector<uint16_t> wb = to_bf16(w);
    mem.upload(dw.as<void>(), wb.data(), wb.size() * 2);
    mem.upload(dg.as<void>(), g.data(), g.size() * 4);
    const Ops& ops = cuda_ops();
    ops.rms_norm(dx, dg, NormKind::Plain, 1e-6f, dn);
    ops.matmul(dn, dw, dy);
    std::vector<float> y(static_cast<size_t>(M * N));
    mem.download(y.data(), dy.as<void>(), y.size() * 4);
    return y;
  };
  const std::vector<float> y0 = run(0), y1 = run(1);
  EXPECT_TRUE(bit_equal(y0.data(), y1.data(), y0.size()));
  EXPECT_EQ(cuda::current_device(), 0);
}

}  // namespace
}  // namespace specserve::cuda_test
