// EmbeddingCache's in-process paths (L1 only, no Redis): what a request's items are answered
// with, and what reaches the model's queue.
#include "core/embedding_cache.h"

#include <gtest/gtest.h>

#include <optional>

namespace tailcut {
namespace {

constexpr int kDims = 4;

class EmbeddingCacheTest : public ::testing::Test {
 protected:
  EmbeddingCacheTest()
      : l1_(L1CacheOptions{}, clock_, nullptr), cache_({}, &l1_, nullptr, clock_, nullptr) {}

  // A job for `n` rows whose answer lands in result_.
  std::shared_ptr<EmbedJob> Job(size_t n) {
    EmbedResult r;
    r.dimensions = kDims;
    r.variant = "fast";
    r.reference_variant = "fp32";
    r.token_counts.assign(n, 1);
    r.embeddings.resize(n * kDims);
    return std::make_shared<EmbedJob>(std::move(r), [this](Result<EmbedResult> done) {
      ASSERT_TRUE(done.ok()) << done.status().ToString();
      result_ = std::move(done).value();
    });
  }

  EmbeddingCache::Request RequestFor(std::shared_ptr<EmbedJob> job) {
    EmbeddingCache::Request req;
    req.job = std::move(job);
    req.tag = cache_.TagFor("m");
    req.model = "m";
    req.schedule =
        [this](std::vector<std::pair<EmbeddingCache::Item, std::optional<CacheTicket>>>&& items) {
          for (auto& [item, ticket] : items) scheduled_.push_back({item, ticket});
          return Status::Ok();
        };
    return req;
  }

  static CacheKey Key(uint64_t n) { return CacheKey{n, n * 31}; }

  ManualClock clock_{1'000'000};
  L1Cache l1_;
  EmbeddingCache cache_;
  std::optional<EmbedResult> result_;
  std::vector<std::pair<EmbeddingCache::Item, std::optional<CacheTicket>>> scheduled_;
};

TEST_F(EmbeddingCacheTest, ReadFirstKeyAnswersBeforeTheOwnKeyAndIsCountedAsReference) {
  const std::vector<float> reference = {1, 0, 0, 0}, fast = {0, 1, 0, 0};
  ASSERT_TRUE(l1_.Insert(Key(1), cache_.TagFor("m"), reference));  // fp32's row of text 1.
  ASSERT_TRUE(l1_.Insert(Key(2), cache_.TagFor("m"), fast));       // fast's row of text 1.
  ASSERT_TRUE(l1_.Insert(Key(4), cache_.TagFor("m"), fast));       // fast's row of text 2.
  auto job = Job(3);
  std::vector<EmbeddingCache::Item> items = {
      {0, {7}, Key(2), Key(1)},  // Both cached: the reference row wins.
      {1, {8}, Key(4), Key(3)},  // Reference missing: the item's own row.
      {2, {9}, Key(6), Key(5)},  // Neither: computed under its own key.
  };
  cache_.Resolve(RequestFor(job), std::move(items));
  ASSERT_EQ(scheduled_.size(), 1u);
  EXPECT_EQ(scheduled_[0].first.index, 2u);
  ASSERT_TRUE(scheduled_[0].second.has_value());
  EXPECT_EQ(scheduled_[0].second->key, Key(6));  // Stored under the computing variant's key.
  EXPECT_FALSE(result_.has_value());
  job->CompleteItem(2, std::vector<float>{0, 0, 1, 0});
  ASSERT_TRUE(result_.has_value());
  EXPECT_EQ(result_->cache_hits, 2);
  EXPECT_EQ(result_->reference_rows, 1);
  EXPECT_EQ(std::vector<float>(result_->embeddings.begin(), result_->embeddings.begin() + kDims),
            reference);
  EXPECT_EQ(ServedVariants(*result_), "fp32,fast");
}

TEST_F(EmbeddingCacheTest, ReadFirstKeyIsNeverWritten) {
  auto job = Job(1);
  std::vector<EmbeddingCache::Item> items = {{0, {7}, Key(2), Key(1)}};
  cache_.Resolve(RequestFor(job), std::move(items));
  ASSERT_EQ(scheduled_.size(), 1u);
  cache_.OnComputed(*scheduled_[0].second, std::vector<float>{0, 1, 0, 0});
  std::vector<float> row;
  EXPECT_TRUE(l1_.Lookup(Key(2), &row));
  EXPECT_FALSE(l1_.Lookup(Key(1), &row)) << "a fast variant's row must never land under fp32's key";
}

TEST_F(EmbeddingCacheTest, AllRowsFromTheReferenceNameOnlyIt) {
  ASSERT_TRUE(l1_.Insert(Key(1), cache_.TagFor("m"), std::vector<float>{1, 0, 0, 0}));
  auto job = Job(1);
  cache_.Resolve(RequestFor(job), {{0, {7}, Key(2), Key(1)}});
  ASSERT_TRUE(result_.has_value());
  EXPECT_EQ(ServedVariants(*result_), "fp32");
  EmbedResult none;
  none.variant = "fast";
  none.token_counts = {1};
  EXPECT_EQ(ServedVariants(none), "fast");
}

}  // namespace
}  // namespace tailcut
