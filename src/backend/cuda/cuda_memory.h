#pragma once
// cuda_memory(): the Memory (backend/memory.h) of cuda_ops(): device memory from cudaMalloc (never
// managed memory), copies enqueued on cuda_stream() — one a device (device_scope.h).
//
// Allocation is a caching allocator over cudaMalloc, because the model allocates its activations per
// layer: blocks are binned into size classes of 1/8 octave (at most 12.5% slack) and a released block
// goes back to its class's free list, never to the driver. That is safe without any synchronisation
// because every op and copy runs on the one stream: work enqueued after the release that writes the
// reused block runs after the queued work that still reads it. Blocks of 256 MiB and more (whole
// weight sets, large KV slabs) are exact cudaMalloc / cudaFree (after the stream drains).
#include "backend/memory.h"

namespace specserve {

// The current device's memory (device_scope.h), and device `device`'s: each device has its own allocator,
// and a Memory's calls run with its device current, so a buffer goes back to the device it came from.
const Memory& cuda_memory();
const Memory& cuda_memory(int device);

namespace cuda {
// Bytes held by the current device's caching allocator (in use + cached), for logs and tests.
size_t memory_reserved_bytes();
}  // namespace cuda

}  // namespace specserve
