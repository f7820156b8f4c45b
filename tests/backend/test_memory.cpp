// Memory::copy_many on the host: every region lands as its own copy would, empty regions are skipped.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "backend/memory.h"

namespace specserve {
namespace {

TEST(Memory, CopyManyCopiesEveryRegion) {
  const Memory& mem = cpu_memory();
  std::vector<unsigned char> src(1000), dst(1000, 0), want(1000, 0);
  std::iota(src.begin(), src.end(), static_cast<unsigned char>(1));
  const std::vector<CopyRegion> regions{{dst.data(), src.data() + 100, 64},
                                        {dst.data() + 500, src.data(), 13},
                                        {dst.data() + 700, src.data() + 3, 0},
                                        {dst.data() + 801, src.data() + 7, 199}};
  mem.copy_many(regions);
  for (const auto& r : regions)
    std::copy_n(static_cast<const unsigned char*>(r.src), r.bytes,
                want.begin() + (static_cast<unsigned char*>(r.dst) - dst.data()));
  EXPECT_EQ(dst, want);
  mem.copy_many({});  // nothing to do
}

}  // namespace
}  // namespace specserve
