// Probe: can a bulk L2 prefetch of the next matmul's weights, issued before a latency-bound kernel (a
// norm, attention), make the weight stream that follows it shorter? Between two matmuls of a decode step
// the DRAM idles while the small kernels run (docs/history/GPU_PERF_NOTES.md, session 10: 26 µs an 8B layer); if
// the L2 (50 MB on an H200) can hold the next weights by then, the next stream reads them from L2.
//
// Per case, on one stream, rotating over 12 matrices (cold L2 for each): [prefetch P bytes of matrix i]
// -> spin(T µs, one CTA) -> stream-read matrix i (a sum over all of it at the copy bandwidth), timed with
// events over 60 repetitions. Prefetch kinds: none, cp.async.bulk.prefetch.L2 (one instruction per 64 KB
// chunk), prefetch.global.L2 (one per 128-byte line).
//
//   /usr/local/cuda/bin/nvcc -std=c++17 -arch=sm_90 -O2 -o l2_prefetch_probe tools/gpu/archive/l2_prefetch_probe.cu
//   ./l2_prefetch_probe        (on an H100 / H200)
//
// H200 (driver 580.159.04, 2026-12-01; L2 60 MB): 33.5 MB read cold 11.0 us, hot (the same kernel reading it
// again) 6.4 us, so L2 hits would pay. But no prefetch issued by another kernel made the read faster: with a
// 16 us spin between, prefetch.global.L2 of 8 / 16 / 32 MB left the read at its cold time and its kernel
// cost 3-5 us (evict_last the same); real loads by a kernel with another thread-to-address mapping also
// left it cold; only a kernel with the reader's own mapping (the same CTAs on the same SMs) made it hot
// (the L2 of an H100 caches per partition for its own SMs), and a kernel with outstanding prefetches does
// not complete before they land. cp.async.bulk.prefetch.L2 kernels took ~35 us each, whatever the size.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x)                                                                 \
  do {                                                                        \
    cudaError_t e = (x);                                                      \
    if (e != cudaSuccess) {                                                   \
      printf("err %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

__global__ void spin(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}

__global__ void stream_read(const uint4* p, int64_t n, unsigned* out) {
  unsigned acc = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint4 v;
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p + i));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *out = acc;
}

// One thread per 64 KB chunk.
__global__ void prefetch_bulk(const char* p, int64_t bytes) {
  const int64_t chunk = 64 << 10;
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c * chunk < bytes;
       c += int64_t{gridDim.x} * blockDim.x) {
    const int64_t left = bytes - c * chunk;
    const unsigned size = static_cast<unsigned>(left < chunk ? left : chunk);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + c * chunk), "r"(size) : "memory");
  }
}

__global__ void prefetch_lines(const char* p, int64_t bytes) {
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 128; i < bytes;
       i += int64_t{gridDim.x} * blockDim.x * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + i));
}

__global__ void prefetch_lines_last(const char* p, int64_t bytes) {
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 128; i < bytes;
       i += int64_t{gridDim.x} * blockDim.x * 128)
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p + i));
}

// prefetch.global.L2 with stream_read's mapping of threads to addresses (the same SMs, if the same CTAs
// land on the same SMs: the L2 of an H100 caches per partition for the SMs attached to it).
__global__ void prefetch_mapped(const uint4* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    if ((i & 7) == 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + i));
}

