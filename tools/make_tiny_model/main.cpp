// make_tiny_model: writes the tiny random checkpoint that serves as the default model until the
// trained demo model lands (scripts/default_model.sh calls it).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/error.h"
#include "tiny_model.h"

int main(int argc, char** argv) {
  specserve::tiny::TinyModelOptions o;
  std::string dtype = "bf16";
  CLI::App app{"Write a tiny random Qwen3/Qwen3.5 checkpoint (config, tokenizer, weights)", "make_tiny_model"};
  app.add_option("--out", o.out_dir, "Output directory (created if missing)")->required();
  app.add_option("--seed", o.seed, "Random seed; the same seed gives the same files")->capture_default_str();
  app.add_option("--family", o.family, "qwen3_5 (hybrid, Qwen3_5ForCausalLM) or qwen3 (Qwen3ForCausalLM)")
      ->check(CLI::IsMember({"qwen3", "qwen3_5"}))
      ->capture_default_str();
  app.add_option("--dtype", dtype, "Weight dtype")->check(CLI::IsMember({"bf16", "f32"}))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  o.dtype = dtype == "f32" ? specserve::DType::F32 : specserve::DType::BF16;
  try {
    const auto info = specserve::tiny::write_tiny_model(o);
    std::printf("wrote a tiny random %s model (%lld parameters, %s, vocab %lld) to %s\n", o.family.c_str(),
                static_cast<long long>(info.parameters), dtype.c_str(), static_cast<long long>(info.vocab_rows),
                o.out_dir.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
