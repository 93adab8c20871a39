#include "server/router.h"

#include "core/stage_timings.h"
#include "server/http_errors.h"

namespace tailcut {
namespace {

// Routing errors never reach an API's Finish(); they still carry Server-Timing, as every
// response does, so clients that parse it need no special case.
void RespondWithTiming(const Clock& clock, const HttpExchangePtr& exchange,
                       HttpResponse response) {
  StageTimings t;
  t.total_micros = clock.NowMicros() - exchange->received_micros();
  response.headers.emplace_back("Server-Timing", t.ToServerTiming());
  exchange->Respond(std::move(response));
}

}  // namespace

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    const size_t start = i;
    while (i < path.size() && path[i] != '/') ++i;
    if (i > start) out.push_back(path.substr(start, i - start));
  }
  return out;
}

void Router::Add(std::string method, const std::string& pattern, HttpHandler handler) {
  Route r;
  r.method = std::move(method);
  for (auto s : SplitPath(pattern)) r.segments.emplace_back(s);
  r.handler = std::move(handler);
  routes_.push_back(std::move(r));
}

bool Router::Match(const Route& route, const std::vector<std::string_view>& path,
                   HttpExchange* exchange) {
  if (route.segments.size() != path.size()) return false;
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& seg = route.segments[i];
    const bool param = seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
    if (!param && seg != path[i]) return false;
  }
  if (exchange) {
    for (size_t i = 0; i < path.size(); ++i) {
      const std::string& seg = route.segments[i];
      if (seg.size() > 2 && seg.front() == '{' && seg.back() == '}') {
        exchange->params[seg.substr(1, seg.size() - 2)] = std::string(path[i]);
      }
    }
  }
  return true;
}

void Router::Dispatch(const HttpExchangePtr& exchange) const {
  const auto path = SplitPath(exchange->path());
  const auto method_bsv = exchange->request().method_string();
  const std::string_view method(method_bsv.data(), method_bsv.size());
  std::string allowed;
  for (const Route& r : routes_) {
    if (!Match(r, path, nullptr)) continue;
    if (r.method == method || (method == "HEAD" && r.method == "GET")) {
      Match(r, path, exchange.get());
      r.handler(exchange);
      return;
    }
    if (allowed.find(r.method) == std::string::npos) {
      allowed += (allowed.empty() ? "" : ", ") + r.method;
    }
  }
  if (!allowed.empty()) {
    HttpResponse res =
        ErrorResponse(Status(Status::Code::kInvalidArgument,
                             "method " + std::string(method) + " is not allowed on " +
                                 std::string(exchange->path()) + "; allowed: " + allowed),
                      ErrorStyleForPath(exchange->path()), 405);
    res.headers.emplace_back("Allow", allowed);
    RespondWithTiming(clock_, exchange, std::move(res));
    return;
  }
  RespondWithTiming(clock_, exchange,
                    ErrorResponse(Status::NotFound("no route for " + std::string(method) + " " +
                                                   std::string(exchange->path())),
                                  ErrorStyleForPath(exchange->path())));
}

}  // namespace tailcut
