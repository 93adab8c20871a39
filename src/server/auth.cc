#include "server/auth.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

namespace tailcut {
namespace {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, ',')) {
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

// A key's bucket holds one second's worth of requests, and at least one: with less, a key
// limited to under one request per second could never take a whole token.
double BucketCapacity(double rate_per_s) { return std::max(1.0, rate_per_s); }

}  // namespace

Authenticator::Authenticator(const AuthOptions& options, const Clock& clock)
    : options_(options), clock_(clock) {
  std::random_device rd;
  secret_[0] = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  secret_[1] = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

void Authenticator::Digest(std::string_view key, uint64_t out[2]) const {
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, secret_[0]);
  XXH3_128bits_update(&state, &secret_[1], sizeof(secret_[1]));
  XXH3_128bits_update(&state, key.data(), key.size());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  out[0] = h.high64;
  out[1] = h.low64;
}

Result<std::unique_ptr<Authenticator>> Authenticator::Create(const AuthOptions& options,
                                                            const Clock& clock) {
  std::unique_ptr<Authenticator> a(new Authenticator(options, clock));
  auto add = [&a](std::vector<std::unique_ptr<Key>>& to, const std::string& key, double rate) {
    auto k = std::make_unique<Key>();
    a->Digest(key, k->digest);
    k->rate_per_s = rate;
    k->tokens = BucketCapacity(rate);
    k->last_micros = a->clock_.NowMicros();
    to.push_back(std::move(k));
  };
  const double default_rate = static_cast<double>(options.rate_limit_per_s);
  if (!options.api_keys_file.empty()) {
    std::ifstream in(options.api_keys_file);
    if (!in) {
      return Status::InvalidArgument("cannot read API key file '" + options.api_keys_file + "'");
    }
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
      std::istringstream fields(line);
      std::string key, rate_text, extra;
      if (!(fields >> key)) continue;
      double rate = default_rate;
      if (fields >> rate_text) {
        try {
          size_t used = 0;
          rate = std::stod(rate_text, &used);
          if (used != rate_text.size() || rate < 0) throw std::invalid_argument("rate");
        } catch (const std::exception&) {
          return Status::InvalidArgument("API key file '" + options.api_keys_file + "' line " +
                                         std::to_string(number) +
                                         ": the rate must be a non-negative number");
        }
      }
      if (fields >> extra) {
        return Status::InvalidArgument("API key file '" + options.api_keys_file + "' line " +
                                       std::to_string(number) +
                                       ": expected '<key> [<requests per second>]'");
      }
      add(a->api_keys_, key, rate);
    }
  }
  for (const auto& key : SplitCommas(options.api_keys)) add(a->api_keys_, key, default_rate);
  for (const auto& key : SplitCommas(options.admin_keys)) add(a->admin_keys_, key, 0);
  return a;
}

Authenticator::RouteClass Authenticator::Classify(std::string_view path) {
  if (path.starts_with("/admin/") || path == "/admin") return RouteClass::kAdmin;
  if (path == "/health" || path.starts_with("/v2/health/")) return RouteClass::kHealth;
  if (path == "/metrics") return RouteClass::kMetrics;
  return RouteClass::kInference;
}

int Authenticator::Match(const std::vector<std::unique_ptr<Key>>& keys,
                         std::string_view presented) const {
  uint64_t d[2];
  Digest(presented, d);
  int found = -1;
  for (size_t i = 0; i < keys.size(); ++i) {
    // No early exit and no data-dependent branch: the same work for every key.
    const uint64_t diff = (keys[i]->digest[0] ^ d[0]) | (keys[i]->digest[1] ^ d[1]);
    const int match = static_cast<int>(diff == 0);
    found = match * static_cast<int>(i) + (1 - match) * found;
  }
  return found;
}

bool Authenticator::TakeToken(Key& key) {
  if (key.rate_per_s <= 0) return true;
  std::lock_guard<std::mutex> lock(key.mutex);
  const int64_t now = clock_.NowMicros();
  // Fractional rates refill fractional tokens: at 0.5/s one request per two seconds.
  const double elapsed_s = static_cast<double>(std::max<int64_t>(0, now - key.last_micros)) / 1e6;
  key.tokens = std::min(BucketCapacity(key.rate_per_s), key.tokens + key.rate_per_s * elapsed_s);
  key.last_micros = now;
  if (key.tokens < 1.0) return false;
  key.tokens -= 1.0;
  return true;
}

Status Authenticator::Check(const HttpExchange& exchange, RouteClass route) {
  return Check(exchange.header("Authorization"), route);
}

Status Authenticator::Check(std::string_view header, RouteClass route) {
  if (route == RouteClass::kHealth && options_.public_health) return Status::Ok();
  if (route == RouteClass::kMetrics && options_.public_metrics) return Status::Ok();
  if (route != RouteClass::kAdmin && api_keys_.empty()) return Status::Ok();
  if (route == RouteClass::kAdmin && admin_keys_.empty()) {
    return Status::PermissionDenied(
        "admin routes are disabled: configure auth.admin_keys to use them");
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (header.size() <= kBearer.size() || !header.starts_with(kBearer)) {
    return Status::Unauthenticated(
        "missing API key: send 'Authorization: Bearer <key>'");
  }
  const std::string_view presented = header.substr(kBearer.size());
  if (route == RouteClass::kAdmin) {
    if (Match(admin_keys_, presented) >= 0) return Status::Ok();
    if (Match(api_keys_, presented) >= 0) {
      return Status::PermissionDenied("this key may not use admin routes");
    }
    return Status::Unauthenticated("invalid API key");
  }
  int index = Match(api_keys_, presented);
  if (index < 0) {
    // Admin keys may use every route, without a rate limit.
    if (Match(admin_keys_, presented) >= 0) return Status::Ok();
    return Status::Unauthenticated("invalid API key");
  }
  if (!TakeToken(*api_keys_[static_cast<size_t>(index)])) {
    return Status::ResourceExhausted("rate limit of this API key exceeded");
  }
  return Status::Ok();
}

}  // namespace tailcut
