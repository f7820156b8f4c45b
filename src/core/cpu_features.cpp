#include "core/cpu_features.h"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>

#include "core/env_registry.h"

namespace specserve {

namespace {
CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.fma = c & bit_FMA;
  f.f16c = c & bit_F16C;
  bool osxsave = c & bit_OSXSAVE;
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  bool ymm_ok = (xcr0 & 0x6) == 0x6;
  bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ymm_ok && (b & bit_AVX2);
    f.avx512f = zmm_ok && (b & bit_AVX512F);
    f.avx512bw = zmm_ok && (b & bit_AVX512BW);
    f.avx512vl = zmm_ok && (b & bit_AVX512VL);
    f.avx512dq = zmm_ok && (b & bit_AVX512DQ);
    f.amx_bf16 = d & (1u << 22);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = zmm_ok && (a & (1u << 5));
  return f;
}

bool forced_avx2() { return env_text("SPECSERVE_ISA") == "avx2"; }
}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool use_avx512() {
  static const bool v = cpu_features().has_avx512() && !forced_avx2();
  return v;
}

bool use_avx512_bf16() {
  static const bool v = use_avx512() && cpu_features().avx512_bf16;
  return v;
}

}  // namespace specserve
