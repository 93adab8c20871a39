// The one place where tailcut's Status codes become gRPC status codes, as KServe v2 and
// Triton answer over gRPC: a malformed request is INVALID_ARGUMENT, an unknown model
// NOT_FOUND, overload (a full queue, a rate limit) and not-ready UNAVAILABLE (the code gRPC
// clients' retry policies retry), a passed deadline DEADLINE_EXCEEDED.
//
// Thread-safety: pure function.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace tailcut {

grpc::Status ToGrpcStatus(const Status& status);

}  // namespace tailcut
