#pragma once
// Position-keyed randomness (docs/DESIGN.md §1.3, docs/DFLASH.md §6.5).
//
// The uniform used to sample the token at absolute position p of a request is a pure function of
// (request seed, p, stream): Philox-4x32-10, a counter-based generator (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC'11). Because nothing is consumed sequentially, the
// number does not depend on how many decode steps or verify rows produced the position — which is
// what makes a seeded request produce the same text with and without a drafter.
#include <array>
#include <cstdint>

namespace specserve::sampling {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// The Philox-4x32 bijection with 10 rounds, as published with Random123 (tested against its
// known-answer vectors).
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// Independent uniform streams at one position. kSample is the one plain decoding uses (and hence
// the verifier's pick); the others serve the sampled-draft mode of speculative decoding, whose
// draft sample, acceptance test and residual sample must not reuse the pick's number.
enum class RandomStream : uint32_t {
  kSample = 0,    // the token pick at this position (decode, verify rows, bonus token)
  kDraft = 1,     // the drafter's own sample from q (sampled-draft mode)
  kAccept = 2,    // the min(1, p/q) acceptance test (sampled-draft mode)
  kResidual = 3,  // the sample from norm(max(p - q, 0)) after a rejection (sampled-draft mode)
};

// A uniform double in [0, 1) with 53 random bits. Key = seed (64 bits); counter = (position low,
// position high, stream, 0).
double position_uniform(uint64_t seed, uint64_t position, RandomStream stream);

// A fresh seed for a request that did not give one (reported back so the run can be replayed).
uint64_t random_seed();

}  // namespace specserve::sampling
