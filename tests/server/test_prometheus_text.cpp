// Prometheus text exposition: families, labels, escaping, cumulative histograms.
#include <gtest/gtest.h>

#include "server/metrics_page.h"
#include "server/prometheus_text.h"

using namespace specserve;
using namespace specserve::server;

TEST(PrometheusText, CounterAndLabels) {
  PrometheusWriter w;
  w.counter("x_total", "Things\nseen", 3);
  w.family("y", "gauge", "Y");
  w.sample("y", {{"path", "a\"b\\c\nd"}}, 1.5);
  EXPECT_EQ(w.text(),
            "# HELP x_total Things\\nseen\n# TYPE x_total counter\nx_total 3\n"
            "# HELP y Y\n# TYPE y gauge\ny{path=\"a\\\"b\\\\c\\nd\"} 1.5\n");
}

TEST(PrometheusText, HistogramIsCumulative) {
  engine::Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(0.5);
  h.observe(7);
  PrometheusWriter w;
  w.histogram("lat_seconds", "Latency", h.snapshot());
  const std::string& t = w.text();
  EXPECT_NE(t.find("lat_seconds_bucket{le=\"0.1\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{le=\"1\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_count 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_sum 7.65\n"), std::string::npos) << t;
}

TEST(PrometheusText, MetricsPageHasRequiredFamilies) {
  engine::EngineMetrics m;
  m.record_spec_round(4, 2);
  m.record_spec_round(4, 3);
  m.preemptions = 3;
  m.requests_swapped = 1;
  m.swap_out_bytes = 4096;
  m.swap_in_bytes = 1024;
  m.prefix_cache_queries = 300;
  m.prefix_cache_hits = 256;
  m.prefix_cache_blocks = 40;
  HttpCounters http;
  http.count_status(400);
  ServingState state;
  std::string page = render_metrics_page(&m, http, state);
  for (const char* name : {"specserve:num_requests_running",
                           "specserve:num_requests_waiting",
                           "specserve:requests_total",
                           "specserve:prompt_tokens_total",
                           "specserve:generation_tokens_total",
                           "specserve:time_to_first_token_seconds_bucket",
                           "specserve:inter_token_latency_seconds_bucket",
                           "specserve:spec_decode_num_drafts_total 2",
                           "specserve:spec_decode_num_draft_tokens_total 8",
                           "specserve:spec_decode_num_accepted_tokens_total 5",
                           "specserve:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 2",
                           "specserve:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 1",
                           "specserve:http_responses_total{code=\"400\"} 1",
                           "specserve:num_preemptions_total 3",
                           "specserve:num_requests_swapped 1",
                           "specserve:swap_bytes_total{direction=\"out\"} 4096",
                           "specserve:swap_bytes_total{direction=\"in\"} 1024",
                           "specserve:swap_space_used_bytes",
                           "# TYPE specserve:prefix_cache_queries_total counter\n",
                           "specserve:prefix_cache_queries_total 300\n",
                           "# TYPE specserve:prefix_cache_hits_total counter\n",
                           "specserve:prefix_cache_hits_total 256\n",
                           "# TYPE specserve:prefix_cache_blocks gauge\n",
                           "specserve:prefix_cache_blocks 40\n"}) {
    EXPECT_NE(page.find(name), std::string::npos) << name;
  }
  // While loading, only the HTTP families are present.
  std::string loading = render_metrics_page(nullptr, http, state);
  EXPECT_EQ(loading.find("requests_total"), std::string::npos);
  EXPECT_NE(loading.find("specserve:model_ready 0"), std::string::npos);
}
