#include "server/auth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/server/fake_exchange.h"

namespace tailcut {
namespace {

using RouteClass = Authenticator::RouteClass;

FakeExchange Request(const std::string& path, const std::string& key = "") {
  FakeExchange ex("POST", path);
  if (!key.empty()) ex.With("Authorization", "Bearer " + key);
  return ex;
}

std::unique_ptr<Authenticator> Make(const AuthOptions& options, const Clock& clock) {
  auto a = Authenticator::Create(options, clock);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(a).value() : nullptr;
}

// A key file named after the test and the process, removed at the end of the test.
class KeyFile {
 public:
  explicit KeyFile(const std::string& text)
      : path_(std::filesystem::path(::testing::TempDir()) /
              ("tailcut_auth_test_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::ofstream(path_) << text;
  }
  ~KeyFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(AuthenticatorTest, ClassifiesRoutes) {
  EXPECT_EQ(Authenticator::Classify("/admin/models/x/reload"), RouteClass::kAdmin);
  EXPECT_EQ(Authenticator::Classify("/admin"), RouteClass::kAdmin);
  EXPECT_EQ(Authenticator::Classify("/administrator"), RouteClass::kInference);
  EXPECT_EQ(Authenticator::Classify("/health"), RouteClass::kHealth);
  EXPECT_EQ(Authenticator::Classify("/v2/health/ready"), RouteClass::kHealth);
  EXPECT_EQ(Authenticator::Classify("/metrics"), RouteClass::kMetrics);
  EXPECT_EQ(Authenticator::Classify("/v1/embeddings"), RouteClass::kInference);
  EXPECT_EQ(Authenticator::Classify("/v2/models/m/infer"), RouteClass::kInference);
}

TEST(AuthenticatorTest, WithoutKeysInferenceIsOpenAndAdminIsRefused) {
  ManualClock clock;
  auto a = Make({}, clock);
  EXPECT_FALSE(a->api_keys_required());
  EXPECT_TRUE(a->Check(Request("/v1/embeddings"), RouteClass::kInference).ok());
  const Status admin = a->Check(Request("/admin/models"), RouteClass::kAdmin);
  EXPECT_EQ(admin.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(admin.message().find("admin routes are disabled"), std::string::npos);
}

TEST(AuthenticatorTest, ApiKeysAreChecked) {
  ManualClock clock;
  AuthOptions options;
  options.api_keys = "alpha, beta";
  auto a = Make(options, clock);
  EXPECT_EQ(a->api_key_count(), 2u);
  EXPECT_TRUE(a->Check(Request("/v1/embeddings", "alpha"), RouteClass::kInference).ok());
  EXPECT_TRUE(a->Check(Request("/v1/embeddings", "beta"), RouteClass::kInference).ok());
  EXPECT_EQ(a->Check(Request("/v1/embeddings", "gamma"), RouteClass::kInference).code(),
            Status::Code::kUnauthenticated);
  EXPECT_EQ(a->Check(Request("/v1/embeddings", "alph"), RouteClass::kInference).code(),
            Status::Code::kUnauthenticated);
  EXPECT_EQ(a->Check(Request("/v1/embeddings"), RouteClass::kInference).code(),
            Status::Code::kUnauthenticated);
  FakeExchange basic("POST", "/v1/embeddings");
  basic.With("Authorization", "Basic alpha");
  EXPECT_EQ(a->Check(basic, RouteClass::kInference).code(), Status::Code::kUnauthenticated);
  FakeExchange empty("POST", "/v1/embeddings");
  empty.With("Authorization", "Bearer ");
  EXPECT_EQ(a->Check(empty, RouteClass::kInference).code(), Status::Code::kUnauthenticated);
}

TEST(AuthenticatorTest, HealthAndMetricsArePublicUnlessConfigured) {
  ManualClock clock;
  AuthOptions options;
  options.api_keys = "alpha";
  auto open = Make(options, clock);
  EXPECT_TRUE(open->Check(Request("/health"), RouteClass::kHealth).ok());
  EXPECT_TRUE(open->Check(Request("/metrics"), RouteClass::kMetrics).ok());
  options.public_health = false;
  options.public_metrics = false;
  auto closed = Make(options, clock);
  EXPECT_EQ(closed->Check(Request("/health"), RouteClass::kHealth).code(),
            Status::Code::kUnauthenticated);
  EXPECT_EQ(closed->Check(Request("/metrics"), RouteClass::kMetrics).code(),
            Status::Code::kUnauthenticated);
  EXPECT_TRUE(closed->Check(Request("/metrics", "alpha"), RouteClass::kMetrics).ok());
}

TEST(AuthenticatorTest, AdminRoutesNeedAnAdminKey) {
  ManualClock clock;
  AuthOptions options;
  options.api_keys = "user";
  options.admin_keys = "root";
  options.rate_limit_per_s = 1;
  auto a = Make(options, clock);
  EXPECT_EQ(a->admin_key_count(), 1u);
  EXPECT_TRUE(a->Check(Request("/admin/models", "root"), RouteClass::kAdmin).ok());
  EXPECT_EQ(a->Check(Request("/admin/models", "user"), RouteClass::kAdmin).code(),
            Status::Code::kPermissionDenied);
  EXPECT_EQ(a->Check(Request("/admin/models", "nobody"), RouteClass::kAdmin).code(),
            Status::Code::kUnauthenticated);
  EXPECT_EQ(a->Check(Request("/admin/models"), RouteClass::kAdmin).code(),
            Status::Code::kUnauthenticated);
  // Admin keys may use the inference routes too, without the API keys' rate limit.
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(a->Check(Request("/v1/embeddings", "root"), RouteClass::kInference).ok()) << i;
  }
}

TEST(AuthenticatorTest, RateLimitAllowsABurstOfOneSecondThenRefills) {
  ManualClock clock;
  AuthOptions options;
  options.api_keys = "k";
  options.rate_limit_per_s = 3;
  auto a = Make(options, clock);
  auto check = [&] { return a->Check(Request("/v1/embeddings", "k"), RouteClass::kInference); };
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(check().ok()) << i;
  const Status over = check();
  EXPECT_EQ(over.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(over.message().find("rate limit"), std::string::npos);
  clock.AdvanceMicros(333'334);  // One token's worth at 3/s.
  EXPECT_TRUE(check().ok());
  EXPECT_FALSE(check().ok());
  // An idle key refills to one second's worth, not more.
  clock.AdvanceMicros(60'000'000);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(check().ok()) << i;
  EXPECT_FALSE(check().ok());
}

// A rate under one request per second made the bucket hold less than one token, so the key
// was refused forever.
TEST(AuthenticatorTest, FractionalRateAllowsOneRequestPerInterval) {
  ManualClock clock;
  KeyFile file("slow 0.5  # one request per two seconds\n"
               "slower 0.1\n");
  AuthOptions options;
  options.api_keys_file = file.path();
  auto a = Make(options, clock);
  ASSERT_EQ(a->api_key_count(), 2u);
  auto check = [&](const std::string& key) {
    return a->Check(Request("/v1/embeddings", key), RouteClass::kInference).ok();
  };
  EXPECT_TRUE(check("slow"));
  EXPECT_FALSE(check("slow"));
  clock.AdvanceMicros(1'000'000);
  EXPECT_FALSE(check("slow"));  // Half a token.
  clock.AdvanceMicros(1'000'000);
  EXPECT_TRUE(check("slow"));
  EXPECT_FALSE(check("slow"));
  // Long idle: still a burst of one, not of the idle time's worth.
  clock.AdvanceMicros(3'600'000'000);
  EXPECT_TRUE(check("slow"));
  EXPECT_FALSE(check("slow"));

  EXPECT_TRUE(check("slower"));
  clock.AdvanceMicros(9'999'000);
  EXPECT_FALSE(check("slower"));
  clock.AdvanceMicros(1'000);
  EXPECT_TRUE(check("slower"));
}

TEST(AuthenticatorTest, EachKeyHasItsOwnBucket) {
  ManualClock clock;
  KeyFile file("a 1\nb 1\nunlimited 0\n");
  AuthOptions options;
  options.api_keys_file = file.path();
  options.rate_limit_per_s = 1;
  auto a = Make(options, clock);
  auto check = [&](const std::string& key) {
    return a->Check(Request("/v1/embeddings", key), RouteClass::kInference).ok();
  };
  EXPECT_TRUE(check("a"));
  EXPECT_FALSE(check("a"));
  EXPECT_TRUE(check("b"));
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(check("unlimited")) << i;
}

TEST(AuthenticatorTest, KeyFileErrorsNameTheLineNotTheKey) {
  ManualClock clock;
  {
    KeyFile file("good\nsecret-key fast\n");
    AuthOptions options;
    options.api_keys_file = file.path();
    auto a = Authenticator::Create(options, clock);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(a.status().message().find("line 2"), std::string::npos) << a.status().message();
    EXPECT_EQ(a.status().message().find("secret-key"), std::string::npos) << a.status().message();
  }
  {
    KeyFile file("k -1\n");
    AuthOptions options;
    options.api_keys_file = file.path();
    EXPECT_FALSE(Authenticator::Create(options, clock).ok());
  }
  {
    KeyFile file("k 1 extra\n");
    AuthOptions options;
    options.api_keys_file = file.path();
    auto a = Authenticator::Create(options, clock);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find("expected '<key> [<requests per second>]'"),
              std::string::npos);
  }
  AuthOptions missing;
  missing.api_keys_file = "/nonexistent/tailcut/keys";
  EXPECT_FALSE(Authenticator::Create(missing, clock).ok());
}

}  // namespace
}  // namespace tailcut
