// The real binaries: `specserve info` on good and malformed checkpoints (exit code, one-line error)
// and make_tiny_model's command line.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cstdlib>

#include "checkpoint_builder.h"
#include "io_test_util.h"

namespace specserve {
namespace {

using test::read_bytes;
using test::TempDir;
using test::write_bytes;

const std::string kBin = std::string(SPECSERVE_BINARY_DIR) + "/bin/";

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs a shell command with stdout and stderr captured into files of `scratch`.
CommandResult run(const std::string& command, const TempDir& scratch) {
  const std::string out = scratch.file("stdout.txt"), err = scratch.file("stderr.txt");
  int status = std::system((command + " >" + out + " 2>" + err).c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  return r;
}

// A failed command prints exactly one line, "error: ...", and exits non-zero.
void expect_one_line_error(const CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
}

TEST(InfoCli, DescribesTinyModelAsTextAndJson) {
  TempDir model, scratch;
  ASSERT_EQ(run(kBin + "make_tiny_model --out " + model.path().string() + " --seed 1", scratch).exit_code, 0);
  CommandResult text = run(kBin + "specserve info --model " + model.path().string(), scratch);
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("layers:       4: linear×3, full (1 full_attention, 3 linear_attention)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("head:         tied"), std::string::npos) << text.out;
  CommandResult js = run(kBin + "specserve info --json --model " + model.path().string(), scratch);
  EXPECT_EQ(js.exit_code, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["family"], "qwen3_5");
  EXPECT_EQ(j["weight_layout"], "flat");
  EXPECT_EQ(j["parameters"].size(), 1u);
}

TEST(InfoCli, DescribesDrafter) {
  TempDir model, scratch;
  test::write_checkpoint(model.path().string(), test::tiny_dflash_config(), "");
  CommandResult r = run(kBin + "specserve info --model " + model.path().string(), scratch);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("block size 16, mask token id 60, target layer ids [1, 9, 17, 25, 33]"), std::string::npos)
      << r.out;
}

TEST(InfoCli, MalformedSafetensorsIsAOneLineError) {
  TempDir model, scratch;
  test::write_checkpoint(model.path().string(), test::tiny_qwen3_5_config(false, true), "model.");
  std::string bytes = read_bytes(model.file("model.safetensors"));
  write_bytes(model.file("model.safetensors"), bytes.substr(0, bytes.size() / 2));
  expect_one_line_error(run(kBin + "specserve info --model " + model.path().string(), scratch), "out of range");
  write_bytes(model.file("model.safetensors"), "abc");
  expect_one_line_error(run(kBin + "specserve info --model " + model.path().string(), scratch), "truncated: 3 bytes");
}

TEST(InfoCli, MalformedConfigIsAOneLineError) {
  TempDir model, scratch;
  test::write_checkpoint(model.path().string(), test::tiny_qwen3_5_config(false, true), "model.");
  auto cfg = nlohmann::json::parse(read_bytes(model.file("config.json")));
  cfg["hidden_size"] = "wide";
  write_bytes(model.file("config.json"), cfg.dump());
  expect_one_line_error(run(kBin + "specserve info --model " + model.path().string(), scratch),
                        "key 'hidden_size' must be an integer, found a string");
  write_bytes(model.file("config.json"), "{\"architectures\": [");
  expect_one_line_error(run(kBin + "specserve info --model " + model.path().string(), scratch),
                        "config.json is not valid JSON");
}

TEST(InfoCli, MissingTensorIsAOneLineError) {
  TempDir model, scratch;
  test::write_checkpoint(model.path().string(), test::tiny_qwen3_5_config(false, true), "model.",
                         [](auto& t) { test::drop(t, "model.norm.weight"); });
  expect_one_line_error(run(kBin + "specserve info --model " + model.path().string(), scratch),
                        "missing tensor 'model.norm.weight'");
}

// A quantised checkpoint is refused by every command that loads it, with one line naming the method.
TEST(InfoCli, QuantizedCheckpointIsRefusedByInfoAndGenerate) {
  TempDir model, scratch;
  ASSERT_EQ(run(kBin + "make_tiny_model --out " + model.path().string() + " --seed 1", scratch).exit_code, 0);
  auto cfg = nlohmann::json::parse(read_bytes(model.file("config.json")));
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {64, 64}}};
  write_bytes(model.file("config.json"), cfg.dump());
  const std::string dir = model.path().string();
  const std::string refusal =
      "quantization 'fp8' with quantization_config.weight_block_size [64, 64] is not implemented";
  expect_one_line_error(run(kBin + "specserve info --model " + dir, scratch), refusal);
  expect_one_line_error(
      run(kBin + "specserve generate --backend cpu --model " + dir + " --prompt hi --max-tokens 2", scratch), refusal);
  cfg["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
  write_bytes(model.file("config.json"), cfg.dump());
  expect_one_line_error(run(kBin + "specserve info --model " + dir, scratch), "quantization 'awq' is not implemented");
}

// `info --env` prints the registry (core/env_registry.h) with the values the process sees; `info` needs
// --model or --env, and not both.
TEST(InfoCli, ListsTheEnvironmentVariables) {
  TempDir scratch;
  CommandResult r = run("SPECSERVE_POOL_SPIN=7 SPECSERVE_API_KEY=hush-42 " + kBin + "specserve info --env", scratch);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SPECSERVE_GRAPHS  (switch, default \"1\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SPECSERVE_POOL_SPIN  (int, default \"4000\", now \"7\")"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SPECSERVE_LOG"), std::string::npos);
  EXPECT_NE(r.out.find("SPECSERVE_API_KEY  (text, default \"\", now set)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("hush-42"), std::string::npos) << "a secret was printed";
  EXPECT_EQ(r.out.find("SPECSERVE_TC_"), std::string::npos) << "a settled experiment's knob is back";
  r = run(kBin + "specserve info", scratch);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
  r = run(kBin + "specserve info --env --model /nonexistent", scratch);
  EXPECT_NE(r.exit_code, 0);
}

TEST(MakeTinyModelCli, RejectsBadFlags) {
  TempDir model, scratch;
  CommandResult r = run(kBin + "make_tiny_model --out " + model.path().string() + " --family llama", scratch);
  EXPECT_NE(r.exit_code, 0);
  r = run(kBin + "make_tiny_model", scratch);  // --out is required
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace specserve
