#pragma once
// What `specserve info` reports about a model directory: the parsed config, the checkpoint layout
// (validated: every tensor the config implies is present), parameter counts, and text / JSON
// renderings of all of it.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/checkpoint_layout.h"
#include "io/model_config.h"

namespace specserve {

struct ModelSummary {
  std::string dir;
  ModelConfig config;
  CheckpointLayout layout;
  std::map<DType, int64_t> parameters_by_dtype;  // every tensor in the checkpoint
  int64_t total_parameters = 0;                  // every tensor in the checkpoint
  int64_t model_parameters = 0;                  // the tensors the model reads (layout.tensors, fp8 scales)
  size_t num_files = 0;
  size_t num_tensors = 0;
  uint64_t file_bytes = 0;
  // Qwen's fp8 block-128 format (layout.fp8_weights): the quantised weights and the bytes they and their
  // scales take in the files.
  size_t fp8_weights = 0;
  uint64_t fp8_bytes = 0;
};

// Loads DIR/config.json and the checkpoint (header only: the data pages are never touched) and
// validates the layout. Throws Error on any problem.
ModelSummary summarize_model(const std::string& dir);

// A compact schedule: the shortest repeating period, run-length encoded, e.g. "(linear×3, full)×16"
// for Qwen3.6-27B, "full×36" for Qwen3-8B, "sliding×4, full" for an aperiodic schedule.
std::string layer_schedule(const std::vector<LayerType>& types);

// Unused tensors grouped by their leading name parts ("model.visual" → 300, "mtp" → 15).
std::map<std::string, size_t> group_tensor_names(const std::vector<std::string>& names);

std::string format_summary_text(const ModelSummary& s);
std::string format_summary_json(const ModelSummary& s);  // one JSON object, pretty-printed

}  // namespace specserve
