// Authenticator: optional API keys for the inference routes, always-required keys for the
// admin routes, and per-key request-rate limits.
//
//   - Keys come as `Authorization: Bearer <key>`. They are compared in constant time: each
//     configured key is kept as a keyed 128-bit digest (random per-process secret), the
//     presented key is digested the same way, and the digests are compared without early exit
//     against every configured key, so response timing reveals nothing about any key.
//   - Without API keys configured, inference routes are open (the server binds loopback by
//     default). Health and metrics routes are public unless configured private.
//   - Admin routes (/admin/...) always need an admin key; with none configured they are
//     refused (403), so a server is never administrable by accident.
//   - Each key may carry its own rate (requests per second, token bucket; fractional rates
//     such as 0.1 allow one request per ten seconds); over it: 429.
//
// Thread-safety: Check() is safe from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "server/http_server.h"

namespace tailcut {

struct AuthOptions {
  // File with one API key per line: `<key>` or `<key> <requests_per_second>`; `#` starts a
  // comment. Empty = none.
  std::string api_keys_file;
  // More API keys, comma-separated (handy as TAILCUT_AUTH_API_KEYS).
  std::string api_keys;
  // Keys for the admin routes, comma-separated. Without any, admin routes are refused.
  std::string admin_keys;
  // Default per-key rate limit in requests per second (keys in the file may set their own);
  // 0 = unlimited. Bursts of up to one second's worth are allowed, and of one request at
  // least (a rate under 1/s allows one request, then one per 1/rate seconds).
  int64_t rate_limit_per_s = 0;
  // Whether health (/health, /v2/health/*) and metrics (/metrics) routes need a key when API
  // keys are configured.
  bool public_health = true;
  bool public_metrics = true;
};

class Authenticator {
 public:
  enum class RouteClass { kInference, kHealth, kMetrics, kAdmin };

  // Reads the key file. Errors name the file and line; the keys themselves are never logged.
  static Result<std::unique_ptr<Authenticator>> Create(const AuthOptions& options,
                                                       const Clock& clock = SystemClock::Get());

  static RouteClass Classify(std::string_view path);

  // OK, Unauthenticated (no or unknown key: 401), PermissionDenied (an API key on an admin
  // route, or admin routes disabled: 403), or ResourceExhausted (over the key's rate: 429).
  Status Check(const HttpExchange& exchange, RouteClass route);
  // The same for a request from another transport (gRPC's `authorization` metadata):
  // `authorization` is the header's value, empty when absent.
  Status Check(std::string_view authorization, RouteClass route);

  bool api_keys_required() const { return !api_keys_.empty(); }
  size_t api_key_count() const { return api_keys_.size(); }
  size_t admin_key_count() const { return admin_keys_.size(); }

 private:
  struct Key {
    uint64_t digest[2];
    double rate_per_s = 0;  // 0 = unlimited.
    std::mutex mutex;       // Guards the bucket.
    double tokens = 0;
    int64_t last_micros = 0;
  };
  Authenticator(const AuthOptions& options, const Clock& clock);
  void Digest(std::string_view key, uint64_t out[2]) const;
  // Index of the matching key or -1; examines every key whatever matches.
  int Match(const std::vector<std::unique_ptr<Key>>& keys, std::string_view presented) const;
  bool TakeToken(Key& key);

  const AuthOptions options_;
  const Clock& clock_;
  uint64_t secret_[2];
  std::vector<std::unique_ptr<Key>> api_keys_;
  std::vector<std::unique_ptr<Key>> admin_keys_;
};

}  // namespace tailcut
