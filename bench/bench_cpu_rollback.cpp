// What rollback costs for the Gated DeltaNet layers (sequence_state.h, docs/MODEL.md): a hybrid model
// with Qwen3.5-0.8B's layer shapes (H 1024, 24 layers = 18 DeltaNet + 6 gated attention, 16/16
// linear heads of 128, attention 8/2 heads of 256, MLP 3584; vocab cut to 8192 since the head plays no
// part here), bf16 random weights, context ~256.
//
//   BM_VerifyStep/K/n   one verify step: a K-row extend then commit(n). n == K: full acceptance (the
//                       work state is swapped in); n < K: the n kept rows are replayed.
//   BM_CommitReplay/K/n commit(n) alone (the extend is outside the timing).
//   BM_SnapshotCopies/K what per-row snapshots would add to EVERY verify step instead: K copies of
//                       every DeltaNet layer's state (the conv window copies are ignored: tiny).
//
//   build/bin/bench_cpu_rollback
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "model/target_model.h"

namespace {

using namespace specserve;

constexpr int64_t kVocab = 8192, kHidden = 1024, kInter = 3584;
constexpr int kLayers = 24, kHeads = 8, kKvHeads = 2, kHeadDim = 256, kLinHeads = 16, kLinDim = 128;

class HybridCheckpoint {
 public:
  HybridCheckpoint() {
    dir_ = std::filesystem::temp_directory_path() / ("specserve_bench_rollback_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    write();
  }
  ~HybridCheckpoint() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir() const { return dir_.string(); }

 private:
  void add(SafetensorsWriter& w, const std::string& name, Shape shape, float scale, float offset = 0.0f) {
    Tensor t = Tensor::empty(DType::BF16, shape);
    auto* p = t.as<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      state_ ^= state_ << 13;
      state_ ^= state_ >> 7;
      state_ ^= state_ << 17;
      p[i] = f32_to_bf16(offset + scale * (static_cast<float>(state_ >> 40) / static_cast<float>(1 << 24) - 0.5f));
    }
    w.add(name, t);
  }
  void write() {
    SafetensorsWriter w;
    const int64_t key = kLinHeads * kLinDim, conv = 3 * key;
    add(w, "model.embed_tokens.weight", {kVocab, kHidden}, 0.1f);
    add(w, "model.norm.weight", {kHidden}, 0.1f);
    std::string types;
    for (int i = 0; i < kLayers; ++i) {
      const bool attn = (i + 1) % 4 == 0;
      types += std::string(i ? "," : "") + (attn ? "\"full_attention\"" : "\"linear_attention\"");
      const std::string p = "model.layers." + std::to_string(i) + ".";
      add(w, p + "input_layernorm.weight", {kHidden}, 0.1f);
      add(w, p + "post_attention_layernorm.weight", {kHidden}, 0.1f);
      if (attn) {
        add(w, p + "self_attn.q_proj.weight", {2 * kHeads * kHeadDim, kHidden}, 0.05f);
        add(w, p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}, 0.05f);
        add(w, p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}, 0.05f);
        add(w, p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, 0.05f);
        add(w, p + "self_attn.q_norm.weight", {kHeadDim}, 0.1f);
        add(w, p + "self_attn.k_norm.weight", {kHeadDim}, 0.1f);
      } else {
        add(w, p + "linear_attn.in_proj_qkv.weight", {conv, kHidden}, 0.05f);
        add(w, p + "linear_attn.in_proj_z.weight", {key, kHidden}, 0.05f);
        add(w, p + "linear_attn.in_proj_b.weight", {kLinHeads, kHidden}, 0.05f);
        add(w, p + "linear_attn.in_proj_a.weight", {kLinHeads, kHidden}, 0.05f);
        add(w, p + "linear_attn.out_proj.weight", {kHidden, key}, 0.05f);
        add(w, p + "linear_attn.conv1d.weight", {conv, 1, 4}, 0.5f);
        add(w, p + "linear_attn.A_log", {kLinHeads}, 0.5f);
        add(w, p + "linear_attn.dt_bias", {kLinHeads}, 0.5f, 1.0f);
        add(w, p + "linear_attn.norm.weight", {kLinDim}, 0.1f, 1.0f);
      }
      add(w, p + "mlp.gate_proj.weight", {kInter, kHidden}, 0.05f);
      add(w, p + "mlp.up_proj.weight", {kInter, kHidden}, 0.05f);
      add(w, p + "mlp.down_proj.weight", {kHidden, kInter}, 0.05f);
    }
    w.write((dir_ / "model.safetensors").string());
    std::ofstream(dir_ / "config.json")
        << R"({"architectures":["Qwen3_5ForCausalLM"],"model_type":"qwen3_5_text","vocab_size":8192,
      "hidden_size":1024,"intermediate_size":3584,"num_hidden_layers":24,"num_attention_heads":8,
      "num_key_value_heads":2,"head_dim":256,"rms_norm_eps":1e-6,"linear_conv_kernel_dim":4,
      "linear_key_head_dim":128,"linear_value_head_dim":128,"linear_num_key_heads":16,
      "linear_num_value_heads":16,"tie_word_embeddings":true,"max_position_embeddings":4096,
      "rope_parameters":{"rope_type":"default","rope_theta":10000000,"partial_rotary_factor":0.25},
      "layer_types":[)"
        << types << R"(],"torch_dtype":"bfloat16"})";
  }
  std::filesystem::path dir_;
  uint64_t state_ = 0x2545F4914F6CDD1Dull;
};

