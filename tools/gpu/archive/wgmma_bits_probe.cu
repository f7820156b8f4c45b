// Probe: does a chain of wgmma.m64nNk16 (f32 += bf16 x bf16) give the same bits as a chain of
// mma.sync.m16n8k16 per output element? (The premise of src/backend/cuda/matmul_wgmma.cuh.) Also
// checks which descriptor field is the no-swizzle layout's k-direction stride. 2,048 CTAs each run one
// 64 x 16 x 1024 chain both ways on four kinds of data (normal; exponents over 2^-30..2^30; zeros of
// both signs and subnormals; tied magnitudes) and count the elements whose bits differ.
//
//   /usr/local/cuda/bin/nvcc -std=c++20 -gencode arch=compute_90a,code=sm_90a -O2 \
//       -o wgmma_bits tools/gpu/archive/wgmma_bits_probe.cu && ./wgmma_bits      (on an H100 / H200)
//
// H200 (driver 580.159.04, 2026-11-30): mode 0 (leading offset = the k-direction stride) 0 of 2,097,152
// elements differ, with scale-d = 0 on the first step too; mode 1 differs everywhere (wrong layout).
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <random>
#include <vector>

constexpr int kN = 16;   // columns per wgmma
constexpr int kCh = 64;  // chunks (K = 1024)
constexpr int kK = kCh * 16;

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pair(const uint16_t* p) { return uint32_t(p[0]) | (uint32_t(p[1]) << 16); }

// A [64][kK], B [kN][kK] per CTA; out [64][kN]
__global__ void mma_chain(const uint16_t* A, const uint16_t* B, float* out) {
  const uint16_t* a = A + size_t(blockIdx.x) * 64 * kK;
  const uint16_t* b = B + size_t(blockIdx.x) * kN * kK;
  float* o = out + size_t(blockIdx.x) * 64 * kN;
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  float acc[kN / 8][4] = {};
  for (int c = 0; c < kCh; ++c) {
    uint32_t af[4];
    for (int r = 0; r < 4; ++r) {
      int row = 16 * w + (lane >> 2) + 8 * (r & 1), col = c * 16 + 2 * (lane & 3) + 8 * (r >> 1);
      af[r] = pair(a + size_t(row) * kK + col);
    }
    for (int j = 0; j < kN / 8; ++j) {
      int n = 8 * j + (lane >> 2), k = c * 16 + 2 * (lane & 3);
      mma_bf16(acc[j], af, pair(b + size_t(n) * kK + k), pair(b + size_t(n) * kK + k + 8));
    }
  }
  for (int j = 0; j < kN / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      int row = 16 * w + (lane >> 2) + 8 * (e >> 1), col = 8 * j + 2 * (lane & 3) + (e & 1);
      o[row * kN + col] = acc[j][e];
    }
}

__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32);
}

template <int Mode>  // 0: LBO = K-direction core stride (128), SBO = M/N-direction (256); 1: swapped
__global__ void wgmma_chain(const uint16_t* A, const uint16_t* B, float* out, int scale_first) {
  __shared__ __align__(1024) uint16_t sa[64 * 16];
  __shared__ __align__(1024) uint16_t sb[kN * 16];
  const uint16_t* a = A + size_t(blockIdx.x) * 64 * kK;
  const uint16_t* b = B + size_t(blockIdx.x) * kN * kK;
  float* o = out + size_t(blockIdx.x) * 64 * kN;
  int t = threadIdx.x, lane = t & 31, w = t >> 5;
  float d[kN / 2];
  for (int i = 0; i < kN / 2; ++i) d[i] = 0.0f;
  auto off = [](int r, int k) { return (r / 8) * 128 + (k / 8) * 64 + (r % 8) * 8 + (k % 8); };  // elements
  for (int c = 0; c < kCh; ++c) {
    for (int i = t; i < 64 * 16; i += 128) {
      int r = i / 16, k = i % 16;
      sa[off(r, k)] = a[size_t(r) * kK + c * 16 + k];
    }
    for (int i = t; i < kN * 16; i += 128) {
      int r = i / 16, k = i % 16;
      sb[off(r, k)] = b[size_t(r) * kK + c * 16 + k];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    uint32_t lbo = Mode == 0 ? 128 : 256, sbo = Mode == 0 ? 256 : 128;
    uint64_t da = desc(static_cast<uint32_t>(__cvta_generic_to_shared(sa)), lbo, sbo);
    uint64_t db = desc(static_cast<uint32_t>(__cvta_generic_to_shared(sb)), lbo, sbo);
    int sc = (c == 0) ? scale_first : 1;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(da), "l"(db), "r"(sc)
        : "memory");
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
  }
  for (int i = 0; i < kN / 2; ++i) {
    int j = i / 4, e = i % 4;
    int row = 16 * w + (lane >> 2) + 8 * (e >> 1), col = 8 * j + 2 * (lane & 3) + (e & 1);
    o[row * kN + col] = d[i];
  }
}

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

