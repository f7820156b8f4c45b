// `specserve bench serve-load --acceptance` (cli/serve_controlled.h) on the demo pair on the CPU: through the
// real command, the table has a row per level and profile, every speculative output matched the plain one,
// and tokens per verify is exactly 1 at τ = 1 and grows with τ; a recording that differs from what the target
// emits is an Error, not a number (through the in-process server, as the command runs it); the refusals come
// before any weights load; and a random target checkpoint finds its real drafter shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "../specserve_cli.h"
#include "cli/commands.h"
#include "cli/controlled_bench.h"
#include "cli/serve_controlled.h"
#include "core/error.h"
#include "io/model_config.h"
#include "model/synthetic_shapes.h"
#include "server/http_server.h"

namespace specserve::cli {
namespace {

const std::string kDemo = std::string(SPECSERVE_SOURCE_DIR) + "/models/demo-coder";

// The table's rows by (concurrency, acceptance label): their whitespace-separated fields.
std::map<std::pair<int, std::string>, std::vector<std::string>> table_rows(const std::string& out) {
  std::map<std::pair<int, std::string>, std::vector<std::string>> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("  controlled ");
    if (at == std::string::npos) continue;
    std::istringstream words(line.substr(0, at));
    std::vector<std::string> fields;
    for (std::string w; words >> w;) fields.push_back(w);
    rows[{std::stoi(fields.at(0)), line.substr(at + 13)}] = fields;
  }
  return rows;
}

TEST(ServeControlled, TableThroughTheCommand) {
  ASSERT_TRUE(std::filesystem::exists(kDemo + "/drafter/config.json")) << kDemo;
  const testing::CliRun r = testing::run_specserve(
      "bench serve-load --model " + kDemo + "/target --draft " + kDemo +
      "/drafter --acceptance geometric:1,6.5 --concurrency 1,2 --requests 2 --max-tokens 40 --prompt-words 24 "
      "--draft-policy fixed --threads 2 --seed 3");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("every speculative request's output equals its plain output (checked)"), std::string::npos)
      << r.out;
  const auto rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  for (int c : {1, 2}) {
    // concurrency, requests, "geometric", "τ=…", plain tok/s, spec tok/s, speed-up, TTFT p50 plain "/" spec
    // "ms", ITL p50 plain "/" spec "ms", tokens per verify, plain rows, prefill-held steps plain "/" spec
    const auto& one = rows.at({c, "geometric τ=1"});
    const auto& many = rows.at({c, "geometric τ=6.5"});
    ASSERT_EQ(one.size(), 20u) << r.out;
    EXPECT_EQ(one[18], "/");
    EXPECT_GE(std::stoi(one[17]), 0) << "the level's steps held, from /metrics";
    EXPECT_GE(std::stoi(one[19]), 0);
    EXPECT_EQ(one[1], "2");
    EXPECT_GT(std::stod(one[4]), 0);
    EXPECT_EQ(one[4], many[4]) << "one plain pass per level";
    EXPECT_EQ(one[15], "1.00") << "τ = 1: every draft is wrong";
    EXPECT_GT(std::stod(many[15]), 3.0) << r.out;  // 6.5 requested; the last verifies have fewer drafts
  }
}

// The in-process server as the command starts it, with the recording services.
struct Served {
  std::shared_ptr<server::ServingState> state = std::make_shared<server::ServingState>();
  std::unique_ptr<server::HttpServer> http;
  std::shared_ptr<server::LoadedModel> model;
  std::shared_ptr<RecordingServices> recording;
  ServeControlledOptions options;

