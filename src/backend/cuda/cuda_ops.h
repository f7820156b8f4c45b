#pragma once
// cuda_ops(): the Ops interface (backend/ops.h) on the current CUDA device (backend/cuda/device_scope.h: its
// stream, recorder, staging and scratch; device 0 unless a DeviceScope says otherwise).
//
// Every TensorView passed in must point to device memory and say so (device == Device::CUDA); raw
// pointers inside the op arguments are device pointers too: the KV blocks an AttentionRow's table
// points to and GdnSpan::state / state_in. The tables themselves (AttentionRow::blocks, the row and
// span lists, token ids, positions) stay host arrays, as in the interface: each op copies what its
// kernel needs to a device staging buffer before launching (backend/cuda/staging.h).
//
// Ops are enqueued on cuda_stream() (backend/cuda/cuda_stream.h) and return before the GPU is done;
// errors are checked at each call (asynchronous faults surface at the next synchronising call).
// Row invariance holds as on the CPU; each kernel file documents its reduction order. Limits beyond
// the CPU's: attention needs head_dim a multiple of 32 up to 256; the gated delta rule needs dk a
// multiple of 16 up to 512; causal_conv_silu's out must not alias x.
#include "backend/ops.h"

namespace specserve {

const Ops& cuda_ops();

}  // namespace specserve
