#pragma once
// The one CUDA stream every op of cuda_ops() is enqueued on (created on first use, on device 0,
// blocking with respect to the legacy default stream). Ops are asynchronous: synchronise (or
// download through DeviceBuffer, which does) before reading results on the host.
//
// Kernel launches are recorded and enqueued in segments (step_graphs.h). cuda_stream() enqueues every
// launch recorded so far before returning the stream, so whatever the caller does with it (a copy, an
// event, a synchronisation) comes after them; launchers take launch_stream() (step_graphs.h), which
// does not.
#include <cuda_runtime_api.h>

namespace specserve::cuda {

cudaStream_t cuda_stream();
// Waits for everything enqueued on cuda_stream(); throws specserve::Error on a device fault.
void synchronize();

}  // namespace specserve::cuda
