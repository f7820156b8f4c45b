#pragma once
// The one CUDA stream every op of cuda_ops() is enqueued on (created on first use, on device 0,
// blocking with respect to the legacy default stream). Ops are asynchronous: synchronise (or
// download through DeviceBuffer, which does) before reading results on the host.
#include <cuda_runtime_api.h>

namespace specserve::cuda {

cudaStream_t cuda_stream();
// Waits for everything enqueued on cuda_stream(); throws specserve::Error on a device fault.
void synchronize();

}  // namespace specserve::cuda
