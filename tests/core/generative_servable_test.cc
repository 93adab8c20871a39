// GenerativeServable behind InferenceService: a model repository holding the default
// embedding model (a symlink, never loaded: models load lazily) and a generative folder
// (model.yaml + a symlink to the SmolLM2 GGUF that scripts/setup.sh installs). Checked: the
// generative model is listed and described as one, "default" means the embedding model for
// embeddings and the generative one for generation, each kind refuses the other's requests
// naming the right route, and generation survives a reload and ends cleanly at shutdown.
#include "core/generative_servable.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "core/inference_service.h"
#include "core/servable_metrics.h"
#include "tests/engine/test_paths.h"

namespace tailcut {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class EndSink final : public GenerationSink {
 public:
  void OnStart(const GenerationStart&) override {}
  void OnText(const GenerationPiece& piece) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_ += piece.text;
  }
  void OnEnd(Result<GenerationEnd> end) override {
    std::lock_guard<std::mutex> lock(mu_);
    end_ = std::move(end);
    cv_.notify_all();
  }
  Result<GenerationEnd> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, 60s, [&] { return end_.has_value(); })) {
      return Status::Internal("no OnEnd within 60 s");
    }
    return *end_;
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  std::optional<Result<GenerationEnd>> end_;
};

class GenerativeServableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(testing::GgufPath()))
        << testing::GgufPath() << " is missing: scripts/setup.sh installs it";
    repo_ = testing::TempDir("genrepo");
    fs::create_directory_symlink(fs::absolute(testing::ModelDir()), repo_ / "all-MiniLM-L6-v2");
    fs::create_directories(repo_ / "smol");
    fs::create_symlink(fs::absolute(testing::GgufPath()), repo_ / "smol" / "smol.gguf");
    std::ofstream(repo_ / "smol" / "model.yaml")
        << "kind: generative\ncontext_tokens: 512\nmax_sequences: 2\nbatch_tokens: 64\n";
    InferenceServiceOptions options;
    options.model_repository = repo_.string();
    options.cache_enabled = false;
    // Models load on first use: the embedding model is only ever refused here (by kind, before
    // any load), so it never costs its load.
    options.lazy_loading = true;
    auto s = InferenceService::Create(options, metrics_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    service_ = std::move(s).value();
    ASSERT_TRUE(service_->LoadStartupModels().ok());
  }
  void TearDown() override {
    service_.reset();
    fs::remove_all(repo_);
  }

  Result<GenerationEnd> Generate(const std::string& model, std::shared_ptr<EndSink> sink = {}) {
    if (!sink) sink = std::make_shared<EndSink>();
    GenerateRequest r;
    r.model = model;
    r.prompt = "The capital of France is";
    r.max_tokens = 4;
    r.sampling.temperature = 0.0f;
    service_->Generate(std::move(r), sink);
    return sink->Wait();
  }

  fs::path repo_;
  MetricsRegistry metrics_;
  std::unique_ptr<InferenceService> service_;
};

TEST_F(GenerativeServableTest, ListsAndDescribesTheGenerativeModel) {
  EXPECT_EQ(service_->default_model(), "all-MiniLM-L6-v2");
  auto d = service_->DescribeModel("smol");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->kind, "generative");
  EXPECT_EQ(d->state, ModelState::kUnloaded);
  EXPECT_EQ(d->context_tokens, 512);  // From model.yaml until loaded.
  EXPECT_EQ(d->max_sequences, 2);

  ASSERT_TRUE(Generate("smol").ok());
  d = service_->DescribeModel("smol");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->kind, "generative");
  EXPECT_EQ(d->state, ModelState::kReady);
  EXPECT_EQ(d->context_tokens, 512);
  EXPECT_EQ(d->max_sequence_length, 256);  // A stream of its own per sequence.
  EXPECT_EQ(d->max_sequences, 2);
  EXPECT_EQ(d->trained_context_tokens, 8192);
  EXPECT_EQ(d->active_variant, "smol");
  EXPECT_FALSE(d->version.empty());
  bool listed = false;
  for (const auto& m : service_->ListModels()) {
    listed = listed || (m.name == "smol" && m.kind == "generative");
  }
  EXPECT_TRUE(listed);
  const std::string text = metrics_.Serialize();
  EXPECT_NE(text.find("tailcut_generation_kv_cells_capacity{model=\"smol\"} 512"),
            std::string::npos);
}

