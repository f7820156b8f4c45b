#include "backend/cuda/step_graphs.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/launch_segment.h"
#include "backend/cuda/pinned_ring.h"
#include "core/env_registry.h"

namespace specserve::cuda {

namespace {

using graphs::geometry_of;
using graphs::hash_of;
using graphs::launch_now;
using graphs::PinnedRing;
using graphs::Recorded;
using graphs::same_geometry;
using graphs::Segment;
using graphs::signature_of;

constexpr size_t kRegions = 32;
constexpr size_t kRegionBytes = size_t{256} << 10;  // 8 MiB of staging in all
constexpr size_t kStageAlign = 64;
constexpr size_t kRecentStages = 16;  // stages of the segment checked for identical bytes
constexpr size_t kMaxGraphs = 512;
constexpr size_t kMaxSeen = 8192;
// Sightings of a signature and geometry before it gets an exact graph of its own (until then the
// signature's floating graph runs it, from the second sighting of the signature).
constexpr int kExactSightings = 4;

// Launches in a segment, and in the first one after a stream use other than a launch (shorter, so the GPU
// starts early). Both were measured in session 14 (docs/DECISIONS.md: graph segment lengths).
constexpr size_t kFirstSegmentLaunches = 8;
constexpr size_t kSegmentLaunches = 64;
size_t first_segment_launches() { return kFirstSegmentLaunches; }
size_t segment_launches() { return kSegmentLaunches; }

// SPECSERVE_GRAPH_DEBUG=N (core/env_registry.h): the first N node updates are logged to stderr (which
// kernel, which argument changed), to find arguments that change when they need not.
bool debug_updates() {
  static int64_t left = env_int("SPECSERVE_GRAPH_DEBUG");
  return left > 0 && left-- > 0;
}

struct Graph {
  std::vector<uint64_t> signature;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<cudaGraphNode_t> nodes;  // one kernel node per launch, in order
  std::vector<uint8_t> bytes;          // the argument bytes the nodes hold now
  std::vector<KernelLaunch> geometry;  // the grid, block and shared memory each node holds now
  uint64_t last_used = 0;

  void destroy() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
};

using Graphs = std::unordered_map<uint64_t, Graph>;

void log_update(const KernelLaunch& l, const Segment& s, const Graph& g, size_t i, bool moved) {
  const char* name = nullptr;
  if (cudaFuncGetName(&name, l.func) != cudaSuccess) name = "?";
  if (moved)
    std::fprintf(stderr, "[graphs] node %zu %s: grid (%u, %u, %u) -> (%u, %u, %u), %zu -> %zu bytes of shared memory\n",
                 i, name, g.geometry[i].grid.x, g.geometry[i].grid.y, g.geometry[i].grid.z, l.grid.x, l.grid.y,
                 l.grid.z, g.geometry[i].smem, l.smem);
  const Recorded& r = s.launches[i];
  for (uint32_t a = 0; a < r.nargs; ++a) {
    const uint32_t off = s.arg_offset[r.arg_begin + a], n = s.arg_size[r.arg_begin + a];
    for (uint32_t b = 0; b < n; ++b)
      if (s.bytes[off + b] != g.bytes[off + b]) {
        std::fprintf(stderr, "[graphs] node %zu %s: argument %u (%u bytes) differs from byte %u: %02x -> %02x\n", i,
                     name, a, n, b, g.bytes[off + b], s.bytes[off + b]);
        break;
      }
  }
}

class Recorder {
 public:
  // The current device's (device_scope.h); never destroyed: ops may run during static destruction.
  static Recorder& global() {
    static PerDevice<Recorder> per;
    return per.get(current_device(), [](int) { return new Recorder(); });
  }

  bool enabled() {
    std::lock_guard lock(mutex_);
    return enabled_;
  }
  void set_enabled(bool on) {
    std::lock_guard lock(mutex_);
    end_segment(/*reset=*/holds_ == 0);
    enabled_ = on;
  }
  GraphStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  void record(const KernelLaunch& l, cudaStream_t stream, void* const* args, const uint32_t* sizes, int nargs) {
    std::lock_guard lock(mutex_);
    if (!enabled_ || stream != launch_stream()) {
      CUDA_CHECK(launch_now(l, stream, const_cast<void**>(args)));
      return;
    }
    seg_.add(l, args, sizes, nargs);
    ++stats_.launches;
    if (seg_.launches.size() >= (index_ == 0 ? first_segment_launches() : segment_launches())) end_segment(false);
  }

  void flush() {
    std::lock_guard lock(mutex_);
    end_segment(/*reset=*/holds_ == 0);
  }
  void hold(int delta) {
    std::lock_guard lock(mutex_);
    holds_ += delta;
  }

