#include "cli/common_flags.h"

namespace specserve::cli {

CLI::Option* add_model_flag(CLI::App& cmd, std::string& model_dir) {
  return cmd.add_option("--model", model_dir,
                        "Target model directory (Hugging Face layout: config.json, *.safetensors, tokenizer.json)");
}

CLI::Option* add_backend_flag(CLI::App& cmd, std::string& backend) {
  return cmd
      .add_option("--backend", backend,
                  "Where the target and drafter run: auto (cuda when the build has it and a GPU is usable), cpu or "
                  "cuda (GPU 0)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
}

CLI::Option* add_threads_flag(CLI::App& cmd, int& threads) {
  return cmd.add_option("--threads", threads, "CPU threads for the model (0 = all cores)")->capture_default_str();
}

CLI::Option* add_dtype_flag(CLI::App& cmd, std::string& dtype) {
  return cmd
      .add_option("--dtype", dtype, "Weight storage: auto (the checkpoint's; bf16 for an fp8 checkpoint), f32 or bf16")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
}

CLI::Option* add_kv_dtype_flag(CLI::App& cmd, std::string& kv_dtype) {
  return cmd
      .add_option("--kv-dtype", kv_dtype,
                  "KV cache element type: auto (f32 when the weights are f32, else bf16), bf16 or f32")
      ->check(CLI::IsMember({"auto", "bf16", "f32"}))
      ->capture_default_str();
}

CLI::Option* add_tensor_parallel_flag(CLI::App& cmd, int& ranks, std::string& nccl_library) {
  cmd.add_option("--nccl-library", nccl_library,
                 "With --tensor-parallel over several GPUs: this libnccl.so.2 (2.18 or newer) instead of the loader's "
                 "search (LD_LIBRARY_PATH, the system's); `specserve info --nccl` says which one loads");
  return cmd
      .add_option("--tensor-parallel", ranks,
                  "Split the target over N ranks (Megatron style, lossless: docs/DESIGN.md §6), one process driving "
                  "them: with --backend cuda rank r on GPU r where the machine has N GPUs (NCCL between them), else "
                  "every rank on the first GPU (a check of the sharded model, slower than 1); with --backend cpu a "
                  "simulation")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

CLI::Option* add_fp8_weights_flag(CLI::App& cmd, std::string& fp8_weights) {
  return cmd
      .add_option(
          "--fp8-weights", fp8_weights,
          "An fp8 block-128 checkpoint's Linear weights: dequantise (bf16 or f32 copies made at load) or keep "
          "(they stay e4m3 with their scales, half the bytes, with the bits of the bf16 dequantisation; "
          "--dtype f32 always dequantises). keep halves the weights' memory and is faster for plain decoding of up "
          "to 16 sequences and in prefill; dequantise (the default) is faster for verifies of more than 32 rows, "
          "i.e. speculative serving (docs/MODELS.md 6.1)")
      ->check(CLI::IsMember({"keep", "dequantise"}))
      ->capture_default_str();
}

void add_prefill_hold_flags(CLI::App& cmd, int& hold_steps, int& hold_rows) {
  cmd.add_option(
         "--prefill-hold-steps", hold_steps,
         "While sequences decode, hold prompts whose chunks come to fewer than --prefill-hold-rows rows up to N "
         "steps when the recent arrivals predict another prompt in that time, so that several prefill in one "
         "run (a short run streams every weight with too few tiles to fill the GPU): more throughput under "
         "staggered arrivals, up to N steps more time to the first token. 0 = off (every chunk runs at the "
         "first step with room). Outputs never change")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd.add_option("--prefill-hold-rows", hold_rows,
                 "With --prefill-hold-steps: the prefill rows a step must have to run them without waiting")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
}

void add_prefix_cache_flags(CLI::App& cmd, engine::EngineOptions& engine) {
  cmd.add_flag_callback(
      "--no-prefix-cache", [&engine] { engine.prefix_cache = false; },
      "Turn the prefix cache off: every prompt is prefilled whole (outputs are the same either way)");
  cmd.add_option("--prefix-cache-state-interval", engine.prefix_cache_state_interval,
                 "Hybrid targets: keep the DeltaNet state every N prompt positions (a multiple of 64) besides each "
                 "prompt's last multiple of 64 from 256 on; smaller hits more of a diverging prefix at more snapshot "
                 "memory")
      ->check(CLI::Validator(
          [](const std::string& v) -> std::string {
            int n = 0;
            try {
              n = std::stoi(v);
            } catch (...) {
              return "not a number: " + v;
            }
            return n >= 64 && n % 64 == 0 ? "" : "must be a positive multiple of 64, got " + v;
          },
          "MULTIPLE OF 64"))
      ->capture_default_str();
}

}  // namespace specserve::cli
