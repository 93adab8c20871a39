// SemanticOutputCache over a scripted embedding model and a generation the test drives by hand:
// what is cached, what is served from it (exact and semantic), what never crosses a partition,
// and single-flight of identical queries.
#include "core/semantic_output_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tailcut {
namespace {

// Collects what a request's sink received.
class RecordedSink final : public GenerationSink {
 public:
  void OnStart(const GenerationStart& s) override { start = s, started = true; }
  void OnText(const GenerationPiece& piece) override { text += piece.text; }
  void OnEnd(Result<GenerationEnd> e) override {
    ended = true;
    status = e.ok() ? Status::Ok() : e.status();
    if (e.ok()) end = *e;
  }
  bool started = false;
  bool ended = false;
  GenerationStart start;
  std::string text;
  Status status;
  GenerationEnd end;
};

// A generation the cache queued, for the test to answer.
struct Queued {
  GenerateRequest request;
  GenerationSinkPtr sink;
  void Answer(const std::string& text) const {
    GenerationStart start;
    start.model = "llm";
    start.variant = "q4_1";
    start.prompt_tokens = 7;
    sink->OnStart(start);
    GenerationPiece a, b;
    a.text = text.substr(0, text.size() / 2);
    b.text = text.substr(text.size() / 2);
    sink->OnText(a);
    sink->OnText(b);
    GenerationEnd end;
    end.model = "llm";
    end.variant = "q4_1";
    end.finish_reason = "stop";
    end.usage.prompt_tokens = 7;
    end.usage.completion_tokens = 2;
    sink->OnEnd(end);
  }
};

GenerateRequest Chat(const std::string& question, const std::string& system = "") {
  GenerateRequest r;
  r.chat = true;
  if (!system.empty()) r.messages.push_back({"system", system});
  r.messages.push_back({"user", question});
  r.sampling.temperature = 0;
  r.max_tokens = 16;
  return r;
}

class SemanticOutputCacheTest : public ::testing::Test {
 protected:
  // Vectors by text: unit vectors in 4 dimensions at chosen cosines to "capital of france".
  void SetUp() override {
    vectors_["What is the capital of France?"] = {1, 0, 0, 0};
    vectors_["Which city is the capital of France?"] = {0.96f, 0.28f, 0, 0};  // cosine 0.96
    vectors_["What is the capital of Germany?"] = {0.8f, 0, 0.6f, 0};         // cosine 0.8
  }

  std::unique_ptr<SemanticOutputCache> Make(SemanticCacheOptions options = {},
                                            SemanticOutputCache::PublishFn publish = nullptr) {
    options.enabled = true;
    if (options.policy == "verifier") options.policy = "cosine";
    SemanticOutputCache::Deps deps;
    deps.clock = &clock_;
    deps.publish = std::move(publish);
    if (defer_posts_) {
      deps.post = [this](std::function<void()> task) { posted_.push_back(std::move(task)); };
    }
    deps.embed = [this](const GenerateRequest&, const std::string& text,
                        std::function<void(Result<std::vector<float>>)> done) {
      ++embeds_;
      auto it = vectors_.find(text);
      if (it == vectors_.end()) return done(Status::Unavailable("embedding model overloaded"));
      done(it->second);
    };
    auto cache = SemanticOutputCache::Create(options, std::move(deps));
    EXPECT_TRUE(cache.ok()) << cache.status().message();
    return std::move(cache).value();
  }

  // Sends `request` through `cache`; the sink it answered into.
  std::shared_ptr<RecordedSink> Send(SemanticOutputCache& cache, GenerateRequest request,
                                     const std::string& model = "llm") {
    auto sink = std::make_shared<RecordedSink>();
    cache.Generate(std::move(request), model, sink, [this](GenerateRequest r, GenerationSinkPtr s) {
      queued_.push_back({std::move(r), std::move(s)});
    });
    return sink;
  }

