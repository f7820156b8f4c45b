#pragma once
// What tests see of the tensor-core split kernel (attention_split_tc.cu), which Ops::attention takes for
// bf16 caches at head dims 128 and 256: how many calls it served.
#include <cstdint>

namespace specserve::cuda::kernels {

uint64_t attention_split_tc_calls();
// How many of those calls took the walking form (one CTA per item and KV head walking every chunk).
uint64_t attention_split_walk_calls();

}  // namespace specserve::cuda::kernels

namespace specserve::cuda::attn {

// Which form of the split kernel serves a call: Auto by its shape, or always one of them (tests of both and
// the attention benchmark). Which form serves a row never changes its bits.
enum class SplitWalk { Auto, Never, Always };
void set_split_walk(SplitWalk w);

}  // namespace specserve::cuda::attn
