#include "server/router.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/server/fake_exchange.h"

namespace tailcut {
namespace {

// A router whose handlers record which route ran and answer 200.
class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Add("GET", "/v1/models");
    Add("GET", "/v1/models/{model}");
    Add("POST", "/v1/embeddings");
    Add("GET", "/v2/models/{name}/versions/{version}");
    Add("POST", "/v2/models/{name}/infer");
    Add("GET", "/v2/models/{name}/ready");
    Add("GET", "/v2/models/special/ready");  // Shadowed: the first matching route wins.
    Add("DELETE", "/admin/cache/{model}");
    Add("POST", "/admin/cache/{model}");
  }

  void Add(const std::string& method, const std::string& pattern) {
    router_.Add(method, pattern, [this, method, pattern](const HttpExchangePtr& ex) {
      ran_ = method + " " + pattern;
      HttpResponse res;
      res.body = "{}";
      ex->Respond(std::move(res));
    });
  }

  std::shared_ptr<FakeExchange> Dispatch(const std::string& method, const std::string& target) {
    ran_.clear();
    auto ex = std::make_shared<FakeExchange>(method, target);
    router_.Dispatch(ex);
    EXPECT_TRUE(ex->response().has_value()) << method << " " << target;
    return ex;
  }

  Router router_;
  std::string ran_;
};

TEST_F(RouterTest, MatchesLiteralRoutes) {
  auto ex = Dispatch("GET", "/v1/models");
  EXPECT_EQ(ran_, "GET /v1/models");
  EXPECT_EQ(ex->response()->status, 200u);
  EXPECT_TRUE(ex->params.empty());
  Dispatch("POST", "/v1/embeddings");
  EXPECT_EQ(ran_, "POST /v1/embeddings");
}

TEST_F(RouterTest, ExtractsPathParameters) {
  auto ex = Dispatch("GET", "/v1/models/all-MiniLM-L6-v2");
  EXPECT_EQ(ran_, "GET /v1/models/{model}");
  EXPECT_EQ(ex->params.at("model"), "all-MiniLM-L6-v2");

  ex = Dispatch("GET", "/v2/models/imgcls/versions/3");
  EXPECT_EQ(ran_, "GET /v2/models/{name}/versions/{version}");
  EXPECT_EQ(ex->params.at("name"), "imgcls");
  EXPECT_EQ(ex->params.at("version"), "3");
  EXPECT_EQ(ex->params.size(), 2u);
}

TEST_F(RouterTest, ParametersMatchOneWholeSegment) {
  // A parameter never spans segments, and never matches an empty one.
  auto ex = Dispatch("POST", "/v2/models/a/b/infer");
  EXPECT_TRUE(ran_.empty());
  EXPECT_EQ(ex->response()->status, 404u);
  ex = Dispatch("POST", "/v2/models//infer");
  EXPECT_TRUE(ran_.empty());
  EXPECT_EQ(ex->response()->status, 404u);
}

TEST_F(RouterTest, QueryStringAndExtraSlashesDoNotMatter) {
  auto ex = Dispatch("GET", "/v1/models/m1?verbose=true");
  EXPECT_EQ(ran_, "GET /v1/models/{model}");
  EXPECT_EQ(ex->params.at("model"), "m1");
  Dispatch("GET", "//v1//models/");
  EXPECT_EQ(ran_, "GET /v1/models");
}

TEST_F(RouterTest, FirstMatchingRouteWins) {
  auto ex = Dispatch("GET", "/v2/models/special/ready");
  EXPECT_EQ(ran_, "GET /v2/models/{name}/ready");
  EXPECT_EQ(ex->params.at("name"), "special");
}

