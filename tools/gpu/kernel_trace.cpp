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
// CSV columns: start_ns, end_ns, grid (x*y*z CTAs), block threads, kernel name (mangled). With
// SPECSERVE_TRACE_API=1 the CUDA runtime calls follow as rows too (ctas 0, the calling thread id in the
// threads column, "api:" and the call's name): the host's side of the timeline. Unlike ncu, which
// serialises kernels and flushes caches, this is the timeline the step really has, so a kernel's share of
// the step is the time from the previous kernel's end to its own end (kernel_trace_summary.py).
// Not built by CMake (it needs CUPTI, which only the CUDA toolkit has); scripts/gpu_trace.sh builds and runs it.
#include <cuda.h>
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
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

// One CUDA runtime call (SPECSERVE_TRACE_API=1): its host-side span on the calling thread.
struct ApiCall {
  uint64_t start, end;
  uint32_t thread;
  CUpti_CallbackId cbid;
};

std::mutex g_mu;
std::vector<Kernel> g_kernels;
std::vector<ApiCall> g_api;
bool g_on = false;
bool g_api_on = false;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, s ? s : "?");
}

void enable_records(bool on) {
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME};
  for (int i = 0; i < (g_api_on ? 2 : 1); ++i)
    check(on ? cuptiActivityEnable(kinds[i]) : cuptiActivityDisable(kinds[i]), "cuptiActivityEnable/Disable");
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
    if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      g_api.push_back({a->start, a->end, a->threadId, a->cbid});
      continue;
    }
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
  // One row that aligns the clocks: CUPTI's timestamp and CLOCK_MONOTONIC (engine/step_trace.h) read together.
  uint64_t cupti_now = 0;
  cuptiGetTimestamp(&cupti_now);
  timespec mono{};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  std::fprintf(f, "%llu,%llu,0,0,clock:cupti,monotonic\n", (unsigned long long)cupti_now,
               (unsigned long long)(uint64_t(mono.tv_sec) * 1000000000ull + uint64_t(mono.tv_nsec)));
  // Runtime calls as rows of the same CSV: ctas 0, threads the calling thread, the call's name.
  for (const ApiCall& a : g_api) {
    const char* name = nullptr;
    cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a.cbid, &name);
    std::fprintf(f, "%llu,%llu,0,%u,api:%s\n", (unsigned long long)a.start, (unsigned long long)a.end, a.thread,
                 name ? name : "?");
  }
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels, %zu runtime calls\n", g_kernels.size(), g_api.size());
}

// Collects only inside cudaProfilerStart / cudaProfilerStop (SPECSERVE_TRACE_ALL=1: from the start).
void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000 && cb->callbackSite == CUPTI_API_EXIT && !g_on) {
    enable_records(true);
    g_on = true;
  } else if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000 && cb->callbackSite == CUPTI_API_ENTER && g_on) {
    cuCtxSynchronize();  // every kernel of the range has ended before the records are cut off
    enable_records(false);
    g_on = false;
  }
}

}  // namespace

extern "C" int InitializeInjection(void) {
  static CUpti_SubscriberHandle subscriber;
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  const char* api = std::getenv("SPECSERVE_TRACE_API");
  g_api_on = api && std::strcmp(api, "1") == 0;
  const char* all = std::getenv("SPECSERVE_TRACE_ALL");
  if (all && std::strcmp(all, "1") == 0) {
    enable_records(true);
    g_on = true;
  } else {
    check(cuptiSubscribe(&subscriber, on_api, nullptr), "cuptiSubscribe");
    check(cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API), "cuptiEnableDomain");
  }
  std::atexit(write_trace);
  return 1;
}
