// Start-up sizing on the device: TargetModel::reserve allocates the KV pool and the DeltaNet state of
// the sequences to come at once, so serving them does not allocate their state again; a budget that
// cannot fit is a one-line Error naming the sizes.
#include "backend/cuda/cuda_memory.h"
#include "model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

TEST(CudaMemorySizing, ReservedPoolsServeTheSequencesWithoutNewAllocations) {
  SKIP_WITHOUT_GPU();
  auto m = load_on("qwen3_5_flat", "bf16", "cuda");
  const int sequences = 4;
  const int64_t blocks = 4 * 8;  // 128 positions per sequence
  const size_t before_reserve = cuda::memory_reserved_bytes();
  m->reserve(blocks, sequences);
  EXPECT_GE(cuda::memory_reserved_bytes() - before_reserve,
            sequences * m->sequence_state_bytes() + static_cast<size_t>(blocks) * m->kv_block_bytes());
  // Warm the activation workspaces once, then measure.
  {
    auto s = m->new_sequence();
    run_one(*m, *s, std::vector<int32_t>(100, 3), SpanMode::Prefill, LogitsWanted::Last);
    run_one(*m, *s, {4, 5, 6}, SpanMode::Extend);
    m->commit(*s, 3);
  }
  const size_t before = cuda::memory_reserved_bytes();
  std::vector<std::unique_ptr<SequenceState>> seqs;
  for (int i = 0; i < sequences; ++i) {
    seqs.push_back(m->new_sequence());
    run_one(*m, *seqs.back(), std::vector<int32_t>(100, 7 + i), SpanMode::Prefill, LogitsWanted::Last);
    run_one(*m, *seqs.back(), {4, 5, 6}, SpanMode::Extend);
    m->commit(*seqs.back(), 3);
  }
  // The states came from the reservation: what the allocator added since (activation size classes
  // shuffled between its free lists) is less than one sequence's state, where unreserved sequences
  // would add `sequences` of them.
  EXPECT_LT(cuda::memory_reserved_bytes() - before, m->sequence_state_bytes())
      << "serving the reserved sequences allocated their state again";
}

TEST(CudaMemorySizing, ABudgetThatCannotFitIsAClearError) {
  SKIP_WITHOUT_GPU();
  auto m = load_on("qwen3_tied", "bf16", "cuda");
  const int64_t absurd = int64_t{1} << 40;
  try {
    m->reserve(absurd, 1);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("KV cache"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace specserve
