#include "server/http_errors.h"

#include <nlohmann/json.hpp>

namespace tailcut {

unsigned HttpStatusFor(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return 200;
    case Status::Code::kInvalidArgument: return 400;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kPayloadTooLarge: return 413;
    case Status::Code::kResourceExhausted: return 429;
    case Status::Code::kDeadlineExceeded: return 504;
    case Status::Code::kUnavailable: return 503;
    case Status::Code::kFailedPrecondition: return 409;
    case Status::Code::kUnauthenticated: return 401;
    case Status::Code::kPermissionDenied: return 403;
    case Status::Code::kInternal: return 500;
    // Nobody reads it (the client is gone); logs and metrics tell it from a server error.
    case Status::Code::kCancelled: return 499;
  }
  return 500;
}

ErrorStyle ErrorStyleForPath(std::string_view path) {
  if (path == "/v2" || path.starts_with("/v2/")) return ErrorStyle::kKServe;
  for (std::string_view tei :
       {"/", "/embed", "/embed_all", "/rerank", "/info", "/health", "/tokenize"}) {
    if (path == tei) return ErrorStyle::kTei;
  }
  return ErrorStyle::kOpenAi;
}

namespace {

// TEI's error_type vocabulary.
const char* TeiErrorType(Status::Code code) {
  switch (code) {
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotFound:
    case Status::Code::kPayloadTooLarge: return "Validation";
    case Status::Code::kResourceExhausted: return "Overloaded";
    case Status::Code::kUnavailable: return "Unhealthy";
    case Status::Code::kDeadlineExceeded: return "Timeout";
    default: return "Backend";
  }
}

}  // namespace

HttpResponse ErrorResponse(const Status& status, ErrorStyle style, unsigned http_status) {
  HttpResponse res;
  res.status = http_status != 0 ? http_status : HttpStatusFor(status.code());
  const std::string type(Status::CodeName(status.code()));
  nlohmann::json body;
  switch (style) {
    case ErrorStyle::kOpenAi:
      body = {{"error",
               {{"message", status.message()},
                {"type", type},
                {"param", nullptr},
                {"code", res.status}}}};
      break;
    case ErrorStyle::kTei:
      body = {{"error", status.message()}, {"error_type", TeiErrorType(status.code())}};
      break;
    case ErrorStyle::kKServe:
      body = {{"error", status.message()}, {"type", type}};
      break;
  }
  // Messages may quote client input; replace invalid UTF-8 rather than fail to answer.
  res.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (res.status == 401) res.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (res.status == 429 || res.status == 503) {
    res.headers.emplace_back("Retry-After", std::to_string(kRetryAfterSeconds));
  }
  return res;
}

}  // namespace tailcut
