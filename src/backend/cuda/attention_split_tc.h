#pragma once
// What tests see of the tensor-core split kernel (attention_split_tc.cu), which Ops::attention takes for
// bf16 caches at head dims 128 and 256: how many calls it served.
#include <cstdint>

namespace specserve::cuda::kernels {

uint64_t attention_split_tc_calls();

}  // namespace specserve::cuda::kernels
