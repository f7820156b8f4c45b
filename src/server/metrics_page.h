#pragma once
// The /metrics page: engine metrics (requests, tokens, latency histograms, speculative
// counters) and HTTP counters, in Prometheus text format. Names carry the "specserve:" prefix
// the way vLLM uses "vllm:"; the speculative ones keep vLLM's spec_decode_* names.
#include <string>

#include "engine/metrics.h"
#include "server/http_counters.h"
#include "server/serving_state.h"

namespace specserve::server {

// `engine` is null while loading (engine families are then omitted).
std::string render_metrics_page(const engine::EngineMetrics* engine, const HttpCounters& http,
                                const ServingState& state);

}  // namespace specserve::server
