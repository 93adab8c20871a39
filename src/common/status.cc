#include "common/status.h"

namespace tailcut {

std::string_view Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_request_error";
    case Code::kNotFound:
      return "not_found_error";
    case Code::kPayloadTooLarge:
      return "payload_too_large_error";
    case Code::kResourceExhausted:
      return "overloaded_error";
    case Code::kDeadlineExceeded:
      return "deadline_exceeded_error";
    case Code::kUnavailable:
      return "unavailable_error";
    case Code::kFailedPrecondition:
      return "failed_precondition_error";
    case Code::kUnauthenticated:
      return "authentication_error";
    case Code::kPermissionDenied:
      return "permission_error";
    case Code::kInternal:
      return "internal_error";
    case Code::kCancelled:
      return "cancelled_error";
  }
  return "unknown_error";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(CodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

}  // namespace tailcut
