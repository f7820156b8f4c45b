#pragma once
// The ids a row may still produce. Until a truncation stage removes something the set is implicit
// — every id whose logit is finite — so a full-vocabulary row is processed with dense, vectorised
// loops; after that it is an explicit ascending list, so later stages cost O(kept), not O(V).
#include <span>
#include <vector>

#include "sampling/types.h"

namespace specserve::sampling {

struct Candidates {
  bool all = true;           // every id with a finite logit (padded and masked ids are −inf)
  std::vector<TokenId> ids;  // when !all: the allowed ids, ascending

  static Candidates of(std::vector<TokenId> list) { return {false, std::move(list)}; }
  void reset() {
    all = true;
    ids.clear();
  }

  // Calls f(id) for every candidate, in ascending id order.
  template <typename F>
  void for_each(std::span<const float> logits, F&& f) const {
    if (all) {
      for (size_t i = 0; i < logits.size(); ++i) {
        if (logits[i] != -__builtin_inff()) f(static_cast<TokenId>(i));
      }
    } else {
      for (TokenId id : ids) f(id);
    }
  }
};

}  // namespace specserve::sampling
