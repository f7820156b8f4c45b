#pragma once
// Run-time CPU feature detection, so AVX-512 kernels are only called where the CPU has them.
namespace specserve {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;

  // All of avx512f/bw/vl/dq: the set our AVX-512 kernels are compiled for.
  bool has_avx512() const { return avx512f && avx512bw && avx512vl && avx512dq; }
};

const CpuFeatures& cpu_features();

// SPECSERVE_ISA=avx2 forces the AVX2 kernels (for testing both paths on an AVX-512 machine).
bool use_avx512();
bool use_avx512_bf16();

}  // namespace specserve
