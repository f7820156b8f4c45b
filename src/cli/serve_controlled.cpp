#include "cli/serve_controlled.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/splitmix64.h"
#include "engine/engine.h"

namespace specserve::cli {

namespace {

// The requests of a pass, as the server streamed them. A failed request is an Error.
std::vector<RecordedRequest> served_pass(RecordingServices& served, const server::LevelResult& level,
                                         const std::string& pass) {
  std::vector<ServedRequest> got = served.take();
  SS_CHECK(level.errors == 0, "bench serve-load: {} of {} requests of the {} pass failed: {}", level.errors,
           level.requests, pass, level.first_error);
  SS_CHECK(static_cast<int>(got.size()) == level.requests,
           "bench serve-load: the {} pass sent {} requests but the engine finished {}", pass, level.requests,
           got.size());
  std::vector<RecordedRequest> out;
  for (ServedRequest& r : got) {
    SS_CHECK(r.error.empty(), "bench serve-load: a request of the {} pass failed: {}", pass, r.error);
    out.push_back(std::move(r.tokens));
  }
  return out;
}

// Every speculative request's output equals the plain output of the request with its prompt.
void check_same(const std::vector<RecordedRequest>& spec, const std::vector<RecordedRequest>& plain,
                const std::string& pass) {
  SS_CHECK(spec.size() == plain.size(), "bench serve-load: the {} pass served {} requests, the plain pass {}", pass,
           spec.size(), plain.size());
  for (size_t i = 0; i < spec.size(); ++i) {
    const auto it =
        std::find_if(plain.begin(), plain.end(), [&](const RecordedRequest& p) { return p.prompt == spec[i].prompt; });
    SS_CHECK(it != plain.end(), "bench serve-load: the {} pass sent a prompt ({} tokens) the plain pass did not", pass,
             spec[i].prompt.size());
    const auto& got = spec[i].output;
    const auto diff = std::mismatch(got.begin(), got.end(), it->output.begin(), it->output.end());
    SS_CHECK(got == it->output,
             "bench serve-load: the {} pass emitted different tokens from the plain pass for request {} (first at "
             "output token {}; {} vs {} tokens)",
             pass, it - plain.begin(), diff.first - got.begin(), got.size(), it->output.size());
  }
}

// The plain engine again when a controlled pass ends, however it ends: the engine must go before the
// proposer it drives.
class PlainEngineAfter {
 public:
  explicit PlainEngineAfter(server::LoadedModel& model) : model_(model) {}
  ~PlainEngineAfter() {
    try {
      model_.restart_engine(nullptr);
    } catch (...) {  // the failed pass's Error is the one to report
    }
  }

