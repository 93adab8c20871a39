// HTTP error mapping: the one place where Status codes become HTTP statuses and where each
// API's error body shape is written, so every route reports failures the same way.
//
// Bodies:
//   OpenAI  {"error": {"message": "...", "type": "invalid_request_error", "param": null,
//                      "code": "<status code name>"}}
//   TEI     {"error": "...", "error_type": "Validation" | "Overloaded" | ...}
//   KServe  {"error": "..."}  (plus "type", which KServe clients ignore)
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "server/http_server.h"

namespace tailcut {

enum class ErrorStyle { kOpenAi, kTei, kKServe };

unsigned HttpStatusFor(Status::Code code);
// The error style of the API a path belongs to, for answers given before any API's handler
// runs (no route, method not allowed): KServe under /v2, TEI for its routes, else OpenAI.
// A client library formats the body it expects (tritonclient fails on an object under
// "error").
ErrorStyle ErrorStyleForPath(std::string_view path);
// A complete error response: status, JSON body, and Retry-After for overload answers.
// `http_status` overrides the status HttpStatusFor() picks (e.g. 405), so that the body's
// "code" still agrees with the status line.
HttpResponse ErrorResponse(const Status& status, ErrorStyle style, unsigned http_status = 0);
// Seconds a client should wait after a 429/503 before retrying.
constexpr int kRetryAfterSeconds = 1;

}  // namespace tailcut
