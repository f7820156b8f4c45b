// GET /health, GET /v1/models, GET /metrics.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/metrics_page.h"
#include "server/routes.h"

namespace specserve::server {

namespace {
nlohmann::json model_card(const ModelInfo& info) {
  nlohmann::json card = {{"id", info.id},
                         {"object", "model"},
                         {"created", info.created},
                         {"owned_by", info.owned_by},
                         {"root", info.root},
                         {"max_model_len", info.context_length}};
  if (info.speculative) card["speculative_decoding"] = {{"method", "dflash"}, {"num_speculative_tokens", info.gamma}};
  return card;
}
}  // namespace

void register_info_routes(httplib::Server& svr, RouteContext& ctx) {
  // 503 until the model is loaded (load balancers and ./run.sh wait on this), 200 after.
  svr.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    Phase phase = ctx.state.phase();
    nlohmann::json body;
    switch (phase) {
      case Phase::Ready: body = {{"status", "ok"}}; break;
      case Phase::Loading:
        body = {{"status", "loading"}, {"progress", ctx.state.progress()}, {"detail", ctx.state.progress_text()}};
        break;
      case Phase::Draining: body = {{"status", "shutting_down"}}; break;
      case Phase::Failed: body = {{"status", "failed"}, {"detail", ctx.state.progress_text()}}; break;
    }
    send_json(res, phase == Phase::Ready ? 200 : 503, body);
  });

  svr.Get("/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] {
      auto model = require_model(ctx);
      send_json(res, 200, {{"object", "list"}, {"data", nlohmann::json::array({model_card(model->info())})}});
    });
  });

  svr.Get(R"(/v1/models/(.+))", [&ctx](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      auto model = require_model(ctx);
      check_model_name(req.matches[1].str(), *model);
      send_json(res, 200, model_card(model->info()));
    });
  });

  svr.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    auto model = ctx.state.phase() == Phase::Ready ? ctx.state.model() : nullptr;
    res.set_content(render_metrics_page(model ? &model->metrics() : nullptr, ctx.counters, ctx.state),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace specserve::server
