#pragma once
// The CUDA stream every op of cuda_ops() is enqueued on: the current device's (device_scope.h; created on
// the device's first use, blocking with respect to the legacy default stream). Ops are asynchronous: synchronise (or
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
