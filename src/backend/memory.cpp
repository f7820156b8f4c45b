// cpu_memory(): host blocks with the same allocation as Tensor (64-byte aligned, uninitialised).
#include "backend/memory.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <set>

#include "core/aligned_buffer.h"
#include "backend/synthetic_fill.h"
#include "core/error.h"

namespace specserve {

namespace {

class CpuMemory final : public Memory {
 public:
  Device device() const override { return Device::CPU; }
  void* allocate(size_t bytes) const override {
    const size_t rounded = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    void* p = std::aligned_alloc(kBufferAlignment, rounded);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p, size_t) const noexcept override { std::free(p); }
  void fill_uniform(void* dst, DType dtype, size_t n, uint64_t seed, float lo, float hi) const override {
    SS_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F8_E4M3,
             "fill_uniform: f32, bf16 or f8_e4m3 only");
    for (size_t i = 0; i < n; ++i) {
      const float v = synthetic::uniform_at(seed, i, lo, hi);
      if (dtype == DType::F32)
        static_cast<float*>(dst)[i] = v;
      else if (dtype == DType::BF16)
        static_cast<uint16_t*>(dst)[i] = synthetic::to_bf16_bits(v);
      else
        static_cast<uint8_t*>(dst)[i] = synthetic::to_e4m3_bits(v);
    }
  }
  size_t available_bytes() const override {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
  }
  void upload(void* dst, const void* host, size_t bytes) const override {
    if (bytes) std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) const override {
    if (bytes) std::memcpy(host, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) const override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) const override {
    for (size_t r = 0; r < height; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  }
  void zero(void* dst, size_t bytes) const override {
    if (bytes) std::memset(dst, 0, bytes);
  }
};

}  // namespace

// Never destroyed, so buffers released during static destruction still find it.
const Memory& cpu_memory() {
  static const CpuMemory* m = new CpuMemory();
  return *m;
}

const Memory& cpu_rank_memory(int rank) {
  constexpr int kRanks = 64;
  SS_CHECK(rank >= 0 && rank < kRanks, "host rank memory {}: at most {} ranks", rank, kRanks);
  if (rank == 0) return cpu_memory();
  static const std::array<const CpuMemory*, kRanks> ranks = [] {
    std::array<const CpuMemory*, kRanks> a{};
    for (auto& m : a) m = new CpuMemory();
    return a;
  }();
  return *ranks[static_cast<size_t>(rank)];
}

void* Memory::allocate_host(size_t bytes) const {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  void* p = std::aligned_alloc(kBufferAlignment, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

void Memory::release_host(void* p, size_t) const noexcept { std::free(p); }

void Memory::download_many(std::span<const CopyRegion> regions) const {
  for (const auto& r : regions) download(r.dst, r.src, r.bytes);
}

void Memory::upload_many(std::span<const CopyRegion> regions) const {
  for (const auto& r : regions) upload(r.dst, r.src, r.bytes);
}

void require_room(const Memory& mem, size_t bytes, const std::string& what, const std::string& hint) {
  if (mem.device() == Device::CPU) return;
  const size_t free = mem.available_bytes();
  SS_CHECK(bytes <= free, "{} needs {:.2f} GiB of device memory but only {:.2f} GiB are free{}", what, gib(bytes),
           gib(free), hint);
}

Buffer upload_tensors(std::span<TensorView* const> views, const Memory& mem) {
  constexpr size_t kAlign = 256;
  std::map<const void*, size_t> offset;
  size_t total = 0;
  const bool device = mem.device() != Device::CPU;
  auto skip = [&](const TensorView* v) { return v->data == nullptr || (device && v->device == mem.device()); };
  for (const TensorView* v : views) {
    if (skip(v) || offset.count(v->data)) continue;
    SS_CHECK(v->is_contiguous() && v->device == Device::CPU, "upload: tensor {} is not a contiguous host tensor",
             v->describe());
    offset[v->data] = total;
    total += (v->nbytes() + kAlign - 1) / kAlign * kAlign;
    if (v->block_scaled()) {  // a block-scaled fp8 matrix's scales travel with it
      offset[v->scales] = total;
      total += (v->scale_bytes() + kAlign - 1) / kAlign * kAlign;
    }
  }
  require_room(mem, total, "the model's weights");
  Buffer block(mem, total);
  std::set<const void*> done;
  for (TensorView* v : views) {
    if (skip(v)) continue;
    const void* host = v->data;
    char* dst = static_cast<char*>(block.data()) + offset.at(host);
    const bool first = done.insert(host).second;
    if (first) mem.upload(dst, host, v->nbytes());
    v->data = dst;
    v->device = mem.device();
    if (v->block_scaled()) {
      char* sdst = static_cast<char*>(block.data()) + offset.at(v->scales);
      if (done.insert(v->scales).second) mem.upload(sdst, v->scales, v->scale_bytes());
      v->scales = reinterpret_cast<const float*>(sdst);
      if (first) mem.arrange_fp8_codes(*v);  // once per matrix, in the device's order
    }
  }
  return block;
}

}  // namespace specserve
