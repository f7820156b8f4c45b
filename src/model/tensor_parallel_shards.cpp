// shard_model: the ranks' slices of a loaded target's weights (docs/DESIGN.md §6.1, §6.3).
#include <map>

#include "core/error.h"
#include "model/tensor_parallel_shards.h"

namespace specserve {

namespace {

void check_fp8_split(const TensorView& v, const char* what, int64_t begin, int64_t end) {
  SS_CHECK(keeps_fp8_blocks(begin, end),
           "--tensor-parallel: {} [{}, {}) of the kept fp8 matrix {} cut a 128 x 128 scale block (use --fp8-weights "
           "dequantise, or a rank count that splits on 128 boundaries)",
           what, begin, end, v.describe());
}

// Rows [begin, end) of a matrix or vector: a view.
TensorView row_slice(const TensorView& v, int64_t begin, int64_t end) {
  if (begin == 0 && end == v.dim(0)) return v;
  if (v.block_scaled()) check_fp8_split(v, "rows", begin, end);
  return v.rows(begin, end);
}

// Where the copied slices go: beside the matrix they come from (the host, or the device memory a synthetic
// model's weights were made in). `contiguous`: the rank runs on a device, which reads every slice contiguous
// (copied there by place_rank_weights), so a host column slice is a copy too.
struct SliceCopies {
  const Memory& device_mem;  // the memory of the matrices that are not on the host
  bool contiguous = false;
  std::vector<MemTensor>& owned;
  const Memory& beside(const TensorView& v) const { return v.device == Device::CPU ? cpu_memory() : device_mem; }
  // A new contiguous tensor of `shape` beside `from`, rows × width bytes copied in from src (rows `spitch` bytes
  // apart).
  TensorView copy(const TensorView& from, DType dtype, const Shape& shape, const void* src, size_t spitch, size_t width,
                  int64_t rows) {
    const Memory& mem = beside(from);
    owned.push_back(MemTensor::empty(mem, dtype, shape));
    if (rows > 0 && width > 0)
      mem.copy_2d(owned.back().as<void>(), width, src, spitch, width, static_cast<size_t>(rows));
    return owned.back().view();
  }
};

// Columns [begin, end) of a matrix [rows, cols] with contiguous rows: for a rank on the host a view whose rows
// keep the matrix's stride; for a rank on a device a contiguous copy (what the device's matmul kernels read). A
// kept fp8 matrix's slice is always a copy, with its scale columns (both contiguous, as the fp8 kernels read them).
TensorView column_slice(const TensorView& v, int64_t begin, int64_t end, SliceCopies& copies) {
  if (begin == 0 && end == v.dim(1)) return v;
  SS_CHECK(v.ndim() == 2 && v.strides[1] == 1, "--tensor-parallel: cannot split the columns of {}", v.describe());
  const size_t element = dtype_size(v.dtype);
  const void* first = static_cast<const char*>(v.data) + begin * static_cast<int64_t>(element);
  if (v.device == Device::CPU && !v.block_scaled() && !copies.contiguous) {
    TensorView c = v;
    c.data = const_cast<void*>(first);
    c.shape = Shape{v.dim(0), end - begin};
    return c;
  }
  if (v.block_scaled()) check_fp8_split(v, "columns", begin, end);
  TensorView c =
      copies.copy(v, v.dtype, Shape{v.dim(0), end - begin}, first, static_cast<size_t>(v.strides[0]) * element,
                  static_cast<size_t>(end - begin) * element, v.dim(0));
  if (v.block_scaled()) {
    const Shape grid = v.scale_shape();
    const int64_t s0 = begin / kFp8BlockSize, s1 = (end - 1) / kFp8BlockSize + 1;
    c.scales = copies
                   .copy(v, DType::F32, Shape{grid[0], s1 - s0}, v.scales + s0, static_cast<size_t>(grid[1]) * 4,
                         static_cast<size_t>(s1 - s0) * 4, grid[0])
                   .as<const float>();
  }
  return c;
}

// The rows of several ranges, in order, in one owned copy (a view when they are the whole matrix in order). A
// kept fp8 matrix's ranges must each start on a 128-row block and all but the last hold whole blocks, so that
// the copy's scale rows are the ranges' scale rows one after another.
TensorView gather_rows(const TensorView& v, std::initializer_list<IndexRange> ranges, SliceCopies& copies) {
  int64_t rows = 0, at = 0;
  bool whole = true;
  for (const IndexRange& r : ranges) {
    whole = whole && r.begin == at;
    at = r.end;
    rows += r.size();
  }
  if (whole && at == v.dim(0)) return v;
  SS_CHECK(v.strides[v.ndim() - 1] == 1, "--tensor-parallel: cannot gather rows of {}", v.describe());
  if (v.block_scaled()) {
    size_t i = 0;
    for (const IndexRange& r : ranges) {
      const bool last = ++i == ranges.size();
      SS_CHECK(r.begin % kFp8BlockSize == 0 && (last || r.size() % kFp8BlockSize == 0),
               "--tensor-parallel: the rows [{}, {}) a rank gathers from the kept fp8 matrix {} cut a 128 x 128 "
               "scale block (use --fp8-weights dequantise, or a rank count that splits on 128 boundaries)",
               r.begin, r.end, v.describe());
    }
  }
  Shape shape = v.shape;
  shape.dims[0] = rows;
  const size_t row_bytes = static_cast<size_t>(v.numel() / v.dim(0)) * dtype_size(v.dtype);
  const size_t stride = static_cast<size_t>(v.strides[0]) * dtype_size(v.dtype);
  const Memory& mem = copies.beside(v);
  copies.owned.push_back(MemTensor::empty(mem, v.dtype, shape));
  TensorView g = copies.owned.back().view();
  char* out = copies.owned.back().as<char>();
  for (const IndexRange& r : ranges) {
    if (r.size() > 0)
      mem.copy_2d(out, row_bytes, static_cast<const char*>(v.data) + static_cast<size_t>(r.begin) * stride, stride,
                  row_bytes, static_cast<size_t>(r.size()));
    out += static_cast<size_t>(r.size()) * row_bytes;
  }
  if (v.block_scaled()) {
    const int64_t scale_cols = v.scale_shape()[1];
    copies.owned.push_back(
        MemTensor::empty(mem, DType::F32, Shape{(rows + kFp8BlockSize - 1) / kFp8BlockSize, scale_cols}));
    float* scales = copies.owned.back().as<float>();
    for (const IndexRange& r : ranges) {
      const int64_t blocks = (r.size() + kFp8BlockSize - 1) / kFp8BlockSize;
      if (blocks > 0)
        mem.copy(scales, v.scales + r.begin / kFp8BlockSize * scale_cols, static_cast<size_t>(blocks * scale_cols) * 4);
      scales += blocks * scale_cols;
    }
    g.scales = copies.owned.back().as<const float>();
  }
  return g;
}

AttentionBlock shard_attention(const AttentionBlock& a, const ArchSpec& s, const RankShare& sh, SliceCopies& copies) {
  const int64_t hd = s.head_dim, q_rows = hd * (s.attn_output_gate ? 2 : 1);
  AttentionBlock b = a;
  b.q_proj = row_slice(a.q_proj, sh.q_heads.begin * q_rows, sh.q_heads.end * q_rows);
  b.k_proj = row_slice(a.k_proj, sh.kv_heads.begin * hd, sh.kv_heads.end * hd);
  b.v_proj = row_slice(a.v_proj, sh.kv_heads.begin * hd, sh.kv_heads.end * hd);
  b.o_proj = column_slice(a.o_proj, sh.q_heads.begin * hd, sh.q_heads.end * hd, copies);
  return b;
}

DeltaNetBlock shard_deltanet(const DeltaNetBlock& d, const GdnDims& g, const RankShare& sh, int slot,
                             SliceCopies& copies) {
  const int64_t dk = g.k_dim, dv = g.v_dim, key = g.key_dim();
  const IndexRange q{sh.gdn_k_heads.begin * dk, sh.gdn_k_heads.end * dk};
  const IndexRange k{key + q.begin, key + q.end};
  const IndexRange v{2 * key + sh.gdn_v_heads.begin * dv, 2 * key + sh.gdn_v_heads.end * dv};
  const IndexRange heads = sh.gdn_v_heads;
  DeltaNetBlock b = d;
  b.in_qkv = gather_rows(d.in_qkv, {q, k, v}, copies);
  b.conv = gather_rows(d.conv, {q, k, v}, copies);
  b.in_z = row_slice(d.in_z, heads.begin * dv, heads.end * dv);
  b.in_b = row_slice(d.in_b, heads.begin, heads.end);
  b.in_a = row_slice(d.in_a, heads.begin, heads.end);
  b.a_log = row_slice(d.a_log, heads.begin, heads.end);
  b.dt_bias = row_slice(d.dt_bias, heads.begin, heads.end);
  b.out_proj = column_slice(d.out_proj, heads.begin * dv, heads.end * dv, copies);
  b.slot = slot;
  return b;
}

}  // namespace

RankModel shard_rank(const ModelParts& full, const TensorParallelPlan& plan, int r, int deltanet_layers,
                     const KvGeometry& full_kv, const Ops& ops, const Memory& model_mem, const Memory& rank_mem) {
  const RankShare& sh = plan.shares.at(static_cast<size_t>(r));
  const ArchSpec& s = full.spec;
  RankModel rank;
  rank.ops = &ops;
  rank.mem = &rank_mem;
  SliceCopies copies{model_mem, rank_mem.device() != Device::CPU, rank.copies};
  ArchSpec& rs = rank.parts.spec;
  rs = s;
  rs.num_heads = static_cast<int>(sh.q_heads.size());
  rs.num_kv_heads = static_cast<int>(sh.kv_heads.size());
  rs.intermediate = sh.mlp_columns.size();
  rs.vocab = sh.vocab_rows.size();
  rs.gdn.num_k_heads = static_cast<int>(sh.gdn_k_heads.size());
  rs.gdn.num_v_heads = static_cast<int>(sh.gdn_v_heads.size());
  for (const DecoderLayer& l : full.layers) {
    DecoderLayer rl = l;
    if (l.type == LayerType::LinearAttention)
      rl.deltanet = shard_deltanet(l.deltanet, s.gdn, sh, r * deltanet_layers + l.deltanet.slot, copies);
    else
      rl.attn = shard_attention(l.attn, s, sh, copies);
    rl.mlp.gate = row_slice(l.mlp.gate, sh.mlp_columns.begin, sh.mlp_columns.end);
    rl.mlp.up = row_slice(l.mlp.up, sh.mlp_columns.begin, sh.mlp_columns.end);
    rl.mlp.down = column_slice(l.mlp.down, sh.mlp_columns.begin, sh.mlp_columns.end, copies);
    rank.parts.layers.push_back(std::move(rl));
  }
  rank.parts.embed = row_slice(full.embed, sh.vocab_rows.begin, sh.vocab_rows.end);
  rank.parts.lm_head = row_slice(full.lm_head, sh.vocab_rows.begin, sh.vocab_rows.end);
  rank.parts.final_norm = full.final_norm;
  rank.kv = KvGeometry{full_kv.num_layers, rs.num_kv_heads, full_kv.head_dim, full_kv.dtype};
  rank.vocab_begin = sh.vocab_rows.begin;
  place_rank_weights(rank, model_mem);
  return rank;
}

std::unique_ptr<TensorParallelShards> shard_model(const ModelParts& full, const ModelConfig& cfg, int ranks,
                                                  const KvGeometry& full_kv, int deltanet_layers, const Ops& ops,
                                                  const Memory& mem, std::span<const Memory* const> placement,
                                                  const std::string& nccl_library) {
  SS_CHECK(placement.empty() || static_cast<int>(placement.size()) == ranks,
           "--tensor-parallel: {} places for {} ranks", placement.size(), ranks);
  std::vector<const Memory*> where(static_cast<size_t>(ranks), &mem);
  if (!placement.empty()) where.assign(placement.begin(), placement.end());
  auto tp = std::make_unique<TensorParallelShards>();
  tp->plan = plan_tensor_parallel(cfg, ranks);
  tp->collective = placed_collective(where, nccl_library);
  tp->deltanet_layers = deltanet_layers;
  for (int r = 0; r < ranks; ++r)
    tp->ranks.push_back(
        shard_rank(full, tp->plan, r, deltanet_layers, full_kv, ops, mem, *where[static_cast<size_t>(r)]));
  tp->pool_kv = tp->ranks[0].kv;
  tp->pool_kv.num_kv_heads *= ranks;  // N planes a block
  return tp;
}

std::shared_ptr<KvBlockPool> TensorParallelShards::make_pool() const {
  std::vector<const Memory*> planes;
  for (const RankModel& r : ranks) planes.push_back(r.mem);
  return std::make_shared<KvBlockPool>(ranks.at(0).kv, std::move(planes));
}

Buffer relocate_tensors(std::span<TensorView* const> views, const Memory& from, const Memory& to) {
  constexpr size_t kAlign = 256;
  std::map<const void*, size_t> offset;  // by source address: a shared tensor once
  size_t total = 0;
  auto place = [&](const void* data, size_t bytes) {
    if (offset.count(data)) return;
    offset[data] = total;
    total += (bytes + kAlign - 1) / kAlign * kAlign;
  };
  for (const TensorView* v : views) {
    if (v->data == nullptr) continue;
    SS_CHECK(v->is_contiguous(), "--tensor-parallel: cannot copy {} to a rank's device (not contiguous)",
             v->describe());
    place(v->data, v->nbytes());
    if (v->block_scaled()) place(v->scales, v->scale_bytes());
  }
  require_room(to, total, "a tensor-parallel rank's weights", " (fewer ranks a GPU, or smaller weights)");
  Buffer block(to, total);
  std::vector<char> host;
  std::map<const void*, bool> done;
  auto move = [&](const void* src, size_t bytes) {
    char* dst = static_cast<char*>(block.data()) + offset.at(src);
    if (!done[src]) {
      host.resize(bytes);
      from.download(host.data(), src, bytes);
      to.upload(dst, host.data(), bytes);
      done[src] = true;
    }
    return dst;
  };
  for (TensorView* v : views) {
    if (v->data == nullptr) continue;
    const void* data = v->data;
    const float* scales = v->scales;
    v->data = move(data, v->nbytes());
    v->device = to.device();
    if (v->block_scaled()) v->scales = reinterpret_cast<const float*>(move(scales, v->scale_bytes()));
  }
  return block;
}

size_t RankModel::weight_bytes() const { return distinct_weight_bytes(parts); }

void place_rank_weights(RankModel& rank, const Memory& model_mem) {
  if (rank.mem->device() == Device::CPU) return;  // host memories read each other's tensors: the views stay
  const std::vector<TensorView*> views = weight_views(rank.parts);
  const bool elsewhere = rank.mem != &model_mem;
  if (elsewhere) {
    std::vector<TensorView*> on_device;
    for (TensorView* v : views)
      if (v->data != nullptr && v->device != Device::CPU) on_device.push_back(v);
    rank.relocated = relocate_tensors(on_device, model_mem, *rank.mem);
  }
  // The host slices (upload_tensors skips what is now on the rank's device, and puts kept fp8 codes in its order).
  const MemoryDeviceScope on_device(*rank.mem);
  rank.uploaded = upload_tensors(views, *rank.mem);
  std::erase_if(rank.copies, [&](const MemTensor& t) { return elsewhere || t.view().device == Device::CPU; });
}

void tensor_parallel_commit(const TensorParallelShards& tp, std::span<const DeltaNetBlock::Commit> commits,
                            std::vector<Buffer>& retired) {
  std::vector<CopyRegion> copies;
  for (const RankModel& rank : tp.ranks) {
    const MemoryDeviceScope on_device(*rank.mem);
    copies.clear();
    for (const DecoderLayer& l : rank.parts.layers)
      if (l.type == LayerType::LinearAttention)
        l.deltanet.commit(*rank.ops, *rank.mem, rank.parts.spec, commits, copies, retired);
    rank.mem->copy_many(copies);  // each rank's window copies in its memory, in one copy_many
  }
}

}  // namespace specserve
