// CPU decode throughput of a target model with Qwen3-0.6B's shape (H 1024, 28 layers, 16/8 heads of
// 128, MLP 3072, vocab 151,936, tied head: ~0.6B parameters) and random weights, stored bf16 or f32.
// One iteration = one decode step (a 1-row extend + commit) at a context of ~128 tokens. Reports
// tokens/s and the achieved weight bandwidth (every matmul weight and the head are read once per
// token; the KV cache at this context is negligible), to compare with the machine's memory roofline.
//
//   build/bin/bench_cpu_decode [--threads=N] [--benchmark_filter=bf16]   (--threads: pool threads; default all cores)
//
// The checkpoint (bf16, ~1.2 GB) is written once to $TMPDIR and removed at exit. BM_MemoryReadRoofline
// measures the read bandwidth all threads reach on a plain stream, for the ratio.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/target_model.h"

namespace {

using namespace specserve;

struct Shape06B {
  int64_t vocab = 151936, hidden = 1024, inter = 3072;
  int layers = 28, heads = 16, kv_heads = 8, head_dim = 128;
};

class RandomCheckpoint {
 public:
  RandomCheckpoint() {
    dir_ = std::filesystem::temp_directory_path() / ("specserve_bench_decode_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    write();
  }
  ~RandomCheckpoint() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir() const { return dir_.string(); }
  // Bytes of weights a decode step reads at `bytes_per_param`.
  double decode_bytes(double bytes_per_param) const { return static_cast<double>(matmul_params_) * bytes_per_param; }

 private:
  void add(SafetensorsWriter& w, const std::string& name, Shape shape, float scale, float offset = 0.0f) {
    Tensor t = Tensor::empty(DType::BF16, shape);
    auto* p = t.as<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      state_ ^= state_ << 13;
      state_ ^= state_ >> 7;
      state_ ^= state_ << 17;
      const float u = static_cast<float>(state_ >> 40) / static_cast<float>(1 << 24) - 0.5f;
      p[i] = f32_to_bf16(offset + scale * u);
    }
    w.add(name, t);
  }

  void write() {
    const Shape06B s;
    SafetensorsWriter w;
    const int64_t q = int64_t{s.heads} * s.head_dim, kv = int64_t{s.kv_heads} * s.head_dim;
    add(w, "model.embed_tokens.weight", {s.vocab, s.hidden}, 0.1f);
    add(w, "model.norm.weight", {s.hidden}, 0.1f, 1.0f);
    matmul_params_ = s.vocab * s.hidden;  // tied head
    for (int i = 0; i < s.layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      add(w, p + "input_layernorm.weight", {s.hidden}, 0.1f, 1.0f);
      add(w, p + "post_attention_layernorm.weight", {s.hidden}, 0.1f, 1.0f);
      add(w, p + "self_attn.q_proj.weight", {q, s.hidden}, 0.05f);
      add(w, p + "self_attn.k_proj.weight", {kv, s.hidden}, 0.05f);
      add(w, p + "self_attn.v_proj.weight", {kv, s.hidden}, 0.05f);
      add(w, p + "self_attn.o_proj.weight", {s.hidden, q}, 0.05f);
      add(w, p + "self_attn.q_norm.weight", {s.head_dim}, 0.1f, 1.0f);
      add(w, p + "self_attn.k_norm.weight", {s.head_dim}, 0.1f, 1.0f);
      add(w, p + "mlp.gate_proj.weight", {s.inter, s.hidden}, 0.05f);
      add(w, p + "mlp.up_proj.weight", {s.inter, s.hidden}, 0.05f);
      add(w, p + "mlp.down_proj.weight", {s.hidden, s.inter}, 0.05f);
      matmul_params_ += (2 * q + 2 * kv + 3 * s.inter) * s.hidden;
    }
    w.write((dir_ / "model.safetensors").string());
    std::ofstream(dir_ / "config.json") << R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3",
      "vocab_size":151936,"hidden_size":1024,"intermediate_size":3072,"num_hidden_layers":28,
      "num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,"rms_norm_eps":1e-6,
      "rope_theta":1000000,"max_position_embeddings":40960,"tie_word_embeddings":true,
      "attention_bias":false,"hidden_act":"silu","torch_dtype":"bfloat16","eos_token_id":151645})";
  }

  std::filesystem::path dir_;
  uint64_t state_ = 0x9E3779B97F4A7C15ull;
  int64_t matmul_params_ = 0;
};

RandomCheckpoint& checkpoint() {
  static RandomCheckpoint c;
  return c;
}

void BM_Decode(benchmark::State& state, const char* dtype, bool map_weights) {
  auto model = TargetModel::load(checkpoint().dir(), LoadOptions{dtype, 0, map_weights});
  auto seq = model->new_sequence();
  std::vector<int32_t> prompt(128);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919) % 151000);
  ForwardBatch prefill;
  prefill.spans.push_back({seq.get(), prompt, SpanMode::Prefill, LogitsWanted::Last});
  model->forward(prefill);
  int32_t tok = 42;
  for (auto _ : state) {
    const std::vector<int32_t> one = {tok};
    ForwardBatch b;
    b.spans.push_back({seq.get(), one, SpanMode::Extend, LogitsWanted::Last});
    ForwardResult r = model->forward(b);
    model->commit(*seq, 1);
    tok = (tok * 31 + 7) % 151000;
    benchmark::DoNotOptimize(r.logits.as<float>());
  }
  const double bytes = checkpoint().decode_bytes(model->weight_dtype() == DType::BF16 ? 2.0 : 4.0);
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["weight_GB_per_s"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = ThreadPool::global().size();
  state.SetLabel(std::string(dtype) + (map_weights ? " (weights read through the file mapping)" : "") + ", " +
                 std::to_string(bytes / 1e9).substr(0, 4) + " GB weights/token");
}

// The roofline the decode numbers are compared with: all pool threads streaming a 1 GiB buffer
// (read-only, like weights during decode).
void BM_MemoryReadRoofline(benchmark::State& state) {
  const int64_t n = int64_t{1} << 28;  // floats
  Tensor buf = Tensor::empty(DType::F32, {n});
  ThreadPool::global().parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf.as<float>()[i] = static_cast<float>(i & 7);
  });
  std::vector<double> partial(static_cast<size_t>(ThreadPool::global().size()) * 8);
  for (auto _ : state) {
    ThreadPool::global().parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          const float* p = buf.as<float>();
          __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
          for (int64_t i = b; i + 32 <= e; i += 32) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
          }
          alignas(32) float out[8];
          _mm256_store_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
          partial[static_cast<size_t>(b / (n / 64 + 1)) % partial.size()] += out[0];
        },
        1 << 20);
    benchmark::DoNotOptimize(partial.data());
  }
  state.counters["read_GB_per_s"] = benchmark::Counter(
      static_cast<double>(n) * 4 * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_MemoryReadRoofline)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Decode, bf16, "bf16", false)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);
BENCHMARK_CAPTURE(BM_Decode, f32, "f32", false)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);
BENCHMARK_CAPTURE(BM_Decode, bf16_mmap, "bf16", true)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

}  // namespace

// --threads=N (this binary's own flag) sets the pool's threads before any benchmark runs; the rest goes
// to Google Benchmark.
int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i > 0 && a.rfind("--threads=", 0) == 0) {
      const int n = std::atoi(argv[i] + 10);
      if (n < 1) {
        std::fprintf(stderr, "error: --threads takes a positive count, got '%s'\n", argv[i] + 10);
        return 2;
      }
      specserve::ThreadPool::set_global_threads(n);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