 private:
  server::LoadedModel& model_;
};

struct LevelRun {
  server::LevelResult plain;
  std::vector<server::LevelResult> spec;  // one per profile
};

// One pass on the engine as it is: the level once untimed with the warm-up prompts (`warm`), then timed
// with the level's own (`lo`), so the timed requests meet the engine in its steady state (the step shapes'
// CUDA graphs captured, the draft policy's first plain steps timed and the engine-wide acceptance learned),
// as a server's requests do; the two sets of prompts are distinct, so the prefix cache holds none of the
// timed ones. Returns the timed level and the recordings of both.
struct PassRun {
  server::LevelResult timed;
  std::vector<RecordedRequest> warm_recording, recording;
};
PassRun run_pass(RecordingServices& served, const server::LoadGeneratorOptions& warm,
                 const server::LoadGeneratorOptions& lo, int concurrency, const std::string& pass) {
  PassRun run;
  served.take();  // nothing of an earlier pass is left
  const server::LevelResult untimed = server::run_load_level(warm, concurrency);
  run.warm_recording = served_pass(served, untimed, pass + " (warm-up)");
  run.timed = server::run_load_level(lo, concurrency);
  run.recording = served_pass(served, run.timed, pass);
  return run;
}

LevelRun run_level(server::LoadedModel& model, RecordingServices& served, const ServeControlledOptions& o,
                   const server::LoadGeneratorOptions& warm, const server::LoadGeneratorOptions& lo, int concurrency,
                   const std::vector<std::vector<double>>& conditional) {
  LevelRun run;
  model.restart_engine(nullptr);
  PassRun plain = run_pass(served, warm, lo, concurrency, fmt::format("plain concurrency {}", concurrency));
  run.plain = plain.timed;
  std::fprintf(stderr, "bench: concurrency %d, plain: %.1f tok/s\n", concurrency, run.plain.tokens_per_s);
  if (o.tamper) o.tamper(plain.recording);
  // The controlled proposer draws its drafts from both recordings (the prompts name the requests).
  std::vector<RecordedRequest> both = plain.warm_recording;
  both.insert(both.end(), plain.recording.begin(), plain.recording.end());
  for (size_t a = 0; a < conditional.size(); ++a) {
    const std::string pass = fmt::format("controlled concurrency {}, {}", concurrency, o.acceptance[a].label());
    ControlledDraftProposer controlled(*model.proposer(), both, conditional[a], lo.level_salt, model.info().vocab_size);
    PlainEngineAfter restore(model);
    model.restart_engine(&controlled);
    const PassRun spec = run_pass(served, warm, lo, concurrency, pass);
    check_same(spec.warm_recording, plain.warm_recording, pass + " (warm-up)");
    check_same(spec.recording, plain.recording, pass);
    run.spec.push_back(spec.timed);
    const server::LevelResult& r = run.spec.back();
    std::fprintf(stderr, "bench: %s: %.1f tok/s, %.2f tokens per verify\n", pass.c_str(), r.tokens_per_s,
                 r.spec_drafts > 0 ? 1 + r.spec_accepted / r.spec_drafts : 0.0);
  }
  return run;
}

}  // namespace

ServeControlledResult run_serve_controlled(server::LoadedModel& model, RecordingServices& served,
                                           const ServeControlledOptions& o) {
  SS_CHECK(model.proposer() != nullptr, "bench serve-load --acceptance: the server has no drafter");
  SS_CHECK(!o.levels.empty() && !o.acceptance.empty(),
           "bench serve-load --acceptance: needs a concurrency level and an acceptance profile");
  SS_CHECK(o.load.workload == server::Workload::Random && o.load.prompt_pattern.empty(),
           "bench serve-load --acceptance: the random workload with its own token-id prompts");
  ServeControlledResult result;
  result.gamma = model.proposer()->gamma();
  result.policy = engine::draft_policy_name(model.engine().options().draft_policy);
  std::vector<std::vector<double>> conditional;  // before any pass: a τ above γ + 1 throws
  for (const AcceptanceSpec& a : o.acceptance) conditional.push_back(a.conditional(result.gamma));

  server::LoadGeneratorOptions lo = o.load;
  lo.prompt_id_vocab = model.info().vocab_size;
  lo.seed_requests = true;
  for (int c : o.levels) {
    lo.level_salt = splitmix64(o.seed ^ splitmix64(static_cast<uint64_t>(c))) | 1;  // the level's prompts
    server::LoadGeneratorOptions warm = lo;                                         // and its warm-up's
    warm.level_salt = splitmix64(lo.level_salt ^ 0x5741524D55500000ull) | 1;
    const LevelRun run = run_level(model, served, o, warm, lo, c, conditional);
    for (size_t a = 0; a < o.acceptance.size(); ++a) {
      ServeControlledRow row;
      row.concurrency = c;
      row.acceptance = o.acceptance[a].label();
      row.requested_tau = verify_tokens(conditional[a]).mean;
      row.plain = run.plain;
      row.spec = run.spec[a];
      result.rows.push_back(std::move(row));
    }
  }
  return result;
}

std::string format_serve_controlled(const ServeControlledResult& r, const ServeControlledOptions& o) {
  std::string s = fmt::format(
      "acceptance-controlled serving: {}, γ={}, draft policy {}, HTTP to the in-process server: drafts are the "
      "plain pass's output corrupted to the profile; the real drafter runs every step\n",
      o.label, r.gamma, r.policy);
  s += fmt::format(
      "acceptance-controlled serving: {}-token id prompts, {} tokens per request, T={}, seed {}, {} requests per "
      "level\n",
      o.load.prompt_words, o.load.max_tokens, o.load.temperature, o.seed,
      o.load.requests > 0 ? std::to_string(o.load.requests) : "max(16, 4 x concurrency)");
  // TTFT / ITL: p50 over the level's requests, plain / speculative. tok/verify: tokens a verify commits
  // (accepted drafts + 1); plain rows: decode rows the draft-length policy kept at 0 drafts; held: steps the prefill
  // hold kept short prompt chunks back (--prefill-hold-steps), plain / speculative pass.
  s +=
      fmt::format("{:>11} {:>8} {:>16} {:>11} {:>11} {:>8} {:>21} {:>21} {:>10} {:>10} {:>17}  acceptance-controlled\n",
                  "concurrency", "requests", "acceptance", "plain tok/s", "spec tok/s", "speed-up",
                  "TTFT p50 plain/spec", "ITL p50 plain/spec", "tok/verify", "plain rows", "held plain/spec");
  const auto count = [](double v) { return v >= 0 ? fmt::format("{:.0f}", v) : std::string("-"); };
  for (const ServeControlledRow& row : r.rows) {
    const server::LevelResult& p = row.plain;
    const server::LevelResult& q = row.spec;
    const std::string ttft = fmt::format("{:.1f} / {:.1f} ms", p.ttft_p50 * 1e3, q.ttft_p50 * 1e3);
    const std::string itl = fmt::format("{:.2f} / {:.2f} ms", p.itl_p50 * 1e3, q.itl_p50 * 1e3);
    const std::string per_verify = q.spec_drafts > 0 ? fmt::format("{:.2f}", 1 + q.spec_accepted / q.spec_drafts) : "-";
    const double rows = std::max(0.0, q.spec_drafts) + std::max(0.0, q.spec_plain_rows);
    const std::string plain_rows =
        q.spec_plain_rows >= 0 && rows > 0 ? fmt::format("{:.0f}%", 100 * q.spec_plain_rows / rows) : "-";
    const std::string held = count(p.prefill_held_steps) + " / " + count(q.prefill_held_steps);
    s += fmt::format(
        "{:>11} {:>8} {:>16} {:>11.1f} {:>11.1f} {:>7.2f}x {:>21} {:>21} {:>10} {:>10} {:>17}  controlled {}\n",
        row.concurrency, q.requests, row.acceptance, p.tokens_per_s, q.tokens_per_s,
        p.tokens_per_s > 0 ? q.tokens_per_s / p.tokens_per_s : 0.0, ttft, itl, per_verify, plain_rows, held,
        row.acceptance);
  }
  s += "acceptance-controlled serving: every speculative request's output equals its plain output (checked)\n";
  return s;
}

}  // namespace specserve::cli