struct Setup {
  HybridCheckpoint ckpt;
  std::unique_ptr<TargetModel> model = TargetModel::load(ckpt.dir(), LoadOptions{"bf16", 0});
};
Setup& setup() {
  static Setup s;
  return s;
}

std::unique_ptr<SequenceState> warm_sequence(TargetModel& m) {
  auto seq = m.new_sequence();
  std::vector<int32_t> prompt(256);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 131) % kVocab);
  ForwardBatch b;
  b.spans.push_back({seq.get(), prompt, SpanMode::Prefill, LogitsWanted::None});
  m.forward(b);
  return seq;
}

void extend(TargetModel& m, SequenceState& s, int64_t k) {
  std::vector<int32_t> rows(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) rows[i] = static_cast<int32_t>((s.length() * 17 + i * 5) % kVocab);
  ForwardBatch b;
  b.spans.push_back({&s, rows, SpanMode::Extend, LogitsWanted::All});
  m.forward(b);
}

void BM_VerifyStep(benchmark::State& state) {
  TargetModel& m = *setup().model;
  auto seq = warm_sequence(m);
  for (auto _ : state) {
    extend(m, *seq, state.range(0));
    m.commit(*seq, state.range(1));
  }
}

void BM_CommitReplay(benchmark::State& state) {
  TargetModel& m = *setup().model;
  auto seq = warm_sequence(m);
  for (auto _ : state) {
    state.PauseTiming();
    extend(m, *seq, state.range(0));
    state.ResumeTiming();
    m.commit(*seq, state.range(1));
  }
}

void BM_SnapshotCopies(benchmark::State& state) {
  const size_t bytes = size_t{kLinHeads} * kLinDim * kLinDim * 4;  // one layer's state: 1 MiB
  const int gdn_layers = kLayers - kLayers / 4;
  std::vector<float> src(bytes / 4, 1.0f);
  std::vector<std::vector<float>> slots(static_cast<size_t>(state.range(0)), std::vector<float>(bytes / 4));
  for (auto _ : state) {
    for (int l = 0; l < gdn_layers; ++l)
      for (auto& slot : slots) std::memcpy(slot.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.counters["MiB_per_step"] = static_cast<double>(bytes) * gdn_layers * state.range(0) / (1 << 20);
}

BENCHMARK(BM_VerifyStep)
    ->Args({16, 16})
    ->Args({16, 8})
    ->Args({16, 1})
    ->Iterations(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_CommitReplay)
    ->Args({16, 16})
    ->Args({16, 15})
    ->Args({16, 8})
    ->Args({16, 1})
    ->Iterations(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_SnapshotCopies)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