  ManualClock clock_{5'000'000'000};
  std::map<std::string, std::vector<float>> vectors_;
  std::vector<Queued> queued_;
  int embeds_ = 0;
  // With defer_posts_, the cache's work-pool continuations wait in posted_ until the test
  // runs them (as a busy pool would make them wait).
  bool defer_posts_ = false;
  std::vector<std::function<void()>> posted_;
  // Runs the queued continuations in order, and those they queue, until none is left.
  void RunPosted() {
    for (size_t i = 0; i < posted_.size(); ++i) {
      auto task = std::move(posted_[i]);
      task();
    }
    posted_.clear();
  }
};

// A client that asks again the moment its answer has ended.
class RepeatingSink final : public GenerationSink {
 public:
  explicit RepeatingSink(std::function<void()> repeat) : repeat_(std::move(repeat)) {}
  void OnStart(const GenerationStart&) override {}
  void OnText(const GenerationPiece&) override {}
  void OnEnd(Result<GenerationEnd>) override { repeat_(); }

 private:
  std::function<void()> repeat_;
};

TEST_F(SemanticOutputCacheTest, AMissGeneratesAndTheSameQuestionIsThenAnExactHit) {
  auto cache = Make();
  auto first = Send(*cache, Chat("What is the capital of France?"));
  ASSERT_EQ(queued_.size(), 1u);
  queued_[0].Answer("Paris.");
  EXPECT_EQ(first->text, "Paris.");
  EXPECT_TRUE(first->start.cache.empty());

  clock_.AdvanceMicros(2'000'000);
  auto second = Send(*cache, Chat("What is the capital of France?"));
  EXPECT_EQ(queued_.size(), 1u);  // Not generated again.
  ASSERT_TRUE(second->ended);
  EXPECT_TRUE(second->status.ok());
  EXPECT_EQ(second->text, "Paris.");
  EXPECT_EQ(second->start.cache, "exact");
  EXPECT_EQ(second->start.cache_age_millis, 2000);
  EXPECT_EQ(second->end.finish_reason, "stop");
  EXPECT_EQ(second->end.usage.completion_tokens, 2);
  const auto s = cache->stats();
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.exact_hits, 1);
  EXPECT_EQ(s.inserts, 1);
}

TEST_F(SemanticOutputCacheTest, ARepeatSentAsTheAnswerEndsIsAHitWhateverThePoolIsDoing) {
  defer_posts_ = true;
  auto cache = Make();
  std::shared_ptr<RecordedSink> repeat;
  auto client = std::make_shared<RepeatingSink>(
      [&] { repeat = Send(*cache, Chat("What is the capital of France?")); });
  cache->Generate(Chat("What is the capital of France?"), "llm", client,
                  [this](GenerateRequest r, GenerationSinkPtr s) {
                    queued_.push_back({std::move(r), std::move(s)});
                  });
  RunPosted();
  ASSERT_EQ(queued_.size(), 1u);
  queued_[0].Answer("Paris.");
  // The repeat's lookup is queued first, before anything the end itself queued: it finds the
  // answer only if it was stored before the client saw its end.
  ASSERT_NE(repeat, nullptr);
  RunPosted();
  EXPECT_EQ(queued_.size(), 1u);
  ASSERT_TRUE(repeat->ended);
  EXPECT_EQ(repeat->start.cache, "exact");
  EXPECT_EQ(repeat->text, "Paris.");
}

TEST_F(SemanticOutputCacheTest, TheExactPolicyEmbedsNothingAndServesTheSameTextAgain) {
  SemanticCacheOptions options;
  options.policy = "exact";
  auto cache = Make(options);
  auto first = Send(*cache, Chat("What is the capital of France?"));
  ASSERT_EQ(queued_.size(), 1u);
  queued_[0].Answer("Paris.");
  auto again = Send(*cache, Chat("What is the capital of France?"));
  EXPECT_EQ(queued_.size(), 1u);
  ASSERT_TRUE(again->ended);
  EXPECT_EQ(again->start.cache, "exact");
  EXPECT_EQ(again->text, "Paris.");
  Send(*cache, Chat("Which city is the capital of France?"));  // Reworded: a miss.
  EXPECT_EQ(queued_.size(), 2u);
  EXPECT_EQ(embeds_, 0);
}

TEST_F(SemanticOutputCacheTest, AParaphraseAboveTheThresholdHitsAndADifferentQuestionDoesNot) {
  SemanticCacheOptions options;
  options.min_cosine_per_mille = 900;
  auto cache = Make(options);
  Send(*cache, Chat("What is the capital of France?"));
  queued_.at(0).Answer("Paris.");

  auto paraphrase = Send(*cache, Chat("Which city is the capital of France?"));
  EXPECT_EQ(queued_.size(), 1u);
  EXPECT_EQ(paraphrase->start.cache, "semantic");
  EXPECT_NEAR(paraphrase->start.cache_similarity, 0.96, 1e-5);
  EXPECT_EQ(paraphrase->text, "Paris.");

  auto other = Send(*cache, Chat("What is the capital of Germany?"));  // cosine 0.8
  ASSERT_EQ(queued_.size(), 2u);
  EXPECT_FALSE(other->started);
  EXPECT_EQ(cache->stats().semantic_hits, 1);
  EXPECT_EQ(cache->stats().misses, 2);
}

TEST_F(SemanticOutputCacheTest, PartitionsNeverServeEachOther) {
  auto cache = Make();
  Send(*cache, Chat("What is the capital of France?"));
  queued_.at(0).Answer("Paris.");

  GenerateRequest other_system = Chat("What is the capital of France?", "Answer in French.");
  GenerateRequest seeded = Chat("What is the capital of France?");
  seeded.sampling.temperature = 0.7f;
  seeded.sampling.seed = 42;
  GenerateRequest longer = Chat("What is the capital of France?");
  longer.max_tokens = 32;
  GenerateRequest stop = Chat("What is the capital of France?");
  stop.stop = {"\n"};
  GenerateRequest pinned = Chat("What is the capital of France?");
  pinned.precision = "q8_0";
  GenerateRequest completion;
  completion.prompt = "What is the capital of France?";
  completion.sampling.temperature = 0;
  completion.max_tokens = 16;
  for (auto* r : {&other_system, &seeded, &longer, &stop, &pinned, &completion}) {
    auto sink = Send(*cache, *r);
    EXPECT_FALSE(sink->started);
  }
  auto other_model = Send(*cache, Chat("What is the capital of France?"), "another-llm");
  EXPECT_FALSE(other_model->started);
  EXPECT_EQ(queued_.size(), 8u);
  EXPECT_EQ(cache->stats().exact_hits + cache->stats().semantic_hits, 0);
}

TEST_F(SemanticOutputCacheTest, SamplingAndLogprobRequestsBypassTheCacheUnlessSamplingOptsIn) {
  auto cache = Make();
  GenerateRequest sampled = Chat("What is the capital of France?");
  sampled.sampling.temperature = 0.8f;
  GenerateRequest logprobs = Chat("What is the capital of France?");
  logprobs.logprobs = true;
  Send(*cache, sampled);
  Send(*cache, logprobs);
  ASSERT_EQ(queued_.size(), 2u);
  queued_[0].Answer("Paris!");
  queued_[1].Answer("Paris?");
  EXPECT_EQ(cache->stats().bypasses, 2);
  EXPECT_EQ(cache->stats().inserts, 0);
  EXPECT_EQ(embeds_, 0);

  SemanticCacheOptions opt_in;
  opt_in.cache_sampling_requests = true;
  auto sampling_cache = Make(opt_in);
  Send(*sampling_cache, sampled);
  queued_.back().Answer("Paris!");
  EXPECT_EQ(Send(*sampling_cache, sampled)->start.cache, "exact");
}

TEST_F(SemanticOutputCacheTest, CancelledFailedAndNoStoreGenerationsAreNotCached) {
  auto cache = Make();
  GenerateRequest cancelled = Chat("What is the capital of France?");
  auto flag = std::make_shared<Cancellation>();
  cancelled.cancellation = flag;
  Send(*cache, cancelled);
  flag->Cancel();
  queued_.at(0).Answer("Par");  // Whatever it had when the client left.

  Send(*cache, Chat("What is the capital of France?"));
  queued_.at(1).sink->OnEnd(Status::DeadlineExceeded("deadline"));

  GenerateRequest no_store = Chat("What is the capital of France?");
  no_store.cache_write = false;
  no_store.cache_read = false;
  Send(*cache, no_store);
  queued_.at(2).Answer("Paris.");
  EXPECT_EQ(cache->stats().inserts, 0);

  // no-cache: not answered from the cache, but its answer is stored.
  GenerateRequest no_cache = Chat("What is the capital of France?");
  no_cache.cache_read = false;
  Send(*cache, no_cache);
  queued_.at(3).Answer("Paris.");
  EXPECT_EQ(cache->stats().inserts, 1);
  EXPECT_FALSE(Send(*cache, no_cache)->started);
  EXPECT_EQ(Send(*cache, Chat("What is the capital of France?"))->start.cache, "exact");
}

TEST_F(SemanticOutputCacheTest, AnEmbeddingFailureIsAMissNotAnError) {
  auto cache = Make();
  auto sink = Send(*cache, Chat("A question the embedding model refuses"));
  ASSERT_EQ(queued_.size(), 1u);
  queued_[0].Answer("Generated anyway.");
  EXPECT_TRUE(sink->status.ok());
  EXPECT_EQ(sink->text, "Generated anyway.");
}

TEST_F(SemanticOutputCacheTest, IdenticalConcurrentQueriesGenerateOnce) {
  auto cache = Make();
  auto leader = Send(*cache, Chat("What is the capital of France?"));
  auto follower = Send(*cache, Chat("What is the capital of France?"));
  ASSERT_EQ(queued_.size(), 1u);
  EXPECT_FALSE(follower->started);
  queued_[0].Answer("Paris.");
  EXPECT_EQ(leader->text, "Paris.");
  EXPECT_EQ(follower->text, "Paris.");
  EXPECT_EQ(follower->start.cache, "exact");
  EXPECT_EQ(cache->stats().single_flight_joins, 1);

  // A follower whose deadline comes before the leader's does not wait for it.
  GenerateRequest slow = Chat("What is the capital of Germany?");
  slow.deadline_micros = clock_.NowMicros() + 10'000'000;
  GenerateRequest hurried = slow;
  hurried.deadline_micros = clock_.NowMicros() + 1'000'000;
  Send(*cache, slow);
  Send(*cache, hurried);
  EXPECT_EQ(queued_.size(), 3u);

  // When the leader produces nothing, its followers generate.
  Send(*cache, Chat("Which city is the capital of France?", "Be brief."));
  auto waiting = Send(*cache, Chat("Which city is the capital of France?", "Be brief."));
  ASSERT_EQ(queued_.size(), 4u);
  queued_[3].sink->OnEnd(Status::Unavailable("engine stopped"));
  ASSERT_EQ(queued_.size(), 5u);
  queued_[4].Answer("Paris.");
  EXPECT_EQ(waiting->text, "Paris.");
}

TEST_F(SemanticOutputCacheTest, AnEntryPublishedByOneReplicaServesAnotherOnce) {
  std::vector<SemanticEntry> published;
  auto a = Make({}, [&published](const SemanticEntry& e) { published.push_back(e); });
  auto b = Make();
  Send(*a, Chat("What is the capital of France?"));
  queued_.at(0).Answer("Paris.");
  ASSERT_EQ(published.size(), 1u);
  EXPECT_FALSE(published[0].id.empty());
  EXPECT_EQ(published[0].embedding, vectors_["What is the capital of France?"]);

  EXPECT_TRUE(b->Adopt(published[0]));
  EXPECT_FALSE(b->Adopt(published[0]));  // Already known (the log is read more than once).
  auto hit = Send(*b, Chat("Which city is the capital of France?"));
  EXPECT_EQ(queued_.size(), 1u);
  EXPECT_EQ(hit->start.cache, "semantic");
  EXPECT_EQ(hit->text, "Paris.");
  EXPECT_EQ(b->stats().adopted, 1);
  EXPECT_EQ(b->stats().inserts, 0);
}

TEST_F(SemanticOutputCacheTest, TheVerifierPolicyNeedsAnOperatingPointForTheBound) {
  auto verifier = SemanticVerifier::FromJson(R"({
    "format": "tailcut.semantic_verifier/1", "model": "logistic_regression", "bias": 0.0,
    "features": [{"name": "cosine", "mean": 0.9, "scale": 0.05, "weight": 1.0}],
    "default_max_wrong_hit_share": 0.1,
    "operating_points": [
      {"max_wrong_hit_share": 0.1, "threshold": 0.6, "hit_rate": 0.4, "wrong_hit_share": 0.09},
      {"max_wrong_hit_share": 0.05, "threshold": 0.9, "hit_rate": 0.2, "wrong_hit_share": 0.05}]
  })");
  ASSERT_TRUE(verifier.ok()) << verifier.status().message();
  auto shared = std::make_shared<const SemanticVerifier>(std::move(verifier).value());
  auto make = [&](int64_t per_mille) {
    SemanticCacheOptions options;
    options.enabled = true;
    options.max_wrong_hits_per_mille = per_mille;
    SemanticOutputCache::Deps deps;
    deps.verifier = shared;
    deps.clock = &clock_;
    deps.embed = [](const GenerateRequest&, const std::string&,
                    std::function<void(Result<std::vector<float>>)> done) {
      done(std::vector<float>{1, 0, 0, 0});
    };
    return SemanticOutputCache::Create(options, std::move(deps));
  };
  auto by_default = make(0);
  ASSERT_TRUE(by_default.ok());
  EXPECT_DOUBLE_EQ((*by_default)->verifier_threshold(), 0.6);
  auto strict = make(50);
  ASSERT_TRUE(strict.ok());
  EXPECT_DOUBLE_EQ((*strict)->verifier_threshold(), 0.9);
  auto impossible = make(10);
  ASSERT_FALSE(impossible.ok());
  EXPECT_NE(impossible.status().message().find("max_wrong_hits_per_mille"), std::string::npos);

