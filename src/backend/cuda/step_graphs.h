#pragma once
// Kernel launches recorded in segments and replayed as CUDA graphs (issue 10: graphs for the decode,
// verify and propose steps, per shape).
//
// Every kernel launch on launch_stream() goes through enqueue_launch(): the launch (function, grid,
// block, shared memory, cluster, PDL, and a copy of its argument bytes) is appended to the current
// segment, and the metadata an op stages (staging.h) goes into that segment's own staging region. A
// segment is enqueued when it is full (64 launches; the first one after a
// stream use other than a launch is shorter, so the GPU starts early) or when anything else touches
// the stream: cuda_stream() calls flush_launches(), so a copy, an event, a synchronisation or a
// download always comes after every launch recorded before it.
//
// Enqueueing a segment: its launches' functions, clusters, PDL and argument sizes are its signature, and
// their grids, blocks and dynamic shared memory its geometry. Geometry varies from step to step where the
// signature does not (a verify's rows are the sum of per-sequence draft lengths the policy picks every
// step; attention grids follow the longest context), so graphs come in two kinds. A signature's floating
// graph is captured (cudaStreamBeginCapture around the launches, so PDL becomes programmatic edges) the
// second time the signature is seen and runs any geometry of it: before a replay, every node whose
// argument bytes or geometry differ is updated (cudaGraphExecKernelNodeSetParams). A geometry seen
// kExactSightings times (step_graphs.cpp) gets an exact graph of its own, replayed with argument
// updates alone (a node's geometry update costs a few microseconds of host time, like a launch). A
// segment whose signature was seen once runs its launches directly. The segment's staging region is
// copied to the device just before the launch.
//
// So the bits never change: a graph runs exactly the recorded launches, with their current argument
// bytes, in stream order. Segment i after a flush always stages into device region i (copied there
// from a ring of pinned memory, stream-ordered after every kernel that read the region before), so a
// step that repeats another's shape usually replays with no update at all (a decode step's staged
// positions and block tables change in content, not in address). Small device copies
// (cuda_memory.cpp) are copy kernels while graphs are on, so they do not end a segment.
//
// SPECSERVE_GRAPHS=0 launches directly (no recording): an off-switch (core/env_registry.h).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace specserve::cuda {

struct KernelLaunch {
  const void* func = nullptr;
  dim3 grid, block;
  size_t smem = 0;
  unsigned cluster = 1;  // CTAs per cluster along x (1: no cluster attribute)
  bool pdl = false;      // programmatic stream serialisation (launch.cuh)
};

// The stream kernels are launched on: cuda_stream() without the flush.
cudaStream_t launch_stream();

// Launches `l` with args[i] pointing to the value of parameter i (sizes[i] bytes) on `stream`: recorded
// when it is launch_stream() and graphs are enabled, else launched now.
void enqueue_launch(const KernelLaunch& l, cudaStream_t stream, void* const* args, const uint32_t* sizes, int nargs);

// Enqueues every launch recorded so far (as graphs or directly).
void flush_launches();

// Stream operations so far on any stream: kernel launches (recorded or not) and cuda_stream() uses. Two
// equal readings on one thread mean nothing was enqueued between them (cuda_ops: a producer's XbOut is
// still what the next matmul's x holds).
uint64_t stream_ops();

// While recording: copies `bytes` of `host` into the current segment's staging region and returns its
// device address (16-byte aligned); nullptr when graphs are off or the bytes exceed a region (the
// caller then stages as before).
void* stage_for_launch(const void* host, size_t bytes);

// Staging::Lock holds staged bytes while its op records the launches that read them (+1 when taken,
// -1 when released): a flush meanwhile does not restart the segments' region numbering, so no later
// segment of the op's launches can reuse the region those bytes are in.
void hold_stages(int delta);

struct GraphStats {
  uint64_t segments = 0;          // segments enqueued
  uint64_t direct_segments = 0;   // ... by launching their kernels one by one
  uint64_t graph_launches = 0;    // ... by launching a graph
  uint64_t captures = 0;          // graphs captured and instantiated
  uint64_t node_updates = 0;      // kernel nodes whose parameters were updated before a replay
  uint64_t geometry_updates = 0;  // ... of which their grid, block or shared memory
  uint64_t launches = 0;          // kernel launches recorded
};
GraphStats graph_stats();

// On by default (SPECSERVE_GRAPHS, read once); tests switch it to compare both paths. Flushes first. The
// recorder, its staging and its graphs are the current device's (device_scope.h), and so is this switch.
void set_graphs_enabled(bool on);
bool graphs_enabled();

}  // namespace specserve::cuda