TEST_F(RouterTest, UnknownPathIs404WithAJsonBody) {
  auto ex = Dispatch("GET", "/v1/completions");
  EXPECT_TRUE(ran_.empty());
  const HttpResponse& res = *ex->response();
  EXPECT_EQ(res.status, 404u);
  EXPECT_EQ(res.content_type, "application/json");
  const auto body = nlohmann::json::parse(res.body);
  EXPECT_EQ(body["error"]["message"], "no route for GET /v1/completions");
  EXPECT_EQ(body["error"]["code"], 404);
  EXPECT_FALSE(ex->response_header("Server-Timing").empty());
  EXPECT_TRUE(ex->response_header("Allow").empty());
  // Deeper than every route, and the root.
  EXPECT_EQ(Dispatch("GET", "/v1/models/a/b/c")->response()->status, 404u);
  EXPECT_EQ(Dispatch("GET", "/")->response()->status, 404u);
}

TEST_F(RouterTest, WrongMethodIs405WithAllow) {
  auto ex = Dispatch("DELETE", "/v1/embeddings");
  EXPECT_TRUE(ran_.empty());
  const HttpResponse& res = *ex->response();
  EXPECT_EQ(res.status, 405u);
  EXPECT_EQ(ex->response_header("Allow"), "POST");
  const auto body = nlohmann::json::parse(res.body);
  EXPECT_EQ(body["error"]["message"],
            "method DELETE is not allowed on /v1/embeddings; allowed: POST");
  EXPECT_EQ(body["error"]["code"], 405);
  EXPECT_FALSE(ex->response_header("Server-Timing").empty());

  // Every method of every route on the path, once each.
  ex = Dispatch("GET", "/admin/cache/m");
  EXPECT_EQ(ex->response()->status, 405u);
  EXPECT_EQ(ex->response_header("Allow"), "DELETE, POST");
  ex = Dispatch("PUT", "/v2/models/special/ready");
  EXPECT_EQ(ex->response_header("Allow"), "GET");
}

TEST_F(RouterTest, MethodsAreMatchedExactly) {
  Dispatch("DELETE", "/admin/cache/m");
  EXPECT_EQ(ran_, "DELETE /admin/cache/{model}");
  Dispatch("POST", "/admin/cache/m");
  EXPECT_EQ(ran_, "POST /admin/cache/{model}");
  // Methods are case-sensitive (RFC 9110).
  auto ex = Dispatch("get", "/v1/models");
  EXPECT_TRUE(ran_.empty());
  EXPECT_EQ(ex->response()->status, 405u);
}

TEST_F(RouterTest, HeadIsServedByTheGetRoute) {
  Dispatch("HEAD", "/v1/models");
  EXPECT_EQ(ran_, "GET /v1/models");
  // But not by a POST route.
  auto ex = Dispatch("HEAD", "/v1/embeddings");
  EXPECT_TRUE(ran_.empty());
  EXPECT_EQ(ex->response()->status, 405u);
}

TEST(RouterClockTest, RoutingErrorsAreTimedOnTheInjectedClock) {
  // The exchange arrived 250 ms before "now" on the router's clock; the total in the routing
  // errors' Server-Timing is that, not a difference against another clock.
  ManualClock clock(5'000'000);
  Router router(clock);
  router.Add("POST", "/v1/embeddings", [](const HttpExchangePtr& ex) { ex->Respond({}); });
  for (const char* method : {"GET", "POST"}) {
    const std::string target = std::string(method) == "GET" ? "/v1/embeddings" : "/nowhere";
    auto ex = std::make_shared<FakeExchange>(method, target, /*received_micros=*/4'750'000);
    router.Dispatch(ex);
    ASSERT_TRUE(ex->response().has_value());
    EXPECT_EQ(ex->response()->status, std::string(method) == "GET" ? 405u : 404u);
    EXPECT_NE(ex->response_header("Server-Timing").find("total;dur=250.000"), std::string::npos)
        << ex->response_header("Server-Timing");
  }
}

TEST(SplitPathTest, SplitsOnSlashes) {
  EXPECT_EQ(SplitPath("/v2/models/x/infer"),
            (std::vector<std::string_view>{"v2", "models", "x", "infer"}));
  EXPECT_EQ(SplitPath("//a///b/"), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_TRUE(SplitPath("/").empty());
  EXPECT_TRUE(SplitPath("").empty());
}

}  // namespace
}  // namespace tailcut
