// Sharding before the upload (docs/DESIGN.md §6.5), on the CPU with stand-in device memories: a loaded model's
// layers stay on the host, only its embedding, lm_head and final norm go whole to the first device, and each
// rank's slices go from the host to its own device — the bytes the CPU simulation's rank reads (kept fp8 codes
// put in the device's order once), no full layer matrix on any device, and no host copy left behind.
#include <cstring>
#include <map>

#include "model/layers.h"
#include "model/synthetic_tensors.h"
#include "model/tensor_parallel_plan.h"
#include "model/tensor_parallel_shards.h"
#include "model/weights.h"
#include "tensor_parallel_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

// What the stand-in device's arrange_fp8_codes does to every code byte: a change the test can undo.
constexpr uint8_t kArrangeFlip = 0x5a;

// Host bytes that say they are a GPU's: its blocks are tracked, and "arranging" kept fp8 codes flips their bits.
class StandInDevice final : public Memory {
 public:
  explicit StandInDevice(int index) : index_(index) {}
  Device device() const override { return Device::CUDA; }
  int device_index() const override { return index_; }
  void* allocate(size_t bytes) const override {
    void* p = cpu_memory().allocate(bytes);
    blocks_[static_cast<const char*>(p)] = bytes;
    return p;
  }
  void release(void* p, size_t bytes) const noexcept override {
    blocks_.erase(static_cast<const char*>(p));
    cpu_memory().release(p, bytes);
  }
  void upload(void* dst, const void* host, size_t bytes) const override { std::memcpy(dst, host, bytes); }
  void download(void* host, const void* src, size_t bytes) const override { std::memcpy(host, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) const override { std::memcpy(dst, src, bytes); }
  void copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) const override {
    cpu_memory().copy_2d(dst, dpitch, src, spitch, width, height);
  }
  void zero(void* dst, size_t bytes) const override { std::memset(dst, 0, bytes); }
  size_t available_bytes() const override { return size_t{1} << 40; }
  void fill_uniform(void*, DType, size_t, uint64_t, float, float) const override {
    fail("the stand-in device makes no synthetic weights");
  }
  void arrange_fp8_codes(const TensorView& codes) const override {
    ++arranged_[codes.data];
    auto* bytes = static_cast<uint8_t*>(codes.data);
    for (int64_t i = 0; i < codes.dim(0); ++i)
      for (int64_t j = 0; j < codes.dim(1); ++j) bytes[i * codes.strides[0] + j] ^= kArrangeFlip;
  }

  // Whether [p, p + bytes) lies in one of its live blocks.
  bool holds(const void* p, size_t bytes) const {
    const auto* c = static_cast<const char*>(p);
    auto it = blocks_.upper_bound(c);
    if (it == blocks_.begin()) return false;
    --it;
    return c + bytes <= it->first + it->second;
  }
  size_t held_bytes() const {
    size_t total = 0;
    for (const auto& [p, bytes] : blocks_) total += bytes;
    return total;
  }
  int times_arranged(const void* codes) const {
    auto it = arranged_.find(codes);
    return it == arranged_.end() ? 0 : it->second;
  }
  size_t matrices_arranged() const { return arranged_.size(); }

 private:
  int index_;
  mutable std::map<const char*, size_t> blocks_;
  mutable std::map<const void*, int> arranged_;
};

// A synthetic model's weights made on the host, as a checkpoint's are read there before any upload.
struct HostModel {
  ModelConfig cfg;
  std::unique_ptr<WeightStore> weights;
  ModelParts parts;
  KvGeometry kv;
  int deltanet_layers = 0;
};

HostModel host_model(const ModelConfig& cfg) {
  HostModel m;
  m.cfg = cfg;
  const bool hybrid = cfg.family == ModelFamily::Qwen3_5;
  m.weights = std::make_unique<WeightStore>(std::make_shared<SyntheticTensors>(cpu_memory(), 3, hybrid), DType::BF16);
  if (cfg.fp8_block128) m.weights->set_keep_fp8(true);
  m.parts = hybrid ? build_qwen3_5(cfg, *m.weights) : build_qwen3(cfg, *m.weights);
  int attention = 0;
  for (const DecoderLayer& l : m.parts.layers) (l.type == LayerType::LinearAttention ? m.deltanet_layers : attention)++;
  m.kv = KvGeometry{attention, m.parts.spec.num_kv_heads, m.parts.spec.head_dim, DType::BF16};
  return m;
}

