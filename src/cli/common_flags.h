#pragma once
// Flags that several commands share, registered by one function each so that a concept has one
// name, one default and one help text everywhere (`--model`, `--backend`, `--threads`, `--dtype`).
#include <CLI/CLI.hpp>

#include <string>

#include "engine/engine_options.h"

namespace specserve::cli {

// --model DIR: the target checkpoint (Hugging Face layout). Callers add ->required() where it is.
CLI::Option* add_model_flag(CLI::App& cmd, std::string& model_dir);
// --backend auto|cpu|cuda (default auto: cuda when the build has it and a GPU is usable).
CLI::Option* add_backend_flag(CLI::App& cmd, std::string& backend);
// --threads N: CPU threads for the model (0 = all cores).
CLI::Option* add_threads_flag(CLI::App& cmd, int& threads);
// --dtype auto|f32|bf16: weight storage (auto = the checkpoint's).
CLI::Option* add_dtype_flag(CLI::App& cmd, std::string& dtype);
// --kv-dtype auto|bf16|f32: the KV cache's element type (auto = f32 when the weights are f32, as
// `--dtype f32` parity runs, else bf16; model/target_model.h LoadOptions::kv_dtype).
CLI::Option* add_kv_dtype_flag(CLI::App& cmd, std::string& kv_dtype);
// --fp8-weights keep|dequantise: what an fp8 block-128 checkpoint's Linear weights become (default
// dequantise until the kept path's GPU tests have passed on a device; LoadOptions::fp8_weights).
CLI::Option* add_fp8_weights_flag(CLI::App& cmd, std::string& fp8_weights);
// --no-prefix-cache and --prefix-cache-state-interval N (a multiple of 64; default 2048): the engine's
// prefix cache (docs/DESIGN.md §5), on by default.
void add_prefix_cache_flags(CLI::App& cmd, engine::EngineOptions& engine);
// --prefill-hold-steps N (default 0, off) and --prefill-hold-rows R (default 256): while sequences decode, prompts
// whose chunks come to fewer than R rows wait up to N steps to share one prefill run (engine/batch_plan.h).
void add_prefill_hold_flags(CLI::App& cmd, int& hold_steps, int& hold_rows);
// --tensor-parallel N (default 1): the target split over N ranks (docs/DESIGN.md §6), one process driving them
// (on CUDA rank r on GPU r where the machine has N GPUs, else all on the first; on the CPU a simulation), and
// --nccl-library PATH (default: the loader's search for libnccl.so.2) for the ranks on several GPUs;
// tensor_parallel_load_option turns the first into LoadOptions::tensor_parallel (1 stays the unsharded model).
CLI::Option* add_tensor_parallel_flag(CLI::App& cmd, int& ranks, std::string& nccl_library);
inline int tensor_parallel_load_option(int ranks) { return ranks > 1 ? ranks : 0; }

}  // namespace specserve::cli
