#pragma once
// What step_graphs.cpp records: a segment of kernel launches (each launch's configuration and a copy of
// its argument bytes, plus the metadata its ops staged), its signature (the launches' functions and
// argument layout, without their values or geometry: the key of its graph), and a direct launch of a
// recorded configuration.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/cuda/step_graphs.h"

namespace specserve::cuda::graphs {

// One recorded launch; its arguments are args[arg_begin, arg_begin + nargs) of the segment.
struct Recorded {
  KernelLaunch l;
  uint32_t arg_begin = 0;
  uint32_t nargs = 0;
};

struct Segment {
  std::vector<Recorded> launches;
  std::vector<uint8_t> bytes;  // argument values, each at an 8-byte aligned offset
  std::vector<uint32_t> arg_offset, arg_size;
  size_t region = 0;                              // its staging region on the device
  size_t staged = 0;                              // bytes used in the region
  std::vector<char> host;                         // their host copy
  std::vector<std::pair<size_t, size_t>> recent;  // (offset, bytes) of its stages

  // Appends launch l with args[i] pointing to the value of parameter i (sizes[i] bytes).
  void add(const KernelLaunch& l, void* const* args, const uint32_t* sizes, int nargs);
  void clear() {
    launches.clear();
    bytes.clear();
    host.clear();
    arg_offset.clear();
    arg_size.clear();
    staged = 0;
    recent.clear();
  }
  // Pointers to each argument of launch i, as cudaLaunchKernelExC and kernel nodes take them.
  void arg_pointers(size_t i, std::vector<void*>& out) {
    out.clear();
    const Recorded& r = launches[i];
    for (uint32_t a = 0; a < r.nargs; ++a) out.push_back(bytes.data() + arg_offset[r.arg_begin + a]);
  }
  // Bytes of the arguments of launch i.
  std::pair<size_t, size_t> arg_range(size_t i) const {
    const Recorded& r = launches[i];
    if (r.nargs == 0) return {0, 0};
    const size_t first = arg_offset[r.arg_begin], last = r.arg_begin + r.nargs - 1;
    return {first, arg_offset[last] + arg_size[last] - first};
  }
};

// The shape of a segment, the key of its graph: each launch's function, cluster, PDL and argument sizes.
// Grids, blocks and dynamic shared memory are left out: a kernel node's geometry can be set before a
// replay like its arguments (cudaGraphExecKernelNodeSetParams), so steps whose row counts differ (a
// verify's per-sequence draft lengths, a decode batch's longest context) share one graph.
std::vector<uint64_t> signature_of(const Segment& s);
// Each launch's grid, block and dynamic shared memory, in order.
std::vector<uint64_t> geometry_of(const Segment& s);
// Whether two launches have the same grid, block and dynamic shared memory.
bool same_geometry(const KernelLaunch& a, const KernelLaunch& b);
uint64_t hash_of(const std::vector<uint64_t>& sig);

// cudaLaunchKernelExC of a recorded configuration (cluster and PDL attributes as recorded).
cudaError_t launch_now(const KernelLaunch& l, cudaStream_t stream, void** args);

}  // namespace specserve::cuda::graphs
