#include "server/request_dispatcher.h"

#include <memory>
#include <string>
#include <utility>

namespace tailcut {

HttpHandler DispatchToWorkPool(WorkPool& pool, HttpHandler handler, ApiContext& context,
                               const RequestDispatcherOptions& options) {
  // Shared with the queued tasks: one may still wait in the pool when the server that held
  // this handler is gone.
  auto shared = std::make_shared<const HttpHandler>(std::move(handler));
  return [&pool, &context, options, shared](const HttpExchangePtr& exchange) {
    const bool heavy = exchange->request().body().size() >= options.heavy_body_bytes;
    WorkPool::Task task = [shared, exchange] { (*shared)(exchange); };
    if (pool.TrySubmit(heavy ? WorkPool::Lane::kHeavy : WorkPool::Lane::kLight, task)) return;
    context.FinishError(
        exchange, "dispatch", "",
        Status::Unavailable("the server is busy: " + std::to_string(pool.queued()) +
                            " requests are waiting for a CPU; retry later"),
        ErrorStyle::kOpenAi);
  };
}

}  // namespace tailcut
