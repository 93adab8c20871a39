#include "server/server_routes.h"

#include "server/kserve_api.h"
#include "server/kserve_generate_api.h"
#include "server/kserve_model_api.h"
#include "server/openai_api.h"
#include "server/openai_generation_api.h"

namespace tailcut {

void AddAllRoutes(Router& router, ApiContext& ctx, const TeiOptions& tei) {
  AddOpenAiRoutes(router, ctx);
  AddOpenAiGenerationRoutes(router, ctx);
  AddTeiRoutes(router, ctx, tei);
  AddKServeRoutes(router, ctx);
  AddKServeModelRoutes(router, ctx);
  AddKServeGenerateRoutes(router, ctx);
  router.Add("GET", "/metrics", [&ctx](const HttpExchangePtr& ex) {
    HttpResponse res;
    res.content_type = "text/plain; version=0.0.4; charset=utf-8";
    const int64_t start = ctx.clock().NowMicros();
    res.body = ctx.registry().Serialize();
    StageTimings t;
    t.serialize_micros = ctx.clock().NowMicros() - start;
    t.total_micros = ctx.clock().NowMicros() - ex->received_micros();
    res.headers.emplace_back("Server-Timing", t.ToServerTiming());
    ex->Respond(std::move(res));  // Not counted in the request metrics it reports.
  });
}

}  // namespace tailcut