  // random_drafter: the drafter made beside the target (ServeSpec::make_drafter), of the demo drafter's shape
  // with random weights, as the command makes one of a real target's drafter shape.
  explicit Served(bool random_drafter = false) {
    server::ServeSpec spec;
    spec.model_dir = kDemo + "/target";
    if (random_drafter) {
      spec.make_drafter = [shape = load_model_config(kDemo + "/drafter")](const TargetModel& target) {
        return spec::DFlashDrafter::synthetic(shape, target);
      };
    } else {
      spec.draft_dir = kDemo + "/drafter";
    }
    spec.threads = 2;
    spec.engine.max_seqs = 2;
    spec.engine.swap_space_bytes = 0;
    server::ServerOptions ho;
    ho.port = 0;
    http = std::make_unique<server::HttpServer>(ho, state);
    options.load.port = http->bind();
    http->start();
    model = server::LoadedModel::load(spec, [](double, const std::string&) {});
    recording = std::make_shared<RecordingServices>(model);
    state->set_ready(recording);
    options.acceptance = parse_acceptance_list("geometric:4");
    options.levels = {2};
    options.load.requests = 2;
    options.load.max_tokens = 24;
    options.load.prompt_words = 16;
    options.load.model = server::discover_model(options.load);
  }
  ~Served() {
    state->set_draining();
    model->engine().shutdown(std::chrono::seconds(0));
    http->stop();
  }
  std::string error() {
    try {
      run_serve_controlled(*model, *recording, options);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST(ServeControlled, DifferentRecordingIsAnError) {
  ASSERT_TRUE(std::filesystem::exists(kDemo + "/drafter/config.json")) << kDemo;
  Served s;
  // The level's timed requests' recording is wrong (its warm-up's is not).
  s.options.tamper = [&](std::vector<RecordedRequest>& recording) {
    auto& out = recording.back().output;
    out[out.size() / 2] = (out[out.size() / 2] + 1) % 100;
  };
  // The controlled proposer finds it at the next propose, and the request fails.
  const std::string middle = s.error();
  EXPECT_NE(middle.find("differ from its recorded plain decoding"), std::string::npos) << middle;
  // Only the last token wrong: no draft is proposed after it; the output check finds it.
  s.options.tamper = [&](std::vector<RecordedRequest>& recording) {
    recording.front().output.back() = (recording.front().output.back() + 1) % 100;
  };
  const std::string last = s.error();
  EXPECT_NE(last.find("emitted different tokens from the plain pass"), std::string::npos) << last;
  // The same run untouched is not an error: the server keeps serving after a failed pass.
  s.options.tamper = nullptr;
  EXPECT_EQ(s.error(), "no error");
}

TEST(ServeControlled, RandomDrafterMadeBesideTheTarget) {
  ASSERT_TRUE(std::filesystem::exists(kDemo + "/drafter/config.json")) << kDemo;
  Served s(/*random_drafter=*/true);
  s.options.acceptance = parse_acceptance_list("geometric:1,4");
  const ServeControlledResult r = run_serve_controlled(*s.model, *s.recording, s.options);
  EXPECT_EQ(r.gamma, 15);
  ASSERT_EQ(r.rows.size(), 2u);
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.spec.errors, 0);
    EXPECT_EQ(row.spec.output_tokens, row.plain.output_tokens);
    ASSERT_GT(row.spec.spec_drafts, 0);
  }
  EXPECT_EQ(r.rows[0].spec.spec_accepted, 0);  // τ = 1
  EXPECT_GT(r.rows[1].spec.spec_accepted, r.rows[1].spec.spec_drafts);
}

Error refusal(const std::string& line) {
  CLI::App app{"specserve", "specserve"};
  CommandRunner run;
  app.require_subcommand(1);
  register_commands(app, run);
  std::vector<std::string> words{"specserve"};
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  try {
    run();
  } catch (const Error& e) {
    return e;
  }
  return Error("ran");
}

TEST(ServeControlled, RefusedBeforeLoading) {
  const std::string acceptance = "bench serve-load --acceptance geometric:3 ";
  EXPECT_NE(std::string(refusal(acceptance + "--url http://127.0.0.1:1").what()).find("not --url"), std::string::npos);
  EXPECT_NE(
      std::string(refusal(acceptance + "--model /nonexistent --workload multi-turn").what()).find("random workload"),
      std::string::npos);
  EXPECT_NE(std::string(refusal(acceptance + "--model /nonexistent --prompt-id-pattern 1,2").what())
                .find("--prompt-id-pattern"),
            std::string::npos);
  EXPECT_NE(std::string(refusal(acceptance + "--model /nonexistent --rounds 2").what()).find("--rounds"),
            std::string::npos);
  // No --draft and a target of no known shape: named, with the way out.
  const std::string fixture = std::string(SPECSERVE_SOURCE_DIR) + "/tests/fixtures/dflash/dense-trained/target";
  EXPECT_NE(std::string(refusal(acceptance + "--model " + fixture).what()).find("give --draft DIR"), std::string::npos);
}

// What tools/gpu/make_random_checkpoint.py writes for qwen3-8b (transformers' Qwen3Config): another context
// length, rope given as rope_parameters; the same architecture.
// --synthetic: the in-process target made with random weights of a real shape (here tiny, on the CPU) and served with
// another directory's tokenizer, a random drafter of its drafter shape beside it; every speculative output still
// matches the plain one, and τ = 1 commits one token a verify.
TEST(ServeControlled, SyntheticTargetThroughTheCommand) {
  const testing::CliRun r = testing::run_specserve(
      "bench serve-load --synthetic tiny --tokenizer " + kDemo +
      "/target --acceptance geometric:1,6.5 --concurrency 2 --requests 2 --max-tokens 24 --prompt-words 16 "
      "--draft-policy fixed --backend cpu --threads 2 --seed 5");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("synthetic tiny (random weights), a random drafter of the tiny drafter's shape"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("every speculative request's output equals its plain output (checked)"), std::string::npos)
      << r.out;
  const auto rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows.at({2, "geometric τ=1"}).at(15), "1.00") << r.out;
  EXPECT_GT(std::stod(rows.at({2, "geometric τ=6.5"}).at(15)), 2.0) << r.out;
}

