// GET /health, GET /v1/models, GET /v1/models/{id}, GET /metrics. Cheap and non-blocking: they run
// on the event loop, so /health answers whatever the handler threads are busy with.
#include <nlohmann/json.hpp>

#include "server/metrics_page.h"
#include "server/routes.h"

namespace specserve::server {

namespace {
// "root" names the model, never the checkpoint's directory (a server path is nobody's business).
nlohmann::json model_card(const ModelInfo& info) {
  nlohmann::json card = {{"id", info.id},           {"object", "model"},
                         {"created", info.created}, {"owned_by", info.owned_by},
                         {"root", info.id},         {"max_model_len", info.context_length}};
  if (info.speculative) card["speculative_decoding"] = {{"method", "dflash"}, {"num_speculative_tokens", info.gamma}};
  return card;
}
}  // namespace

void register_info_routes(Router& router, RouteContext& ctx) {
  // 503 until the model is loaded (load balancers and ./run.sh wait on this), 200 after.
  router.add(
      {"GET", "/health", false, true, [&ctx](const HttpRequest&) -> RouteResult {
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
         return json_response(phase == Phase::Ready ? 200 : 503, body);
       }});

  router.add({"GET", "/v1/models", false, true, [&ctx](const HttpRequest&) {
                return guarded([&]() -> RouteResult {
                  auto model = require_model(ctx);
                  return json_response(
                      200, {{"object", "list"}, {"data", nlohmann::json::array({model_card(model->info())})}});
                });
              }});

  router.add({"GET", "/v1/models/", true, true, [&ctx](const HttpRequest& req) {
                return guarded([&]() -> RouteResult {
                  auto model = require_model(ctx);
                  check_model_name(req.path.substr(std::string("/v1/models/").size()), *model);
                  return json_response(200, model_card(model->info()));
                });
              }});

  router.add({"GET", "/metrics", false, true, [&ctx](const HttpRequest&) -> RouteResult {
                auto model = ctx.state.phase() == Phase::Ready ? ctx.state.model() : nullptr;
                HttpResponse r;
                r.content_type = "text/plain; version=0.0.4; charset=utf-8";
                r.body = render_metrics_page(model ? &model->metrics() : nullptr, ctx.counters, ctx.state);
                return r;
              }});
}

}  // namespace specserve::server