// Row i of a 2-D (or 1-D: one row) view, `width` bytes.
const uint8_t* row_of(const TensorView& v, int64_t i) {
  const int64_t stride = v.ndim() == 1 ? 0 : v.strides[0];
  return static_cast<const uint8_t*>(v.data) + i * stride * static_cast<int64_t>(dtype_size(v.dtype));
}

// The device rank's view holds the host rank's bytes (codes of a kept fp8 matrix as arranged), in `device`.
void expect_same_tensor(const TensorView& dev, const TensorView& host, const StandInDevice& device,
                        const std::string& what) {
  ASSERT_EQ(dev.data == nullptr, host.data == nullptr) << what;
  if (dev.data == nullptr) return;
  ASSERT_EQ(dev.shape, host.shape) << what;
  ASSERT_EQ(dev.dtype, host.dtype) << what;
  EXPECT_EQ(dev.device, Device::CUDA) << what;
  EXPECT_TRUE(dev.is_contiguous()) << what;
  EXPECT_TRUE(device.holds(dev.data, dev.nbytes())) << what << " is not in its rank's device memory";
  const int64_t rows = dev.ndim() == 1 ? 1 : dev.dim(0);
  const size_t width = static_cast<size_t>(dev.numel() / rows) * dtype_size(dev.dtype);
  const uint8_t flip = dev.block_scaled() ? kArrangeFlip : 0;
  for (int64_t i = 0; i < rows; ++i) {
    const uint8_t *d = row_of(dev, i), *h = row_of(host, i);
    for (size_t j = 0; j < width; ++j)
      if ((d[j] ^ flip) != h[j]) {
        ADD_FAILURE() << what << ": byte " << j << " of row " << i << " differs";
        return;
      }
  }
  ASSERT_EQ(dev.block_scaled(), host.block_scaled()) << what;
  if (dev.block_scaled()) {
    EXPECT_TRUE(device.holds(dev.scales, dev.scale_bytes())) << what << "'s scales";
    EXPECT_EQ(std::memcmp(dev.scales, host.scales, dev.scale_bytes()), 0) << what << "'s scales";
    EXPECT_EQ(device.times_arranged(dev.data), 1) << what << "'s codes arranged once";
  }
}

size_t layer_bytes(ModelParts parts) {
  parts.embed = parts.lm_head = parts.final_norm = TensorView();
  std::map<const void*, size_t> seen;
  for (const TensorView* v : weight_views(parts))
    if (v->data) seen[v->data] = v->nbytes() + v->scale_bytes();
  size_t total = 0;
  for (const auto& [p, bytes] : seen) total += bytes;
  return total;
}

