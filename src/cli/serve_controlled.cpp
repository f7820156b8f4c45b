#include "cli/serve_controlled.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "engine/engine.h"

namespace specserve::cli {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

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

LevelRun run_level(server::LoadedModel& model, RecordingServices& served, const ServeControlledOptions& o,
                   server::LoadOptions lo, int concurrency, const std::vector<std::vector<double>>& conditional,
                   const char* what) {
  LevelRun run;
  model.restart_engine(nullptr);
  served.take();  // nothing of an earlier pass is left
  run.plain = server::run_load_level(lo, concurrency);
  std::vector<RecordedRequest> recording =
      served_pass(served, run.plain, fmt::format("plain {}concurrency {}", what, concurrency));
  std::fprintf(stderr, "bench: %sconcurrency %d, plain: %.1f tok/s\n", what, concurrency, run.plain.tokens_per_s);
  if (o.tamper) o.tamper(recording);
  for (size_t a = 0; a < conditional.size(); ++a) {
    const std::string pass = fmt::format("controlled {}concurrency {}, {}", what, concurrency, o.acceptance[a].label());
    ControlledDraftProposer controlled(*model.proposer(), recording, conditional[a], lo.level_salt,
                                       model.info().vocab_size);
    PlainEngineAfter restore(model);
    model.restart_engine(&controlled);
    run.spec.push_back(server::run_load_level(lo, concurrency));
    check_same(served_pass(served, run.spec.back(), pass), recording, pass);
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

  server::LoadOptions lo = o.load;
  lo.prompt_id_vocab = model.info().vocab_size;
  lo.seed_requests = true;
  // Warm-up: the first level once, untimed and with its own prompts (first kernels, pools, step graphs).
  lo.level_salt = splitmix64(o.seed ^ 0x5741524D55500000ull) | 1;
  lo.requests = o.levels.front();
  run_level(model, served, o, lo, o.levels.front(), {conditional.front()}, "warm-up ");
  lo.requests = o.load.requests;
  for (int c : o.levels) {
    lo.level_salt = splitmix64(o.seed ^ splitmix64(static_cast<uint64_t>(c))) | 1;  // the level's prompts
    const LevelRun run = run_level(model, served, o, lo, c, conditional, "");
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
  // (accepted drafts + 1); plain rows: decode rows the draft-length policy kept at 0 drafts.
  s += fmt::format("{:>11} {:>8} {:>16} {:>11} {:>11} {:>8} {:>21} {:>21} {:>10} {:>10}  acceptance-controlled\n",
                   "concurrency", "requests", "acceptance", "plain tok/s", "spec tok/s", "speed-up",
                   "TTFT p50 plain/spec", "ITL p50 plain/spec", "tok/verify", "plain rows");
  for (const ServeControlledRow& row : r.rows) {
    const server::LevelResult& p = row.plain;
    const server::LevelResult& q = row.spec;
    const std::string ttft = fmt::format("{:.1f} / {:.1f} ms", p.ttft_p50 * 1e3, q.ttft_p50 * 1e3);
    const std::string itl = fmt::format("{:.2f} / {:.2f} ms", p.itl_p50 * 1e3, q.itl_p50 * 1e3);
    const std::string per_verify = q.spec_drafts > 0 ? fmt::format("{:.2f}", 1 + q.spec_accepted / q.spec_drafts) : "-";
    const double rows = std::max(0.0, q.spec_drafts) + std::max(0.0, q.spec_plain_rows);
    const std::string plain_rows =
        q.spec_plain_rows >= 0 && rows > 0 ? fmt::format("{:.0f}%", 100 * q.spec_plain_rows / rows) : "-";
    s += fmt::format("{:>11} {:>8} {:>16} {:>11.1f} {:>11.1f} {:>7.2f}x {:>21} {:>21} {:>10} {:>10}  controlled {}\n",
                     row.concurrency, q.requests, row.acceptance, p.tokens_per_s, q.tokens_per_s,
                     p.tokens_per_s > 0 ? q.tokens_per_s / p.tokens_per_s : 0.0, ttft, itl, per_verify, plain_rows,
                     row.acceptance);
  }
  s += "acceptance-controlled serving: every speculative request's output equals its plain output (checked)\n";
  return s;
}

}  // namespace specserve::cli
