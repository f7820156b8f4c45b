// The recorded segment of step_graphs (launch_segment.h), on the host: arguments are copied at 8-byte
// aligned offsets and read back intact, each launch's argument range covers exactly its arguments, and
// the signature (the key of a segment's graph) changes with a launch's function, cluster, PDL and
// argument layout but not with argument values or geometry (grid, block, shared memory: a replay sets
// them on the node like the arguments). No GPU needed (it runs with the CPU tests, backend_cuda.host_emulation).
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cuda/launch_segment.h"

namespace specserve::cuda::graphs {
namespace {

int kernel_a, kernel_b;  // stand-ins for two kernels' addresses

KernelLaunch launch_of(const void* func, unsigned grid = 4) {
  KernelLaunch l;
  l.func = func;
  l.grid = dim3(grid, 2, 1);
  l.block = dim3(128);
  l.smem = 1024;
  l.cluster = 1;
  l.pdl = true;
  return l;
}

// A segment of two launches: (char, double, int) and (pointer, 24-byte struct).
struct Args24 {
  int64_t a, b, c;
};
Segment two_launches(char c, double d, int i, const void* p, Args24 s, unsigned grid = 4) {
  Segment seg;
  {
    void* args[] = {&c, &d, &i};
    const uint32_t sizes[] = {sizeof(c), sizeof(d), sizeof(i)};
    seg.add(launch_of(&kernel_a, grid), args, sizes, 3);
  }
  {
    void* args[] = {&p, &s};
    const uint32_t sizes[] = {sizeof(p), sizeof(s)};
    seg.add(launch_of(&kernel_b), args, sizes, 2);
  }
  return seg;
}

TEST(LaunchSegment, ArgumentsAreCopiedAlignedAndReadBack) {
  int target = 0;
  Segment seg = two_launches('x', 2.5, -7, &target, {1, 2, 3});
  ASSERT_EQ(seg.launches.size(), 2u);
  for (uint32_t off : seg.arg_offset) EXPECT_EQ(off % 8, 0u);
  std::vector<void*> p;
  seg.arg_pointers(0, p);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(*static_cast<char*>(p[0]), 'x');
  EXPECT_EQ(*static_cast<double*>(p[1]), 2.5);
  EXPECT_EQ(*static_cast<int*>(p[2]), -7);
  seg.arg_pointers(1, p);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(*static_cast<const void**>(p[0]), &target);
  Args24 s;
  std::memcpy(&s, p[1], sizeof(s));
  EXPECT_EQ(s.c, 3);
  // Launch i's range covers its arguments and nothing of the other launch's.
  const auto [first0, n0] = seg.arg_range(0);
  const auto [first1, n1] = seg.arg_range(1);
  EXPECT_EQ(first0, 0u);
  EXPECT_LE(first0 + n0, first1);
  EXPECT_EQ(first1 + n1, seg.bytes.size());
  seg.clear();
  EXPECT_TRUE(seg.launches.empty() && seg.bytes.empty() && seg.arg_offset.empty() && seg.staged == 0);
}

TEST(LaunchSegment, SignatureIsTheShapeNotTheValues) {
  int t1 = 0, t2 = 0;
  const auto base = signature_of(two_launches('x', 2.5, -7, &t1, {1, 2, 3}));
  // Other argument values (a new position, a moved buffer): the same graph, its nodes updated.
  EXPECT_EQ(signature_of(two_launches('y', -1.0, 9, &t2, {4, 5, 6})), base);
  EXPECT_EQ(hash_of(signature_of(two_launches('y', -1.0, 9, &t2, {4, 5, 6}))), hash_of(base));
  // Another grid (a step of more rows): the same graph, the node's geometry updated.
  EXPECT_EQ(signature_of(two_launches('x', 2.5, -7, &t1, {1, 2, 3}, 5)), base);
  // What a replay cannot change, and what it can.
  auto changed = [&](auto edit) {
    Segment seg = two_launches('x', 2.5, -7, &t1, {1, 2, 3});
    edit(seg.launches[1].l);
    return signature_of(seg) != base;
  };
  EXPECT_TRUE(changed([](KernelLaunch& l) { l.func = &kernel_a; }));
  EXPECT_TRUE(changed([](KernelLaunch& l) { l.cluster = 2; }));
  EXPECT_TRUE(changed([](KernelLaunch& l) { l.pdl = false; }));
  EXPECT_FALSE(changed([](KernelLaunch& l) { l.block = dim3(256); }));
  EXPECT_FALSE(changed([](KernelLaunch& l) { l.grid.z = 2; }));
  EXPECT_FALSE(changed([](KernelLaunch& l) { l.smem = 2048; }));
  // One more launch (and so another argument layout).
  {
    Segment seg = two_launches('x', 2.5, -7, &t1, {1, 2, 3});
    int extra = 1;
    void* args[] = {&extra};
    const uint32_t sizes[] = {sizeof(extra)};
    seg.add(launch_of(&kernel_a), args, sizes, 1);
    EXPECT_NE(signature_of(seg), base);
  }
  // The same launches in another order.
  Segment swapped;
  {
    const void* p = &t1;
    Args24 s{1, 2, 3};
    void* args[] = {&p, &s};
    const uint32_t sizes[] = {sizeof(p), sizeof(s)};
    swapped.add(launch_of(&kernel_b), args, sizes, 2);
    char c = 'x';
    double d = 2.5;
    int i = -7;
    void* args2[] = {&c, &d, &i};
    const uint32_t sizes2[] = {sizeof(c), sizeof(d), sizeof(i)};
    swapped.add(launch_of(&kernel_a), args2, sizes2, 3);
  }
  EXPECT_NE(signature_of(swapped), base);
}

TEST(LaunchSegment, GeometryComparesGridBlockAndSharedMemory) {
  const KernelLaunch a = launch_of(&kernel_a);
  EXPECT_TRUE(same_geometry(a, a));
  KernelLaunch b = a;
  b.func = &kernel_b;  // not geometry
  b.pdl = false;
  EXPECT_TRUE(same_geometry(a, b));
  for (int part = 0; part < 7; ++part) {
    KernelLaunch c = a;
    switch (part) {
      case 0: c.grid.x += 1; break;
      case 1: c.grid.y += 1; break;
      case 2: c.grid.z += 1; break;
      case 3: c.block.x += 32; break;
      case 4: c.block.y += 1; break;
      case 5: c.block.z += 1; break;
      default: c.smem += 16; break;
    }
    EXPECT_FALSE(same_geometry(a, c)) << "part " << part;
  }
}

}  // namespace
}  // namespace specserve::cuda::graphs