  SemanticCacheOptions unknown;
  unknown.policy = "nearest";
  EXPECT_FALSE(SemanticOutputCache::Create(unknown, {}).ok());
}

// The reranker policy: candidates at or above the document's cosine floor are scored by the
// reranker (scripted logits here), and the best one at or above the δ's threshold is served.
class SemanticRerankerPolicyTest : public SemanticOutputCacheTest {
 protected:
  static constexpr const char* kDocument = R"({"format": "tailcut.semantic_reranker/1",
    "reranker_variant": "int8-per-token", "embedding_variant": "int8-per-token",
    "min_cosine": 0.75, "default_max_wrong_hit_share": 0.1, "operating_points": [
      {"max_wrong_hit_share": 0.1, "threshold": 0.5, "hit_rate": 0.3, "wrong_hit_share": 0.09},
      {"max_wrong_hit_share": 0.05, "threshold": 0.95, "hit_rate": 0.1, "wrong_hit_share": 0.05}]
  })";

  Result<std::unique_ptr<SemanticOutputCache>> MakeReranked(int64_t per_mille = 0,
                                                            bool with_reranker = true,
                                                            int reranker_candidates = 1) {
    SemanticCacheOptions options;
    options.reranker_candidates = reranker_candidates;
    options.enabled = true;
    options.policy = "reranker";
    options.max_wrong_hits_per_mille = per_mille;
    SemanticOutputCache::Deps deps;
    deps.clock = &clock_;
    deps.embed = [this](const GenerateRequest&, const std::string& text,
                        std::function<void(Result<std::vector<float>>)> done) {
      auto it = vectors_.find(text);
      if (it == vectors_.end()) return done(Status::Unavailable("embedding model overloaded"));
      done(it->second);
    };
    if (with_reranker) {
      auto doc = SemanticRerankerDocument::FromJson(kDocument);
      EXPECT_TRUE(doc.ok()) << doc.status().message();
      deps.reranker_points = std::make_shared<const SemanticRerankerDocument>(*doc);
      deps.rerank = [this](const GenerateRequest&, const std::string& query,
                           std::vector<std::string> cached,
                           std::function<void(Result<std::vector<float>>)> done) {
        scored_.push_back(cached);
        if (reranker_down_) return done(Status::ResourceExhausted("reranker queue full"));
        std::vector<float> logits;
        for (const auto& c : cached) logits.push_back(logits_[query + "|" + c]);
        done(std::move(logits));
      };
    }
    return SemanticOutputCache::Create(options, std::move(deps));
  }

  std::map<std::string, float> logits_;
  std::vector<std::vector<std::string>> scored_;
  bool reranker_down_ = false;
};

