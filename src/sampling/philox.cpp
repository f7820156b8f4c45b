#include "sampling/philox.h"

#include <random>

namespace specserve::sampling {
namespace {

// Round multipliers and Weyl key increments from the Philox paper.
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t p0 = uint64_t{kM0} * c[0];
  const uint64_t p1 = uint64_t{kM1} * c[2];
  const auto hi = [](uint64_t p) { return static_cast<uint32_t>(p >> 32); };
  const auto lo = [](uint64_t p) { return static_cast<uint32_t>(p); };
  return {hi(p1) ^ c[1] ^ k[0], lo(p1), hi(p0) ^ c[3] ^ k[1], lo(p0)};
}

}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    counter = round(counter, key);
  }
  return counter;
}

double position_uniform(uint64_t seed, uint64_t position, RandomStream stream) {
  const PhiloxCounter ctr = {static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32),
                             static_cast<uint32_t>(stream), 0u};
  const PhiloxKey key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const PhiloxCounter out = philox4x32_10(ctr, key);
  // 53 bits → a double in [0, 1) on the 2^-53 grid; never 1.0, so an inverse-CDF search always
  // lands strictly inside the total mass.
  const uint64_t bits = (uint64_t{out[0]} << 32 | out[1]) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

uint64_t random_seed() {
  std::random_device rd;
  // 53 bits, so the reported seed survives a JSON round trip through clients that hold numbers
  // as doubles (JavaScript).
  return ((uint64_t{rd()} << 32) ^ rd()) & ((uint64_t{1} << 53) - 1);
}

}  // namespace specserve::sampling
