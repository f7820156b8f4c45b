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

}  // namespace specserve::cli