TEST_F(SemanticRerankerPolicyTest, ServesWhatTheRerankerAcceptsAndGeneratesTheRest) {
  vectors_["Who wrote Hamlet?"] = {0.6f, 0, 0, 0.8f};  // Cosine 0.6: below the floor.
  logits_["Which city is the capital of France?|What is the capital of France?"] = 3.0f;
  logits_["What is the capital of Germany?|What is the capital of France?"] = -4.0f;
  auto cache = MakeReranked();
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  EXPECT_DOUBLE_EQ((*cache)->verifier_threshold(), 0.5);
  Send(**cache, Chat("What is the capital of France?"));
  ASSERT_EQ(queued_.size(), 1u);
  queued_[0].Answer("Paris.");

  auto paraphrase = Send(**cache, Chat("Which city is the capital of France?"));
  ASSERT_TRUE(paraphrase->ended);
  EXPECT_EQ(paraphrase->start.cache, "semantic");
  EXPECT_EQ(paraphrase->text, "Paris.");
  EXPECT_NEAR(paraphrase->start.cache_similarity, 0.96, 1e-5);
  ASSERT_EQ(scored_.size(), 1u);
  EXPECT_EQ(scored_[0], std::vector<std::string>{"What is the capital of France?"});

  // Close by cosine (0.8), but the reranker reads the two texts and says no.
  Send(**cache, Chat("What is the capital of Germany?"));
  EXPECT_EQ(queued_.size(), 2u);
  EXPECT_EQ(scored_.size(), 2u);
  // Below the measured floor: generated without asking the reranker.
  Send(**cache, Chat("Who wrote Hamlet?"));
  EXPECT_EQ(queued_.size(), 3u);
  EXPECT_EQ(scored_.size(), 2u);
  const auto s = (*cache)->stats();
  EXPECT_EQ(s.semantic_hits, 1);
  EXPECT_EQ(s.misses, 3);
}

