#include "backend/cuda/launch_segment.h"

#include <cuda_runtime.h>

#include <cstring>

namespace specserve::cuda::graphs {

void Segment::add(const KernelLaunch& l, void* const* args, const uint32_t* sizes, int nargs) {
  Recorded r;
  r.l = l;
  r.arg_begin = static_cast<uint32_t>(arg_offset.size());
  r.nargs = static_cast<uint32_t>(nargs);
  for (int a = 0; a < nargs; ++a) {
    const size_t off = (bytes.size() + 7) / 8 * 8;
    bytes.resize(off + sizes[a], 0);
    std::memcpy(bytes.data() + off, args[a], sizes[a]);
    arg_offset.push_back(static_cast<uint32_t>(off));
    arg_size.push_back(sizes[a]);
  }
  launches.push_back(r);
}

std::vector<uint64_t> signature_of(const Segment& s) {
  std::vector<uint64_t> sig;
  sig.reserve(s.launches.size() * 8 + s.arg_size.size());
  for (const Recorded& r : s.launches) {
    const KernelLaunch& l = r.l;
    sig.push_back(reinterpret_cast<uintptr_t>(l.func));
    sig.push_back((uint64_t{l.cluster} << 32) | (l.pdl ? 1u : 0u));
    sig.push_back(r.nargs);
    for (uint32_t a = 0; a < r.nargs; ++a) sig.push_back(s.arg_size[r.arg_begin + a]);
  }
  return sig;
}

std::vector<uint64_t> geometry_of(const Segment& s) {
  std::vector<uint64_t> geo;
  geo.reserve(s.launches.size() * 4);
  for (const Recorded& r : s.launches) {
    const KernelLaunch& l = r.l;
    geo.push_back((uint64_t{l.grid.x} << 32) | l.grid.y);
    geo.push_back((uint64_t{l.grid.z} << 32) | l.block.x);
    geo.push_back((uint64_t{l.block.y} << 32) | l.block.z);
    geo.push_back(l.smem);
  }
  return geo;
}

bool same_geometry(const KernelLaunch& a, const KernelLaunch& b) {
  return a.grid.x == b.grid.x && a.grid.y == b.grid.y && a.grid.z == b.grid.z && a.block.x == b.block.x &&
         a.block.y == b.block.y && a.block.z == b.block.z && a.smem == b.smem;
}

uint64_t hash_of(const std::vector<uint64_t>& sig) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t w : sig) {
    h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 1099511628211ull;
  }
  return h;
}

cudaError_t launch_now(const KernelLaunch& l, cudaStream_t stream, void** args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = l.grid;
  cfg.blockDim = l.block;
  cfg.dynamicSmemBytes = l.smem;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2] = {};
  unsigned n = 0;
  if (l.cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = l.cluster;
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  if (l.pdl) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  return cudaLaunchKernelExC(&cfg, l.func, args);
}

}  // namespace specserve::cuda::graphs
