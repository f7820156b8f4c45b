#pragma once
// SplitMix64 (Steele, Lea and Flood, 2014): a 64-bit mixing function whose outputs of consecutive inputs pass
// the usual statistical tests. The host's seeded streams (load generator, controlled drafts) key their numbers
// with it; it is not a cryptographic hash.
#include <cstdint>

namespace specserve {

constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace specserve