  void* stage(const void* host, size_t bytes) {
    std::lock_guard lock(mutex_);
    if (!enabled_ || bytes > kRegionBytes) return nullptr;
    if (seg_.staged + bytes > kRegionBytes) end_segment(false);
    if (device_ == nullptr) CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_), kRegions * kRegionBytes));
    seg_.region = index_ % kRegions;
    char* device_region = device_ + seg_.region * kRegionBytes;
    for (const auto& [off, n] : seg_.recent)
      if (n == bytes && std::memcmp(seg_.host.data() + off, host, bytes) == 0) return device_region + off;
    const size_t off = seg_.staged;
    seg_.staged = std::min(kRegionBytes, (off + bytes + kStageAlign - 1) / kStageAlign * kStageAlign);
    seg_.host.resize(seg_.staged);
    std::memcpy(seg_.host.data() + off, host, bytes);
    if (seg_.recent.size() < kRecentStages) seg_.recent.emplace_back(off, bytes);
    return device_region + off;
  }

 private:
  Recorder() : enabled_(env_switch("SPECSERVE_GRAPHS")) {}

  // Enqueues the current segment; the next one is the first of a new round when `reset`.
  void end_segment(bool reset) {
    if (!seg_.launches.empty() || seg_.staged > 0) {
      ++stats_.segments;
      try {
        enqueue(seg_);
      } catch (...) {  // a launch failed: drop the segment, report the error to the caller
        seg_.clear();
        index_ = 0;
        throw;
      }
      seg_.clear();
    }
    index_ = reset ? 0 : index_ + 1;
  }

  // The segment's staged bytes to its device region, through pinned memory, ahead of its launches.
  void copy_region(const Segment& s, cudaStream_t stream) {
    if (s.staged == 0) return;
    char* pinned = pinned_.take(s.staged, stream);
    std::memcpy(pinned, s.host.data(), s.staged);
    CUDA_CHECK(cudaMemcpyAsync(device_ + s.region * kRegionBytes, pinned, s.staged, cudaMemcpyHostToDevice, stream));
  }

  // Two kinds of graph. An exact graph is kept per signature and geometry for the shapes that recur (a
  // decode step's, a verify of a common row count): replayed with argument updates alone. A floating
  // graph, one per signature, takes every other geometry of that signature: its nodes' grids are set
  // before each replay (~2-4 us a node on the H100: a step of one sequence at a new row count every step
  // set ~17 nodes' grids, 70 us of a 400 us demo-pair forward), which is still far cheaper than a capture
  // or a segment run launch by launch.
  void enqueue(Segment& s) {
    cudaStream_t stream = launch_stream();
    copy_region(s, stream);
    if (s.launches.empty()) return;
    std::vector<uint64_t> sig = signature_of(s);
    const uint64_t hs = hash_of(sig);
    const uint64_t he = hash_of(geometry_of(s)) ^ (hs * 0x9e3779b97f4a7c15ull);
    if (seen_exact_.size() > kMaxSeen) seen_exact_.clear();
    if (seen_signature_.size() > kMaxSeen) seen_signature_.clear();
    if (try_replay(exact_, he, sig, /*exact=*/true, s, stream)) return;
    int& exact_sightings = seen_exact_[he];
    if (++exact_sightings >= kExactSightings && capture(exact_, he, sig, exact_sightings, s, stream)) return;
    if (try_replay(floating_, hs, sig, /*exact=*/false, s, stream)) return;
    int& sightings = seen_signature_[hs];
    if (++sightings >= 2 && capture(floating_, hs, sig, sightings, s, stream)) return;
    launch_directly(s, stream);
  }

  // Replays graphs[key] when it has the segment's signature (and, when `exact`, its geometry); a graph
  // that does not match (a hash collision) or whose update was refused is dropped.
  bool try_replay(Graphs& graphs, uint64_t key, const std::vector<uint64_t>& sig, bool exact, Segment& s,
                  cudaStream_t stream) {
    auto it = graphs.find(key);
    if (it == graphs.end()) return false;
    Graph& g = it->second;
    bool match = g.signature == sig;
    for (size_t i = 0; match && exact && i < s.launches.size(); ++i)
      match = same_geometry(g.geometry[i], s.launches[i].l);
    if (match && replay(g, s, stream)) return true;
    g.destroy();
    graphs.erase(it);
    return false;
  }

  void launch_directly(Segment& s, cudaStream_t stream) {
    ++stats_.direct_segments;
    for (size_t i = 0; i < s.launches.size(); ++i) {
      s.arg_pointers(i, ptrs_);
      CUDA_CHECK(launch_now(s.launches[i].l, stream, ptrs_.data()));
    }
  }

  // Updates the nodes whose arguments or geometry changed and launches the graph; false (nothing
  // launched) when an update is refused.
  bool replay(Graph& g, Segment& s, cudaStream_t stream) {
    const bool bytes_differ = g.bytes != s.bytes;
    for (size_t i = 0; i < s.launches.size(); ++i) {
      const KernelLaunch& l = s.launches[i].l;
      const bool moved = !same_geometry(g.geometry[i], l);
      bool changed = moved;
      if (!changed && bytes_differ) {
        const auto [first, n] = s.arg_range(i);
        changed = n != 0 && std::memcmp(g.bytes.data() + first, s.bytes.data() + first, n) != 0;
      }
      if (!changed) continue;
      s.arg_pointers(i, ptrs_);
      cudaKernelNodeParams p = {};
      p.func = const_cast<void*>(l.func);
      p.gridDim = l.grid;
      p.blockDim = l.block;
      p.sharedMemBytes = static_cast<unsigned>(l.smem);
      p.kernelParams = ptrs_.data();
      if (cudaGraphExecKernelNodeSetParams(g.exec, g.nodes[i], &p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
      }
      ++stats_.node_updates;
      if (debug_updates()) log_update(l, s, g, i, moved);
      if (moved) {
        ++stats_.geometry_updates;
        g.geometry[i] = l;
      }
    }
    if (bytes_differ) g.bytes = s.bytes;
    g.last_used = ++tick_;
    CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
    ++stats_.graph_launches;
    return true;
  }

  // Captures the segment's launches into a graph, keeps it and launches it; false (nothing launched)
  // when the capture fails.
  bool capture(Graphs& graphs, uint64_t key, const std::vector<uint64_t>& sig, int& sightings, Segment& s,
               cudaStream_t stream) {
    Graph g;
    g.signature = sig;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < s.launches.size() && ok; ++i) {
      s.arg_pointers(i, ptrs_);
      ok = launch_now(s.launches[i].l, stream, ptrs_.data()) == cudaSuccess;
      const cudaGraphNode_t* deps = nullptr;
      const cudaGraphEdgeData* edges = nullptr;
      size_t ndeps = 0;
      cudaStreamCaptureStatus status;
      ok = ok && cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, &edges, &ndeps) == cudaSuccess &&
           status == cudaStreamCaptureStatusActive && ndeps == 1;
      if (ok) g.nodes.push_back(deps[0]);
    }
    cudaGraph_t graph = nullptr;
    ok = cudaStreamEndCapture(stream, &graph) == cudaSuccess && ok;
    g.graph = graph;
    ok = ok && cudaGraphInstantiate(&g.exec, g.graph, 0) == cudaSuccess;
    if (!ok) {
      (void)cudaGetLastError();
      g.destroy();
      sightings = -1000000;  // do not try this shape again soon
      return false;
    }
    ++stats_.captures;
    g.bytes = s.bytes;
    for (const Recorded& r : s.launches) g.geometry.push_back(r.l);
    if (exact_.size() + floating_.size() >= kMaxGraphs) evict_oldest();
    Graph& kept = graphs[key] = std::move(g);
    kept.last_used = ++tick_;
    CUDA_CHECK(cudaGraphLaunch(kept.exec, stream));
    ++stats_.graph_launches;
    return true;
  }

  void evict_oldest() {
    Graphs* from = nullptr;
    Graphs::iterator oldest;
    for (Graphs* graphs : {&exact_, &floating_})
      for (auto it = graphs->begin(); it != graphs->end(); ++it)
        if (from == nullptr || it->second.last_used < oldest->second.last_used) {
          from = graphs;
          oldest = it;
        }
    if (from == nullptr) return;
    oldest->second.destroy();
    from->erase(oldest);
  }

  std::mutex mutex_;
  bool enabled_;
  Segment seg_;
  size_t index_ = 0;        // of the current segment since the last flush
  int holds_ = 0;           // Staging::Lock holders
  char* device_ = nullptr;  // kRegions staging regions
  PinnedRing pinned_;
  Graphs exact_;     // by signature and geometry
  Graphs floating_;  // by signature
  std::unordered_map<uint64_t, int> seen_exact_, seen_signature_;
  uint64_t tick_ = 0;
  std::vector<void*> ptrs_;
  GraphStats stats_;
};

std::atomic<uint64_t> g_stream_ops{0};

}  // namespace

void enqueue_launch(const KernelLaunch& l, cudaStream_t stream, void* const* args, const uint32_t* sizes, int nargs) {
  g_stream_ops.fetch_add(1, std::memory_order_relaxed);
  Recorder::global().record(l, stream, args, sizes, nargs);
}

void flush_launches() {
  g_stream_ops.fetch_add(1, std::memory_order_relaxed);
  Recorder::global().flush();
}

uint64_t stream_ops() { return g_stream_ops.load(std::memory_order_relaxed); }

void* stage_for_launch(const void* host, size_t bytes) { return Recorder::global().stage(host, bytes); }

void hold_stages(int delta) { Recorder::global().hold(delta); }

GraphStats graph_stats() { return Recorder::global().stats(); }

void set_graphs_enabled(bool on) { Recorder::global().set_enabled(on); }

bool graphs_enabled() { return Recorder::global().enabled(); }

}  // namespace specserve::cuda