// Real loads whose values are dropped (a loader kernel).
__global__ void load_lines(const char* p, int64_t bytes, unsigned* out) {
  unsigned acc = 0;
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 16; i < bytes;
       i += int64_t{gridDim.x} * blockDim.x * 16) {
    unsigned v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p + i));
    acc ^= v;
  }
  if (acc == 0x12345678u) *out = acc;
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  const int kMats = 12;
  const int64_t bytes = int64_t{4096} * 4096 * 2;  // the 8B's o projection
  std::vector<char*> m(kMats);
  for (auto& x : m) {
    CK(cudaMalloc(&x, bytes));
    CK(cudaMemset(x, 1, bytes));
  }
  unsigned* out;
  CK(cudaMalloc(&out, 4));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int sms = prop.multiProcessorCount;
  auto run = [&](int kind, int64_t pbytes, int spin_us, int reps) -> float {
    for (int r = 0; r < reps + 3; ++r) {
      if (r == 3) cudaEventRecord(e0, st);
      const char* mat = m[r % kMats];
      if (kind == 1) prefetch_bulk<<<4, 128, 0, st>>>(mat, pbytes);
      if (kind == 2) prefetch_lines<<<sms * 2, 256, 0, st>>>(mat, pbytes);
      if (kind == 3) prefetch_lines_last<<<sms * 2, 256, 0, st>>>(mat, pbytes);
      if (kind == 4) load_lines<<<sms * 2, 256, 0, st>>>(mat, pbytes, out);
      if (kind == 5) prefetch_mapped<<<sms * 4, 512, 0, st>>>(reinterpret_cast<const uint4*>(mat), pbytes / 16);
      if (kind == 6) stream_read<<<sms * 4, 512, 0, st>>>(reinterpret_cast<const uint4*>(mat), pbytes / 16, out);
      if (spin_us > 0) spin<<<1, 32, 0, st>>>(spin_us * 1000LL);
      stream_read<<<sms * 4, 512, 0, st>>>(reinterpret_cast<const uint4*>(mat), bytes / 16, out);
    }
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    return ms * 1000 / reps;
  };
  const int reps = 60;
  for (int64_t mb : {4, 8, 16, 24, 33}) {  // the same bytes read again and again: hot in L2
    const int64_t b = mb == 33 ? bytes : mb << 20;
    for (int r = 0; r < reps + 3; ++r) {
      if (r == 3) cudaEventRecord(e0, st);
      stream_read<<<sms * 4, 512, 0, st>>>(reinterpret_cast<const uint4*>(m[0]), b / 16, out);
    }
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float hot = 0;
    cudaEventElapsedTime(&hot, e0, e1);
    for (int r = 0; r < reps + 3; ++r) {
      if (r == 3) cudaEventRecord(e0, st);
      stream_read<<<sms * 4, 512, 0, st>>>(reinterpret_cast<const uint4*>(m[r % kMats]), b / 16, out);
    }
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float cold = 0;
    cudaEventElapsedTime(&cold, e0, e1);
    printf("read %lld MB: hot (L2) %.1f us, cold %.1f us\n", static_cast<long long>(mb), hot * 1000 / reps,
           cold * 1000 / reps);
  }
  printf("stream alone: %.1f us (%.2f TB/s)\n", run(0, 0, 0, reps), 0.0);
  for (int spin_us : {0, 8, 16}) {
    const float base = run(0, 0, spin_us, reps);
    printf("spin %2d us: no prefetch %.1f us", spin_us, base);
    for (int kind : {4, 5, 6})
      for (int64_t mb : {8, 16, 32}) {
        const int64_t pb = mb << 20 < bytes ? mb << 20 : bytes;
        printf(" | %s %2lld MB %.1f",
               kind == 4   ? "load"
               : kind == 5 ? "pfmap"
                           : "ldmap",
               static_cast<long long>(mb), run(kind, pb, spin_us, reps));
      }
    printf("\n");
  }
  // Is a prefetched line still in L2 after another matrix streams through? prefetch i, read j, read i.
  for (int kind : {1}) {
    for (int r = 0; r < 3; ++r) {
      cudaEventRecord(e0, st);
      prefetch_bulk<<<4, 128, 0, st>>>(m[0], bytes);
      spin<<<1, 32, 0, st>>>(12000);
      stream_read<<<sms * 4, 512, 0, st>>>(reinterpret_cast<const uint4*>(m[1]), bytes / 16, out);
      cudaEventRecord(e1, st);
      stream_read<<<sms * 4, 512, 0, st>>>(reinterpret_cast<const uint4*>(m[0]), bytes / 16, out);
      cudaEvent_t e2;
      cudaEventCreate(&e2);
      cudaEventRecord(e2, st);
      cudaEventSynchronize(e2);
      float a = 0, b = 0;
      cudaEventElapsedTime(&a, e0, e1);
      cudaEventElapsedTime(&b, e1, e2);
      printf("prefetch m0, spin 12, read m1 %.1f us, then read m0 %.1f us\n", a * 1000, b * 1000);
    }
  }
  CK(cudaGetLastError());
  return 0;
}