TEST_F(SemanticRerankerPolicyTest, OnlyTheNearestCandidatesAreScored) {
  for (int scored : {1, 2}) {
    queued_.clear();
    scored_.clear();
    auto cache = MakeReranked(0, true, scored);
    ASSERT_TRUE(cache.ok());
    Send(**cache, Chat("What is the capital of France?"));
    Send(**cache, Chat("What is the capital of Germany?"));
    ASSERT_EQ(queued_.size(), 2u);
    queued_[0].Answer("Paris.");
    queued_[1].Answer("Berlin.");
    scored_.clear();
    // Cosine 0.96 to France's entry and 0.768 to Germany's: both above the floor.
    Send(**cache, Chat("Which city is the capital of France?"));
    ASSERT_EQ(scored_.size(), 1u);
    if (scored == 1) {
      EXPECT_EQ(scored_[0], std::vector<std::string>{"What is the capital of France?"});
    } else {
      EXPECT_EQ(scored_[0], (std::vector<std::string>{"What is the capital of France?",
                                                      "What is the capital of Germany?"}));
    }
  }
}

TEST_F(SemanticRerankerPolicyTest, ARerankerFailureIsAMissNotAnError) {
  auto cache = MakeReranked();
  ASSERT_TRUE(cache.ok());
  Send(**cache, Chat("What is the capital of France?"));
  queued_[0].Answer("Paris.");
  reranker_down_ = true;
  auto asked = Send(**cache, Chat("Which city is the capital of France?"));
  ASSERT_EQ(queued_.size(), 2u);  // Generated.
  queued_[1].Answer("Paris, France.");
  ASSERT_TRUE(asked->ended);
  EXPECT_TRUE(asked->status.ok());
  EXPECT_TRUE(asked->start.cache.empty());
  EXPECT_EQ(asked->text, "Paris, France.");
}