int main() {
  const int ctas = 2048;
  std::mt19937 rng(1234);
  std::vector<uint16_t> A(size_t(ctas) * 64 * kK), B(size_t(ctas) * kN * kK);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> ex(-30, 30), kind(0, 9);
  auto gen = [&](int cta) {
    int mode = cta % 4;
    return [&, mode]() {
      float v = nd(rng);
      if (mode == 1) v = std::ldexp(v, ex(rng));  // wide exponents: cancellation, big shifts
      if (mode == 2) {
        int k = kind(rng);
        if (k == 0)
          v = 0.f;
        else if (k == 1)
          v = -0.f;
        else if (k == 2)
          v = std::ldexp(v, -130);
      }
      if (mode == 3) v = std::ldexp(1.f + std::floor(v * 4) / 128.f, ex(rng) / 3);  // many equal magnitudes, ties
      return to_bf16(v);
    };
  };
  for (int c = 0; c < ctas; ++c) {
    auto g = gen(c);
    for (size_t i = 0; i < size_t(64) * kK; ++i) A[size_t(c) * 64 * kK + i] = g();
    for (size_t i = 0; i < size_t(kN) * kK; ++i) B[size_t(c) * kN * kK + i] = g();
  }
  uint16_t *dA, *dB;
  float *o1, *o2, *o3, *o4;
  cudaMalloc(&dA, A.size() * 2);
  cudaMalloc(&dB, B.size() * 2);
  size_t on = size_t(ctas) * 64 * kN;
  cudaMalloc(&o1, on * 4);
  cudaMalloc(&o2, on * 4);
  cudaMalloc(&o3, on * 4);
  cudaMalloc(&o4, on * 4);
  cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice);
  mma_chain<<<ctas, 128>>>(dA, dB, o1);
  wgmma_chain<0><<<ctas, 128>>>(dA, dB, o2, 1);
  wgmma_chain<1><<<ctas, 128>>>(dA, dB, o3, 1);
  wgmma_chain<0><<<ctas, 128>>>(dA, dB, o4, 0);
  cudaError_t e = cudaDeviceSynchronize();
  printf("cuda: %s\n", cudaGetErrorString(e));
  std::vector<float> h1(on), h2(on), h3(on), h4(on);
  cudaMemcpy(h1.data(), o1, on * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(h2.data(), o2, on * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(h3.data(), o3, on * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(h4.data(), o4, on * 4, cudaMemcpyDeviceToHost);
  // sanity vs double reference on the normal-distribution CTAs
  double maxrel = 0;
  for (int c = 0; c < ctas; c += 4)
    for (int r = 0; r < 64; r += 7)
      for (int n = 0; n < kN; ++n) {
        double s = 0, sa = 0;
        for (int k = 0; k < kK; ++k) {
          double p = double(from_bf16(A[(size_t(c) * 64 + r) * kK + k])) * from_bf16(B[(size_t(c) * kN + n) * kK + k]);
          s += p;
          sa += std::fabs(p);
        }
        maxrel = std::max(maxrel, std::fabs(s - h1[(size_t(c) * 64 + r) * kN + n]) / (sa + 1e-30));
      }
  printf("mma.sync vs double: max |err|/sum|p| = %.3g\n", maxrel);
  auto cmp = [&](const std::vector<float>& h, const char* name) {
    size_t diff = 0, diffmode[4] = {};
    for (size_t i = 0; i < on; ++i)
      if (memcmp(&h[i], &h1[i], 4)) {
        ++diff;
        ++diffmode[(i / (64 * kN)) % 4];
      }
    printf("%s: %zu of %zu elements differ from mma.sync (by data mode: %zu %zu %zu %zu)\n", name, diff, on,
           diffmode[0], diffmode[1], diffmode[2], diffmode[3]);
  };
  cmp(h2, "wgmma mode0 (LBO=K stride)");
  cmp(h3, "wgmma mode1 (LBO=MN stride)");
  cmp(h4, "wgmma mode0, scale-d=0 first");
  return 0;
}
