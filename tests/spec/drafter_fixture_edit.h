#pragma once
// Writes edited copies of a fixture drafter (config.json keys, tensor renames/additions) into a
// temporary directory, for the load-validation and sliding-window tests.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <unistd.h>

#include "io/safetensors.h"

namespace specserve::spec::testing {

struct DrafterEdit {
  std::function<void(nlohmann::json&)> config = nullptr;            // edits config.json
  std::function<std::string(const std::string&)> rename = nullptr;  // new name per tensor
  std::function<void(SafetensorsWriter&)> add = nullptr;            // extra tensors
};

// Returns the directory of the edited copy of `source_dir` (a drafter checkpoint).
inline std::string edited_drafter(const std::string& source_dir, const std::string& tag, const DrafterEdit& edit) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("specserve_spec_" + tag + "_" +
                                                    std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                                    "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ifstream in(source_dir + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  if (edit.config) edit.config(cfg);
  std::ofstream(dir / "config.json") << cfg.dump(1);
  auto ckpt = Checkpoint::open(source_dir);
  SafetensorsWriter w;
  for (const auto& name : ckpt->names()) w.add(edit.rename ? edit.rename(name) : name, ckpt->get(name));
  if (edit.add) edit.add(w);
  w.write((dir / "model.safetensors").string());
  return dir.string();
}

}  // namespace specserve::spec::testing
