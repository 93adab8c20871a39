// Status: the outcome of an operation that can fail, LevelDB-style: a code and a message,
// cheap to return when OK. Result<T> carries a value or a non-OK Status.
//
// The codes are transport-neutral; src/server maps them to HTTP statuses in one place.
//
// Thread-safety: immutable value types; safe to copy between threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tailcut {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,     // The caller sent something malformed or out of range (HTTP 400).
    kNotFound,            // A named thing (model, variant, route) does not exist (HTTP 404).
    kPayloadTooLarge,     // Input exceeds a configured size limit (HTTP 413).
    kResourceExhausted,   // A bounded queue or rate limit is full; retry later (HTTP 429).
    kDeadlineExceeded,    // The request's deadline passed before it could be served (HTTP 504).
    kUnavailable,         // Not ready, shutting down, or a dependency is down (HTTP 503).
    kFailedPrecondition,  // The system is not in a state to do this (HTTP 409/400).
    kUnauthenticated,     // Missing or wrong credentials (HTTP 401).
    kPermissionDenied,    // Credentials valid but not allowed (HTTP 403).
    kInternal,            // A bug or an unexpected failure of a dependency (HTTP 500).
    kCancelled,           // The client went away before its answer (HTTP 499, as nginx logs it).
  };

  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status PayloadTooLarge(std::string m) { return {Code::kPayloadTooLarge, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {Code::kResourceExhausted, std::move(m)};
  }
  static Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {Code::kFailedPrecondition, std::move(m)};
  }
  static Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: <message>", or "OK".
  std::string ToString() const;
  // Stable snake_case name of the code, used as the error "type" in JSON bodies.
  static std::string_view CodeName(Code code);

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design.
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design.
    assert(!status_.ok() && "Result built from an OK status has no value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tailcut