TEST(ServeControlled, SyntheticRefusedBeforeLoading) {
  const std::string base = "bench serve-load --acceptance geometric:3 ";
  auto says = [&](const std::string& flags, const std::string& what) {
    const std::string message = refusal(base + flags).what();
    EXPECT_NE(message.find(what), std::string::npos) << flags << ": " << message;
  };
  says("--synthetic tiny", "needs --tokenizer DIR");
  says("--synthetic tiny --tokenizer /nonexistent", "no tokenizer.json");
  says("--synthetic tiny --tokenizer " + kDemo + "/target --model " + kDemo + "/target", "drop --model");
  says("--synthetic tiny --tokenizer " + kDemo + "/target --draft " + kDemo + "/drafter",
       "drop --model, --url and --draft");
  says("--synthetic qwen9 --tokenizer " + kDemo + "/target", "unknown synthetic shape 'qwen9'");
  says("--model " + kDemo + "/target --tokenizer " + kDemo + "/target", "--tokenizer names the tokenizer");
}

TEST(ServeControlled, RandomCheckpointFindsItsDrafterShape) {
  const ModelConfig qwen3_8b = parse_model_config(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 4096,
    "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "max_position_embeddings": 131072, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": false})");
  const auto shape = synthetic_shape_for(qwen3_8b);
  ASSERT_TRUE(shape.has_value());
  EXPECT_EQ(shape->name, "qwen3-8b");
  EXPECT_EQ(shape->drafter.num_layers, 5);
  for (const char* name : {"qwen3.6-27b", "qwen3.6-27b-fp8", "tiny"}) {
    const auto found = synthetic_shape_for(synthetic_shape(name).target);
    ASSERT_TRUE(found.has_value()) << name;
    EXPECT_EQ(found->name, std::string(name).substr(0, std::string(name).find("-fp8")));
  }
  ModelConfig other = qwen3_8b;
  other.num_layers = 28;  // Qwen3-1.7B's depth: no known drafter shape
  other.layer_types.resize(28);
  EXPECT_FALSE(synthetic_shape_for(other).has_value());
}

}  // namespace
}  // namespace specserve::cli