void check_two_device_ranks(const ModelConfig& cfg, const std::string& what) {
  SCOPED_TRACE(what);
  HostModel m = host_model(cfg);
  const ModelParts on_host = m.parts;  // views: the CPU simulation's source
  const StandInDevice gpu0(0), gpu1(1);
  std::array<TensorView*, 3> whole{&m.parts.embed, &m.parts.lm_head, &m.parts.final_norm};
  const Buffer model_weights = upload_tensors(whole, gpu0);
  const size_t whole_bytes = gpu0.held_bytes();
  const TensorParallelPlan plan = plan_tensor_parallel(cfg, 2);
  std::vector<RankModel> ranks;
  for (int r = 0; r < 2; ++r) {
    const StandInDevice& device = r == 0 ? gpu0 : gpu1;
    RankModel dev = shard_rank(m.parts, plan, r, m.deltanet_layers, m.kv, cpu_ops(), gpu0, device);
    RankModel host = shard_rank(on_host, plan, r, m.deltanet_layers, m.kv, cpu_ops(), cpu_memory(), cpu_rank_memory(r));
    EXPECT_TRUE(dev.copies.empty()) << "rank " << r << " left slice copies on the host";
    EXPECT_EQ(dev.weight_bytes(), host.weight_bytes()) << "rank " << r;
    const std::vector<TensorView*> d = weight_views(dev.parts), h = weight_views(host.parts);
    ASSERT_EQ(d.size(), h.size());
    for (size_t i = 0; i < d.size(); ++i)
      expect_same_tensor(*d[i], *h[i], device, "rank " + std::to_string(r) + " view " + std::to_string(i));
    ranks.push_back(std::move(dev));
  }
  // Rank 0 reads its vocabulary rows in the model's whole embedding and lm_head; rank 1 has its own copy.
  EXPECT_EQ(ranks[0].parts.embed.data, m.parts.embed.data);
  EXPECT_EQ(ranks[0].parts.final_norm.data, m.parts.final_norm.data);
  EXPECT_TRUE(gpu1.holds(ranks[1].parts.lm_head.data, ranks[1].parts.lm_head.nbytes()));
  if (cfg.fp8_block128) {
    EXPECT_GT(gpu0.matrices_arranged(), 0u);
    EXPECT_GT(gpu1.matrices_arranged(), 0u);
  }
  // The ranks' weights are the model's, a replicated norm once a rank (the start-up log prints them).
  const size_t ranks_bytes = ranks[0].weight_bytes() + ranks[1].weight_bytes();
  EXPECT_GT(ranks_bytes, layer_bytes(on_host) + m.parts.embed.nbytes());
  EXPECT_LT(ranks_bytes, layer_bytes(on_host) * 11 / 10 + 2 * whole_bytes);
  // Each device holds about half the layers (their replicated norms, and alignment, on top), never the whole.
  const double layers = static_cast<double>(layer_bytes(on_host));
  const double rank0 = static_cast<double>(gpu0.held_bytes() - whole_bytes),
               rank1 = static_cast<double>(gpu1.held_bytes());
  EXPECT_GT(rank0, 0.45 * layers);
  EXPECT_LT(rank0, 0.6 * layers);
  EXPECT_GT(rank1, 0.45 * layers);
  EXPECT_LT(rank1, 0.6 * layers + static_cast<double>(whole_bytes) / 2 + 4096);
}

TEST(RankWeightPlacement, DenseRanksGetTheirSlicesFromTheHost) { check_two_device_ranks(tiny_dense(), "dense"); }

TEST(RankWeightPlacement, HybridRanksGetTheirSlicesFromTheHost) { check_two_device_ranks(tiny_hybrid(), "hybrid"); }

TEST(RankWeightPlacement, KeptFp8SlicesAreArrangedOnTheirDevice) {
  check_two_device_ranks(aligned_hybrid_fp8(), "fp8 hybrid");
}

// A synthetic model's weights are made on the device: a rank there keeps its views and the column slices it
// copied beside them; a rank on another device gets copies of all of it, and its copies on the first are freed.
TEST(RankWeightPlacement, DeviceWeightsAreCopiedOnlyToAnotherDevice) {
  Tensor a = Tensor::empty(DType::F32, {4, 8});
  for (int64_t i = 0; i < 32; ++i) a.as<float>()[i] = static_cast<float>(i);
  const StandInDevice gpu0(0), gpu1(1);
  TensorView on_gpu0 = a.view();
  std::array<TensorView*, 1> one{&on_gpu0};
  const Buffer held = upload_tensors(one, gpu0);
  for (const StandInDevice* where : {&gpu0, &gpu1}) {
    RankModel rank;
    rank.mem = where;
    rank.parts.final_norm = on_gpu0;
    rank.copies.push_back(MemTensor::empty(gpu0, DType::F32, {2, 2}));
    place_rank_weights(rank, gpu0);
    EXPECT_EQ(rank.parts.final_norm.data == on_gpu0.data, where == &gpu0);
    EXPECT_TRUE(where->holds(rank.parts.final_norm.data, 128));
    EXPECT_EQ(std::memcmp(rank.parts.final_norm.data, a.as<float>(), 128), 0);
    EXPECT_EQ(rank.copies.size(), where == &gpu0 ? 1u : 0u);
  }
}

}  // namespace
}  // namespace specserve
