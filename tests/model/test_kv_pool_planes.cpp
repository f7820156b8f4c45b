// The KV block pool's planes (model/kv_cache.h): under tensor parallelism a block is one geometry block in each
// rank's plane at the same offset of the planes' slabs. allocate() names a block by plane 0's address and
// plane_block finds every other plane's; blocks of different planes never overlap; the budget counts every
// plane; one plane is the unsharded pool, unchanged.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "core/error.h"
#include "model/kv_cache.h"

namespace specserve {
namespace {

const KvGeometry kGeo{2, 2, 8, DType::F32};  // 2 layers × 2 heads × 8 dims: 4 KiB a plane block

TEST(KvPoolPlanes, OnePlaneIsThePool) {
  KvBlockPool pool(kGeo);
  EXPECT_EQ(pool.planes(), 1);
  EXPECT_EQ(pool.block_bytes(), pool.plane_bytes());
  EXPECT_EQ(pool.plane_bytes(), static_cast<size_t>(kGeo.block_bytes()));
  void* b = pool.allocate();
  EXPECT_EQ(pool.plane_block(0, b), b);
  pool.release(b);
}

TEST(KvPoolPlanes, EveryPlaneHasItsOwnBlockAtTheSameOffset) {
  const Memory& host = cpu_memory();
  KvBlockPool pool(kGeo, {&host, &host, &host});
  ASSERT_EQ(pool.planes(), 3);
  EXPECT_EQ(pool.block_bytes(), 3 * pool.plane_bytes());
  pool.reserve(10);  // one slab of 10
  std::vector<void*> blocks;
  for (int i = 0; i < 200; ++i) blocks.push_back(pool.allocate());  // and slabs grown on demand
  EXPECT_EQ(pool.blocks_in_use(), 200);
  const size_t bytes = pool.plane_bytes();
  // Each plane's block of each block: distinct, non-overlapping ranges; a plane's bytes are its own.
  std::set<char*> starts;
  for (void* b : blocks)
    for (int p = 0; p < 3; ++p) {
      char* at = static_cast<char*>(pool.plane_block(p, b));
      EXPECT_TRUE(starts.insert(at).second);
      std::memset(at, p + 1 + static_cast<int>(reinterpret_cast<uintptr_t>(b) % 7) * 3, bytes);
    }
  std::vector<char*> sorted(starts.begin(), starts.end());
  for (size_t i = 1; i < sorted.size(); ++i) EXPECT_GE(sorted[i] - sorted[i - 1], static_cast<ptrdiff_t>(bytes));
  for (void* b : blocks)
    for (int p = 0; p < 3; ++p) {
      const auto* at = static_cast<const unsigned char*>(pool.plane_block(p, b));
      const auto want = static_cast<unsigned char>(p + 1 + static_cast<int>(reinterpret_cast<uintptr_t>(b) % 7) * 3);
      EXPECT_EQ(at[0], want);
      EXPECT_EQ(at[bytes - 1], want);
    }
  // plane_blocks maps a table at once, as plane_block does one block.
  std::vector<void*> mapped;
  pool.plane_blocks(2, blocks, mapped);
  ASSERT_EQ(mapped.size(), blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) EXPECT_EQ(mapped[i], pool.plane_block(2, blocks[i]));
  // A released block comes back with the same planes.
  void* first = blocks.front();
  void* first1 = pool.plane_block(1, first);
  pool.release(first);
  void* again = pool.allocate();
  EXPECT_EQ(again, first);
  EXPECT_EQ(pool.plane_block(1, again), first1);
  for (void* b : blocks) pool.release(b);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(KvPoolPlanes, RefusesWhatIsNotABlockOrAPlane) {
  const Memory& host = cpu_memory();
  KvBlockPool pool(kGeo, {&host, &host});
  void* b = pool.allocate();
  EXPECT_THROW(pool.plane_block(2, b), Error);
  EXPECT_THROW(pool.plane_block(-1, b), Error);
  char outside = 0;
  EXPECT_THROW(pool.plane_block(1, &outside), Error);
  EXPECT_THROW(KvBlockPool(kGeo, std::vector<const Memory*>{}), Error);
  pool.release(b);
}

}  // namespace
}  // namespace specserve