TEST_F(GenerativeServableTest, DefaultMeansTheGenerativeModelForGenerationOnly) {
  auto sink = std::make_shared<EndSink>();
  auto end = Generate("default", sink);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(end->model, "smol");
  EXPECT_EQ(end->finish_reason, "length");
  EXPECT_EQ(end->usage.completion_tokens, 4);
  EXPECT_FALSE(sink->text().empty());
  // The same text by name.
  auto again = std::make_shared<EndSink>();
  ASSERT_TRUE(Generate("smol", again).ok());
  EXPECT_EQ(again->text(), sink->text());
}

TEST_F(GenerativeServableTest, EachKindRefusesTheOthersRequestsNamingTheRoute) {
  auto end = Generate("all-MiniLM-L6-v2");
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(end.status().message().find("/v1/embeddings"), std::string::npos);

  std::optional<Result<EmbedResult>> embedded;
  EmbedRequest e;
  e.model = "smol";
  e.inputs = {"hello"};
  service_->Embed(std::move(e), [&](Result<EmbedResult> r) { embedded = std::move(r); });
  ASSERT_TRUE(embedded.has_value());  // Refused on the calling thread.
  ASSERT_FALSE(embedded->ok());
  EXPECT_EQ(embedded->status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(embedded->status().message().find("/v1/completions"), std::string::npos);

  std::optional<Result<TensorResult>> inferred;
  TensorRequest t;
  t.model = "smol";
  service_->Infer(std::move(t), [&](Result<TensorResult> r) { inferred = std::move(r); });
  ASSERT_TRUE(inferred.has_value());
  ASSERT_FALSE(inferred->ok());
  EXPECT_EQ(inferred->status().code(), Status::Code::kInvalidArgument);

  end = Generate("nope");
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kNotFound);
}

TEST_F(GenerativeServableTest, GeneratesAfterAReloadAndRefusesAfterShutdown) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Status> reloaded;
  service_->ReloadModel("smol", [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    reloaded = s;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return reloaded.has_value(); }));
  }
  ASSERT_TRUE(reloaded->ok()) << reloaded->ToString();
  auto end = Generate("smol");
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(end->usage.completion_tokens, 4);

  service_->Shutdown(/*drain=*/true);
  end = Generate("smol");
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kUnavailable);
}

