#include "server/grpc/grpc_status.h"

namespace tailcut {

grpc::Status ToGrpcStatus(const Status& status) {
  using C = Status::Code;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (status.code()) {
    case C::kOk: return grpc::Status::OK;
    case C::kInvalidArgument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    case C::kNotFound: code = grpc::StatusCode::NOT_FOUND; break;
    // Over a configured size limit (too many texts, too long an input): the same request
    // fails again, so not RESOURCE_EXHAUSTED, which clients read as "retry later".
    case C::kPayloadTooLarge: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    // Triton answers a full queue with UNAVAILABLE; retrying after a moment is right.
    case C::kResourceExhausted: code = grpc::StatusCode::UNAVAILABLE; break;
    case C::kDeadlineExceeded: code = grpc::StatusCode::DEADLINE_EXCEEDED; break;
    case C::kUnavailable: code = grpc::StatusCode::UNAVAILABLE; break;
    case C::kFailedPrecondition: code = grpc::StatusCode::FAILED_PRECONDITION; break;
    case C::kUnauthenticated: code = grpc::StatusCode::UNAUTHENTICATED; break;
    case C::kPermissionDenied: code = grpc::StatusCode::PERMISSION_DENIED; break;
    case C::kInternal: code = grpc::StatusCode::INTERNAL; break;
    case C::kCancelled: code = grpc::StatusCode::CANCELLED; break;
  }
  return grpc::Status(code, status.message());
}

}  // namespace tailcut
