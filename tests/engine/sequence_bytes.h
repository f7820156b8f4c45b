#pragma once
// What the swap tests (test_sequence_swap.cpp, and on a GPU model_cuda/engine/test_cuda_preemption.cpp)
// compare before and after SequenceState::swap_out / swap_in: the bytes of the state a sequence carries
// between steps, and the logits of one decode step.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/memory.h"
#include "model/kv_cache.h"
#include "model/layers.h"
#include "model/sequence_state.h"
#include "model/target_model.h"

namespace specserve::swap_testing {

// The KV blocks covering the sequence's positions, then each DeltaNet layer's state and conv window, read
// through the model's memory (a host copy from the device on a GPU).
inline std::vector<char> sequence_state_bytes(const TargetModel& model, SequenceState& s) {
  const Memory& mem = model.forward_memory();
  std::vector<char> out;
  auto add = [&](const void* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    mem.download(out.data() + at, p, n);
  };
  const auto& blocks = ModelInternals::blocks(s);
  const auto covering = static_cast<size_t>((s.length() + kKvBlockSize - 1) / kKvBlockSize);
  if (const auto pool = model.kv_pool()) {
    std::vector<void*> plane;
    for (int p = 0; p < pool->planes(); ++p) {  // each rank's plane under tensor parallelism
      pool->plane_blocks(p, std::span(blocks).first(covering), plane);
      for (void* b : plane) add(b, pool->plane_bytes());
    }
  }
  for (auto& l : ModelInternals::deltanets(s)) {
    add(l.state.data(), l.state.bytes());
    add(l.window.data(), l.window.bytes());
  }
  return out;
}

// One decode step of `token`, committed; its logits on the host.
inline std::vector<float> decode_logits(TargetModel& model, SequenceState& s, int32_t token) {
  std::vector<int32_t> in = {token};
  ForwardBatch b;
  b.spans = {{&s, in, SpanMode::Extend, LogitsWanted::Last}};
  ForwardResult r = model.forward(b);
  model.commit(s, 1);
  return std::vector<float>(r.logits.as<float>(), r.logits.as<float>() + r.logits.shape().numel());
}

}  // namespace specserve::swap_testing
