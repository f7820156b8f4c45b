#pragma once
// --draft-vocab: the ids the DFlash drafter scores (DFlashDrafter::set_vocabulary).
//   "all" (or ""): every id, the default;
//   N: the N lowest ids. Byte-level BPE vocabularies number their tokens in merge order, and a merge
//      is learnt the earlier the more frequent its pair, so low ids are the frequent tokens;
//   a file: the ids it lists (io/id_list.h), e.g. the most frequent ids of one's own traffic.
// `always` joins either way (the tokenizer's added tokens and the EOS ids: a draft must be able to end
// a reply or a turn), ids at or above `vocab` are dropped from it, and the result is ascending and
// unique. A list id at or above `vocab` fails, as does N < 1. The drafter then drafts only these ids;
// the target verifies every draft, so the output never changes, only how many drafts are accepted.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "tokenizer/tokenizer.h"

namespace specserve::spec {

// Empty means the whole vocabulary.
std::vector<int32_t> draft_vocabulary(const std::string& arg, std::span<const int32_t> always, int64_t vocab);

// The ids every subset keeps: the tokenizer's added tokens (none without a tokenizer, as for
// --prompt-ids runs of a checkpoint without one) and the config's EOS ids.
std::vector<int32_t> always_drafted(const tokenizer::Tokenizer* tok, const ModelConfig& config);

inline constexpr const char* kDraftVocabHelp =
    "Ids the drafter scores: all (default), N (the N lowest ids: BPE's most frequent merges, plus the added "
    "tokens and EOS), or a file of ids; fewer ids make a propose cheaper, outputs never change";

}  // namespace specserve::spec