TEST_F(SemanticRerankerPolicyTest, TheBoundPicksTheThresholdAndNeedsAPoint) {
  auto strict = MakeReranked(50);
  ASSERT_TRUE(strict.ok());
  EXPECT_DOUBLE_EQ((*strict)->verifier_threshold(), 0.95);
  auto impossible = MakeReranked(10);
  ASSERT_FALSE(impossible.ok());
  EXPECT_NE(impossible.status().message().find("max_wrong_hits_per_mille"), std::string::npos);
  auto without = MakeReranked(0, /*with_reranker=*/false);
  ASSERT_FALSE(without.ok());
  EXPECT_NE(without.status().message().find("reranker"), std::string::npos);
}

TEST(SemanticEmbeddingVariantTest, ConfiguredElseTheVerifiersElseTheModelsDefault) {
  ModelConfig model;
  model.name = "minilm";
  for (const char* name : {"fp32", "int8-per-token", "fp16"}) {
    VariantConfig v;
    v.name = name;
    model.variants.push_back(v);
  }
  model.default_variant = "fp32";
  auto with = [](const std::string& variant) {
    std::string doc = R"({"format": "tailcut.semantic_verifier/1", "model": "logistic_regression",
      "bias": 0.0, "features": [{"name": "cosine", "mean": 0.9, "scale": 0.05, "weight": 1.0}],
      "default_max_wrong_hit_share": 0.1, "operating_points": [{"max_wrong_hit_share": 0.1,
      "threshold": 0.6, "hit_rate": 0.4, "wrong_hit_share": 0.09}])";
    if (!variant.empty()) doc += R"(, "embedding_variant": ")" + variant + "\"";
    auto v = SemanticVerifier::FromJson(doc + "}");
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return std::move(v).value();
  };
  SemanticCacheOptions options;
  const SemanticVerifier measured_on_int8 = with("int8-per-token");
  const SemanticVerifier measured_on_none = with("");
  const SemanticVerifier measured_on_other = with("int4");
  // The verifier's vector space, when the model has it.
  EXPECT_EQ(*SemanticEmbeddingVariant(options, measured_on_int8.embedding_variant(), model),
            "int8-per-token");
  // No verifier (cosine policy), none named, or one the model lacks: the model's default.
  EXPECT_EQ(*SemanticEmbeddingVariant(options, "", model), "fp32");
  EXPECT_EQ(*SemanticEmbeddingVariant(options, measured_on_none.embedding_variant(), model),
            "fp32");
  EXPECT_EQ(*SemanticEmbeddingVariant(options, measured_on_other.embedding_variant(), model),
            "fp32");
  // The configuration wins; a name the model lacks is an error naming what it has.
  options.embedding_variant = "fp16";
  EXPECT_EQ(*SemanticEmbeddingVariant(options, measured_on_int8.embedding_variant(), model),
            "fp16");
  options.embedding_variant = "int4";
  auto wrong = SemanticEmbeddingVariant(options, measured_on_int8.embedding_variant(), model);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("fp32, int8-per-token, fp16"), std::string::npos)
      << wrong.status().message();
  // Without default_variant the first variant is the default.
  options.embedding_variant.clear();
  model.default_variant.clear();
  EXPECT_EQ(*SemanticEmbeddingVariant(options, "", model), "fp32");
}

}  // namespace
}  // namespace tailcut
