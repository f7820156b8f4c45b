// The lossless promise on the GPU (docs/DESIGN.md §1): the CPU row-invariance tests
// (tests/model/test_row_invariance.cpp) on the CUDA backend, bit for bit: extend rows equal
// successive decodes; a row alone equals the row inside a batch of 8 unrelated rows; prefill does not
// depend on its neighbours or on a split at 64-token boundaries, nor (with the prefill kernels) on
// three chunkings or on decode and verify rows beside it; rollback (commit of n < K rows)
// equals a run that only ever saw the kept rows.
#include <algorithm>
#include <cstring>

#include "backend/cuda/kernels.h"
#include "../model/row_invariance_checks.h"
#include "model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

class CudaRowInvariance : public ::testing::TestWithParam<CudaModelCase> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    model_ = load_on(GetParam().fixture, GetParam().dtype, "cuda", GetParam().kv_dtype);
  }
  int64_t V() const { return model_->vocab_size(); }
  std::unique_ptr<TargetModel> model_;
};

TEST_P(CudaRowInvariance, ExtendEqualsSuccessiveDecodes) {
  const uint64_t reused = cuda::kernels::matmul_xb_reused();
  expect_extend_equals_successive_decodes(*model_, [&] {
    // With bf16 weights the 9-row extend's matmuls read their inputs' bf16 copies from the producers
    // (kernels.h: XbOut), so the comparison covers those copies too.
    if (GetParam().dtype == "bf16") EXPECT_GT(cuda::kernels::matmul_xb_reused(), reused);
  });
}

TEST_P(CudaRowInvariance, RowAloneEqualsRowInBatchOfEight) { expect_row_alone_equals_row_in_batch_of_eight(*model_); }

// ForwardBatch::capture_on_device: the captured rows stay in the model's device memory (for a drafter
// beside it), bit for bit the rows a batch without the flag downloads, and nothing is downloaded.
TEST_P(CudaRowInvariance, CapturedRowsStayOnTheDeviceWhenAsked) {
  auto a = model_->new_sequence(), b = model_->new_sequence();
  const auto prompt = random_ids(37, 8, V());
  ForwardBatch host, device;
  host.capture_layers = device.capture_layers = {1, 0};
  host.spans = {{a.get(), prompt, SpanMode::Prefill, LogitsWanted::Last}};
  device.spans = {{b.get(), prompt, SpanMode::Prefill, LogitsWanted::Last}};
  device.capture_on_device = true;
  const auto on_host = model_->forward(host), on_device = model_->forward(device);
  ASSERT_NE(on_device.captured.shape().ndim, 2) << "nothing downloaded";
  ASSERT_EQ(on_device.captured_device.shape(), on_host.captured.shape());
  Tensor back = Tensor::empty(DType::F32, on_device.captured_device.shape());
  model_->forward_memory().download(back.as<void>(), on_device.captured_device.as<void>(), back.nbytes());
  EXPECT_EQ(std::memcmp(back.as<float>(), on_host.captured.as<float>(), back.nbytes()), 0);
  EXPECT_EQ(row(on_device.logits, 0), row(on_host.logits, 0));
}

TEST_P(CudaRowInvariance, PrefillIndependentOfNeighboursAndChunkSplits) {
  expect_prefill_independent_of_neighbours_and_chunk_splits(*model_);
}