// Two variants (the same GGUF under two names, so the test needs no second file): pins by
// name and by type, an unknown pin refused naming both, every answer naming its variant, and
// the controller, ticked by hand on a ManualClock, moving unpinned requests to the other
// variant under prompt-heavy load and back when idle; the Prometheus series say so.
TEST(GenerativeServableVariantsTest, PinsSwitchesAndReportsTheVariant) {
  ASSERT_TRUE(fs::exists(testing::GgufPath()));
  const fs::path dir = testing::TempDir("genvariants") / "smol";
  fs::create_directories(dir);
  fs::create_symlink(fs::absolute(testing::GgufPath()), dir / "a.gguf");
  fs::create_symlink(fs::absolute(testing::GgufPath()), dir / "b.gguf");
  std::ofstream(dir / "model.yaml")
      << "kind: generative\ncontext_tokens: 512\nmax_sequences: 2\nbatch_tokens: 64\n"
         "variants:\n"
         "  - {name: base, file: a.gguf, precision: q4_1, perplexity: 18.346}\n"
         "  - {name: wide, file: b.gguf, precision: q8_0, perplexity: 18.354}\n"
         "  - {name: broken, file: missing.gguf, precision: f16, perplexity: 18.3}\n"
         "precision: {min_window_tokens: 16, min_dwell_millis: 1000, window_seconds: 5}\n";
  auto config = LoadModelConfig(dir.string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  MetricsRegistry registry;
  ServableMetricFamilies servable_families(registry);
  GenerationMetricFamilies families(registry);
  ManualClock clock;
  GenerativeServableOptions options;
  options.start_controller_thread = false;
  auto loaded = GenerativeServable::Load(
      *config, options,
      families.ForModel("smol", servable_families.precision_active(),
                        servable_families.precision_switches()),
      clock);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  GenerativeServable& s = **loaded;

  // Each prompt its own (a counter first): a repeated one would be found in the KV cache and
  // not prefilled again, which is not the prompt-heavy load this test makes.
  int asked = 0;
  auto run = [&](const std::string& pin, int prompt_words) -> Result<GenerationEnd> {
    GenerateRequest r;
    r.prompt = std::to_string(++asked) + ". The capital of France is";
    for (int i = 0; i < prompt_words; ++i) r.prompt += " and the capital of Spain";
    r.max_tokens = 2;
    r.sampling.temperature = 0.0f;
    r.precision = pin;
    auto sink = std::make_shared<EndSink>();
    s.Generate(std::move(r), sink, s.Admit());
    return sink->Wait();
  };

  auto end = run("", 0);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(end->variant, "base");
  end = run("wide", 0);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(end->variant, "wide");
  end = run("q8_0", 0);  // The type alias.
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->variant, "wide");
  end = run("q2_k", 0);
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(end.status().message().find("available: base (q4_1), wide (q8_0)"), std::string::npos)
      << end.status().message();
  end = run("broken", 0);  // Failed to load: not servable, not offered.
  ASSERT_FALSE(end.ok());

  ModelDescription d = s.Describe();
  EXPECT_EQ(d.active_variant, "base");
  EXPECT_EQ(d.default_variant, "base");
  EXPECT_EQ(d.precision_policy, "prefill");
  EXPECT_EQ(d.variants, (std::vector<std::string>{"base", "wide"}));
  ASSERT_EQ(d.variant_details.size(), 3u);
  EXPECT_TRUE(d.variant_details[1].interchangeable);
  EXPECT_FALSE(d.variant_details[2].loaded);
  EXPECT_FALSE(d.variant_details[2].error.empty());

  // Prompt-heavy load (long prompts, 2 tokens each): the next tick moves unpinned requests.
  s.ControllerTick();  // The window's first snapshot.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(run("", 10).ok());
  clock.AdvanceMicros(1'000'000);
  s.ControllerTick();
  EXPECT_EQ(s.active_variant(), "wide");
  end = run("", 0);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->variant, "wide");
  end = run("base", 0);  // A pin still wins.
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->variant, "base");
  EXPECT_EQ(s.Describe().precision_switches, 1);

  // Idle for a whole window: back to the default (the first tick's window still holds the
  // two short requests above, prompt-heavy too).
  clock.AdvanceMicros(6'000'000);
  s.ControllerTick();
  EXPECT_EQ(s.active_variant(), "wide");
  clock.AdvanceMicros(6'000'000);
  s.ControllerTick();
  EXPECT_EQ(s.active_variant(), "base");

  // An administrator's pin overrides the controller until removed.
  ASSERT_TRUE(s.SetActiveVariant("wide").ok());
  EXPECT_EQ(s.Describe().precision_policy, "pinned");
  end = run("", 0);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->variant, "wide");
  EXPECT_FALSE(s.SetActiveVariant("nope").ok());
  ASSERT_TRUE(s.SetActiveVariant("").ok());
  EXPECT_EQ(s.active_variant(), "base");

  const std::string text = registry.Serialize();
  for (const char* series :
       {"tailcut_generation_requests_total{model=\"smol\",variant=\"base\","
        "chosen=\"request\"} 1",
        "tailcut_generation_requests_total{model=\"smol\",variant=\"wide\","
        "chosen=\"request\"} 2",
        "tailcut_generation_requests_total{model=\"smol\",variant=\"wide\","
        "chosen=\"server\"} 2",
        "tailcut_precision_active{model=\"smol\",variant=\"base\"} 1",
        "tailcut_precision_active{model=\"smol\",variant=\"wide\"} 0",
        "tailcut_precision_switches_total{model=\"smol\",to=\"wide\"} 2",
        // Both variants' KV caches, summed. (Not running_sequences: a step loop publishes its
        // gauges after the step whose sink calls ended the request, so right after the last
        // OnEnd it may still read 1.)
        "tailcut_generation_kv_cells_capacity{model=\"smol\"} 1024"}) {
    EXPECT_NE(text.find(series), std::string::npos) << series << "\n" << text;
  }
  s.Stop(/*drain=*/true);
  const std::string after = registry.Serialize();
  EXPECT_NE(after.find("tailcut_generation_kv_cells_capacity{model=\"smol\"} 0"),
            std::string::npos);
}

}  // namespace
}  // namespace tailcut
