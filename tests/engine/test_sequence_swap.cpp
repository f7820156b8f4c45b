// A swapped-out sequence's state round-trips bit for bit (SequenceState::swap_out / swap_in): the KV
// blocks covering its positions and every DeltaNet layer's state and conv window come back into NEW
// blocks with the same bytes, and the sequence then computes exactly the logits of one that was never
// swapped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine_test_util.h"
#include "sequence_bytes.h"
#include "model/layers.h"

namespace specserve::test {
namespace {

using swap_testing::decode_logits;
using swap_testing::sequence_state_bytes;

class SequenceSwap : public ::testing::TestWithParam<std::string> {};

TEST_P(SequenceSwap, RoundTripsBitForBitIntoNewBlocks) {
  TinyModel m(GetParam());
  TargetModel& model = *m.model;
  const auto prompt = prompt_of(37, 5, m.tokenizer.id_limit());
  auto swapped = model.new_sequence();
  auto reference = model.new_sequence();
  for (SequenceState* s : {swapped.get(), reference.get()}) {
    ForwardBatch b;
    b.spans = {{s, prompt, SpanMode::Prefill, LogitsWanted::None}};
    model.forward(b);
    for (int32_t t : {3, 9, 27}) decode_logits(model, *s, t);
  }
  const std::vector<char> before = sequence_state_bytes(model, *swapped);
  const std::vector<void*> old_table = ModelInternals::blocks(*swapped);
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(swapped->swap_bytes(), swapped->swap_bytes(swapped->length()));
  EXPECT_GE(swapped->swap_bytes(), before.size());

  swapped->swap_out();
  EXPECT_TRUE(swapped->swapped_out());
  EXPECT_EQ(swapped->kv_blocks(), 0);
  // Another sequence takes the freed blocks, so the swapped one must come back into other blocks.
  auto squatter = model.new_sequence();
  {
    const auto other = prompt_of(static_cast<int>(old_table.size()) * kKvBlockSize, 6, m.tokenizer.id_limit());
    ForwardBatch b;
    b.spans = {{squatter.get(), other, SpanMode::Prefill, LogitsWanted::None}};
    model.forward(b);
  }
  swapped->swap_in();
  EXPECT_FALSE(swapped->swapped_out());
  const std::vector<void*>& new_table = ModelInternals::blocks(*swapped);
  ASSERT_EQ(static_cast<int64_t>(new_table.size()), (swapped->length() + kKvBlockSize - 1) / kKvBlockSize);
  for (void* b : new_table)
    EXPECT_EQ(std::find(old_table.begin(), old_table.end(), b), old_table.end()) << "a block was reused in place";
  EXPECT_EQ(sequence_state_bytes(model, *swapped), before);

  // It continues exactly where it stopped.
  for (int32_t t : {81, 4, 55, 12, 70}) {
    const auto a = decode_logits(model, *swapped, t);
    const auto b = decode_logits(model, *reference, t);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "after token " << t;
  }
}

TEST_P(SequenceSwap, RefusesAPendingExtendAndADoubleSwap) {
  TinyModel m(GetParam());
  auto s = m.model->new_sequence();
  const auto prompt = prompt_of(20, 8, m.tokenizer.id_limit());
  ForwardBatch b;
  b.spans = {{s.get(), prompt, SpanMode::Prefill, LogitsWanted::None}};
  m.model->forward(b);
  std::vector<int32_t> in = {5, 6};
  b.spans = {{s.get(), in, SpanMode::Extend, LogitsWanted::All}};
  m.model->forward(b);
  EXPECT_THROW(s->swap_out(), Error);  // rows await commit
  m.model->commit(*s, 1);
  s->swap_out();
  EXPECT_THROW(s->swap_out(), Error);
  s->swap_in();
  EXPECT_THROW(s->swap_in(), Error);
}

INSTANTIATE_TEST_SUITE_P(Families, SequenceSwap, ::testing::Values("qwen3", "qwen3_5"));

}  // namespace
}  // namespace specserve::test