// The prefill rule (docs/DESIGN.md §1.2) with the prefill kernels (the TMA/wgmma GEMM, the flash
// attention): one prompt prefilled whole, in three other chunkings (cuts at multiples of 64, the
// Gated DeltaNet's chunk), and beside other sequences' decode, verify and prefill rows (extend spans
// first as the engine orders them, and interleaved) gives every row's logits bit for bit; a decode row
// afterwards — which reads the KV cache and the DeltaNet state the prefill left — agrees too.
TEST_P(CudaRowInvariance, PrefillBitsIgnoreChunkingAndMixedNeighbours) {
  const auto prompt = random_ids(300, 31, V());
  auto alone = model_->new_sequence();
  const auto whole = run_one(*model_, *alone, prompt, SpanMode::Prefill, LogitsWanted::All);
  const auto after = run_one(*model_, *alone, {11}, SpanMode::Extend);

  const std::vector<std::vector<int64_t>> chunkings = {{64, 236}, {128, 128, 44}, {192, 64, 44}};
  for (const auto& cuts : chunkings) {
    auto s = model_->new_sequence();
    int64_t begin = 0;
    for (int64_t n : cuts) {
      const std::vector<int32_t> part(prompt.begin() + begin, prompt.begin() + begin + n);
      const auto r = run_one(*model_, *s, part, SpanMode::Prefill, LogitsWanted::All);
      for (int64_t p = 0; p < n; ++p) ASSERT_EQ(row(r.logits, p), row(whole.logits, begin + p)) << begin + p;
      begin += n;
    }
    EXPECT_EQ(row(run_one(*model_, *s, {11}, SpanMode::Extend).logits, 0), row(after.logits, 0));
  }

  for (bool interleaved : {false, true}) {
    auto decoding = model_->new_sequence(), verifying = model_->new_sequence(), other = model_->new_sequence();
    auto mixed = model_->new_sequence();
    run_one(*model_, *decoding, random_ids(70, 32, V()), SpanMode::Prefill, LogitsWanted::None);
    run_one(*model_, *verifying, random_ids(90, 33, V()), SpanMode::Prefill, LogitsWanted::None);
    const auto one = random_ids(1, 34, V()), five = random_ids(5, 35, V()), pre = random_ids(130, 36, V());
    ForwardBatch b;
    const SequenceSpan d{decoding.get(), one, SpanMode::Extend, LogitsWanted::All};
    const SequenceSpan v{verifying.get(), five, SpanMode::Extend, LogitsWanted::All};
    const SequenceSpan o{other.get(), pre, SpanMode::Prefill, LogitsWanted::Last};
    const SequenceSpan m{mixed.get(), prompt, SpanMode::Prefill, LogitsWanted::All};
    b.spans = interleaved ? std::vector<SequenceSpan>{o, d, m, v} : std::vector<SequenceSpan>{d, v, o, m};
    const auto r = model_->forward(b);
    const size_t mi = interleaved ? 2 : 3;
    const int64_t first = r.span_first_row[mi];
    auto it = std::find(r.logit_rows.begin(), r.logit_rows.end(), first);
    ASSERT_NE(it, r.logit_rows.end());
    const int64_t at = it - r.logit_rows.begin();
    for (int64_t p = 0; p < static_cast<int64_t>(prompt.size()); ++p)
      ASSERT_EQ(row(r.logits, at + p), row(whole.logits, p)) << "interleaved " << interleaved << " row " << p;
    model_->commit(*decoding, 1);
    model_->commit(*verifying, 5);
    EXPECT_EQ(row(run_one(*model_, *mixed, {11}, SpanMode::Extend).logits, 0), row(after.logits, 0));
  }
}

TEST_P(CudaRowInvariance, RollbackEqualsRunThatSawOnlyKeptRows) {
  expect_rollback_equals_run_that_saw_only_kept_rows(*model_);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaRowInvariance, cuda_model_cases(), cuda_model_case_name);

}  // namespace
}  // namespace specserve

namespace specserve {
namespace {
// On the device the argmax spans' rows never reach the host; the argmax still equals the argmax of
// the rows a full span returns (tests/model's check).
TEST(CudaForwardArgmax, ArgmaxSpansGetTheArgmaxOfTheirRows) {
  SKIP_WITHOUT_GPU();
  for (const auto& f : testing::all_fixtures()) {
    SCOPED_TRACE(f);
    auto m = testing::load_on(f, "auto", "cuda");
    testing::check_forward_argmax(*m);
  }
}
}  // namespace
}  // namespace specserve
