// A kernel timeline of the real run (graphs, PDL, warm caches), for the GPU machine where Nsight
// Systems cannot make a report: a CUPTI injection library that records every kernel's start and end
// between cudaProfilerStart and cudaProfilerStop (SPECSERVE_PROFILE_STEP makes `specserve bench` repeat one
// step inside such a range) and writes them as CSV when the process exits.
//
//   scripts/gpu_trace.sh build                      (here: g++ ... -lcupti -lcuda -o .gpu-probe/kernel_trace.so)
//   scripts/gpu_trace.sh qwen3-8b decode            (there: CUDA_INJECTION64_PATH=.../kernel_trace.so
//                                                    SPECSERVE_TRACE_OUT=trace.csv SPECSERVE_PROFILE_STEP=decode
//                                                    specserve bench ..., then kernel_trace_summary.py)
//
// CSV columns: start_ns, end_ns, grid (x*y*z CTAs), block threads, kernel name (mangled). Unlike ncu, which
// serialises kernels and flushes caches, this is the timeline the step really has, so a kernel's share of
// the step is the time from the previous kernel's end to its own end (kernel_trace_summary.py).
// Not built by CMake (it needs CUPTI, which only the CUDA toolkit has); scripts/gpu_trace.sh builds and runs it.
#include <cuda.h>
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Kernel {
  uint64_t start, end;
  uint64_t ctas;
  uint32_t threads;
  std::string name;
};

std::mutex g_mu;
std::vector<Kernel> g_kernels;
bool g_on = false;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, s ? s : "?");
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = size_t{8} << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = kBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    g_kernels.push_back({k->start, k->end, uint64_t(k->gridX) * k->gridY * k->gridZ,
                         uint32_t(k->blockX * k->blockY * k->blockZ), k->name ? k->name : "?"});
  }
  std::free(buffer);
}

void write_trace() {
  check(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
  const char* path = std::getenv("SPECSERVE_TRACE_OUT");
  FILE* f = std::fopen(path && *path ? path : "kernel_trace.csv", "w");
  if (f == nullptr) {
    std::perror("kernel_trace: open");
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(f, "start_ns,end_ns,ctas,threads,name\n");
  for (const Kernel& k : g_kernels)
    std::fprintf(f, "%llu,%llu,%llu,%u,%s\n", (unsigned long long)k.start, (unsigned long long)k.end,
                 (unsigned long long)k.ctas, k.threads, k.name.c_str());
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels\n", g_kernels.size());
}

// Collects only inside cudaProfilerStart / cudaProfilerStop (SPECSERVE_TRACE_ALL=1: from the start).
void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000 && cb->callbackSite == CUPTI_API_EXIT && !g_on) {
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
    g_on = true;
  } else if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000 && cb->callbackSite == CUPTI_API_ENTER && g_on) {
    cuCtxSynchronize();  // every kernel of the range has ended before the records are cut off
    check(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityDisable");
    g_on = false;
  }
}

}  // namespace

extern "C" int InitializeInjection(void) {
  static CUpti_SubscriberHandle subscriber;
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  const char* all = std::getenv("SPECSERVE_TRACE_ALL");
  if (all && std::strcmp(all, "1") == 0) {
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
    g_on = true;
  } else {
    check(cuptiSubscribe(&subscriber, on_api, nullptr), "cuptiSubscribe");
    check(cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API), "cuptiEnableDomain");
  }
  std::atexit(write_trace);
  return 1;
}
