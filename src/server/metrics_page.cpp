#include "server/metrics_page.h"

#include <string>

#include "server/prometheus_text.h"

namespace specserve::server {

namespace {
double load(const std::atomic<uint64_t>& v) { return static_cast<double>(v.load(std::memory_order_relaxed)); }
double load(const std::atomic<int64_t>& v) { return static_cast<double>(v.load(std::memory_order_relaxed)); }
}  // namespace

std::string render_metrics_page(const engine::EngineMetrics* m, const HttpCounters& http, const ServingState& state) {
  PrometheusWriter w;
  const std::string p = "specserve:";
  w.gauge(p + "model_ready", "1 when the model is loaded and requests are served",
          state.phase() == Phase::Ready ? 1 : 0);

  w.family(p + "http_responses_total", "counter", "HTTP responses by status code");
  for (int code = 100; code < 600; ++code) {
    double n = load(http.responses_by_status[code]);
    if (n > 0) w.sample(p + "http_responses_total", {{"code", std::to_string(code)}}, n);
  }
  w.gauge(p + "http_open_streams", "SSE responses currently streaming", load(http.open_streams));
  w.counter(p + "http_client_disconnects_total", "Clients that went away before their response ended",
            load(http.client_disconnects));
  w.gauge(p + "http_open_connections", "Client connections open", load(http.open_connections));
  w.counter(p + "http_connections_refused_total", "Connections answered 503 because --max-connections were open",
            load(http.connections_refused));
  w.counter(p + "http_request_timeouts_total", "Requests whose head or body did not arrive in time (408)",
            load(http.request_timeouts));

  if (!m) return w.text();

  w.counter(p + "requests_total", "Generation requests accepted by the engine", load(m->requests_received));
  w.family(p + "requests_finished_total", "counter", "Finished generation requests by finish reason");
  for (int r = 0; r < engine::kNumFinishReasons; ++r) {
    w.sample(p + "requests_finished_total",
             {{"finished_reason", engine::finish_reason_name(static_cast<engine::FinishReason>(r))}},
             load(m->requests_finished[r]));
  }
  w.counter(p + "requests_rejected_total", "Requests refused because the queue was full", load(m->requests_rejected));
  w.gauge(p + "num_requests_running", "Requests admitted to the engine (holding KV / state, or swapped out)",
          load(m->requests_running));
  w.gauge(p + "num_requests_waiting", "Requests queued for admission", load(m->requests_waiting));
  w.counter(p + "prompt_tokens_total", "Prompt tokens processed", load(m->prompt_tokens));
  w.counter(p + "generation_tokens_total", "Tokens generated", load(m->generation_tokens));
  w.histogram(p + "time_to_first_token_seconds", "Time from arrival to the first generated token",
              m->time_to_first_token.snapshot());
  w.histogram(p + "inter_token_latency_seconds",
              "Time between generated tokens (a step that emits k tokens counts k gaps of 1/k of it)",
              m->inter_token_latency.snapshot());
  w.histogram(p + "e2e_request_latency_seconds", "Time from arrival to finish", m->request_latency.snapshot());
  w.counter(p + "engine_steps_total", "Engine steps (target forwards)", load(m->steps));
  w.counter(p + "engine_step_rows_total", "Rows over all target forwards", load(m->step_rows));
  w.counter(p + "engine_prefill_held_steps_total",
            "Steps that kept short prompts' prefill chunks back to run them with later ones (--prefill-hold-steps)",
            load(m->prefill_held_steps));
  w.gauge(p + "kv_blocks_used", "KV-cache blocks in use", load(m->kv_blocks_used));
  w.gauge(p + "kv_blocks_total", "KV-cache blocks available", load(m->kv_blocks_total));
  w.counter(p + "num_preemptions_total", "Sequences swapped out to host memory because KV blocks ran out",
            load(m->preemptions));
  w.gauge(p + "num_requests_swapped", "Requests swapped out to host memory (also counted as running)",
          load(m->requests_swapped));
  w.family(p + "swap_bytes_total", "counter", "Bytes copied between device and host memory by swapping");
  w.sample(p + "swap_bytes_total", {{"direction", "out"}}, load(m->swap_out_bytes));
  w.sample(p + "swap_bytes_total", {{"direction", "in"}}, load(m->swap_in_bytes));
  w.gauge(p + "swap_space_used_bytes", "Host swap space holding swapped-out sequences", load(m->swap_space_used_bytes));
  w.gauge(p + "swap_space_total_bytes", "Host swap space (--swap-space-gib)", load(m->swap_space_total_bytes));
  w.counter(p + "prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache",
            load(m->prefix_cache_queries));
  w.counter(p + "prefix_cache_hits_total", "Prompt tokens found in the prefix cache (their prefill was skipped)",
            load(m->prefix_cache_hits));
  w.gauge(p + "prefix_cache_blocks",
          "KV budget blocks the prefix cache holds (held or not, DeltaNet snapshots included)",
          load(m->prefix_cache_blocks));

  w.counter(p + "spec_decode_num_drafts_total", "Verify rounds (one per speculating sequence per step)",
            load(m->spec_num_drafts));
  w.counter(p + "spec_decode_num_draft_tokens_total", "Draft tokens proposed", load(m->spec_num_draft_tokens));
  w.counter(p + "spec_decode_num_accepted_tokens_total", "Draft tokens accepted", load(m->spec_num_accepted_tokens));
  w.counter(p + "spec_decode_paused_steps_total",
            "Steps whose drafter did not run though sequences could draft (--spec-max-batch, or the draft-length "
            "policy chose 0 drafts for all)",
            load(m->spec_paused_steps));
  w.counter(p + "spec_policy_drafted_total", "Decode rows the draft-length policy gave drafts",
            load(m->spec_policy_drafted));
  w.counter(p + "spec_policy_plain_total", "Decode rows the draft-length policy kept at 0 drafts",
            load(m->spec_policy_plain));
  w.counter(p + "spec_policy_probes_total", "Decode rows given drafts to see their acceptance again",
            load(m->spec_policy_probes));
  w.counter(p + "spec_policy_plain_checks_total",
            "Steps the policy would have drafted in, run as plain rows to time a plain step",
            load(m->spec_policy_plain_checks));
  if (m->step_cost_model.load()) {
    w.family(p + "step_cost_predicted_seconds", "gauge",
             "The draft-length policy's step cost model: predicted seconds of a step or propose");
    for (size_t i = 0; i < m->kStepCostPoints.size(); ++i) {
      const auto& pt = m->kStepCostPoints[i];
      w.sample(p + "step_cost_predicted_seconds",
               {{"kind", pt.kind},
                {"sequences", std::to_string(pt.sequences)},
                {"rows_per_sequence", std::to_string(pt.rows)},
                {"context", std::to_string(pt.context)}},
               m->step_cost_seconds[i].load(std::memory_order_relaxed));
    }
    w.family(p + "step_cost_correction", "gauge",
             "The draft-length policy's measured over predicted step time, for steps with drafts and without");
    w.sample(p + "step_cost_correction", {{"kind", "drafting"}},
             m->spec_policy_correction_drafting.load(std::memory_order_relaxed));
    w.sample(p + "step_cost_correction", {{"kind", "plain"}},
             m->spec_policy_correction_plain.load(std::memory_order_relaxed));
  }
  w.family(p + "spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Draft tokens accepted at each draft position");
  for (int i = 0; i < engine::EngineMetrics::kMaxDraftPositions; ++i) {
    double n = load(m->spec_accepted_per_pos[i]);
    if (n > 0 || i == 0)
      w.sample(p + "spec_decode_num_accepted_tokens_per_pos_total", {{"position", std::to_string(i)}}, n);
  }
  return w.text();
}

}  // namespace specserve::server
