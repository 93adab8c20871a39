#include "core/generation_scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "engine/sampler.h"

namespace tailcut {

namespace {

double Seconds(int64_t micros) { return static_cast<double>(micros) / 1e6; }

// The step cost model. Its wait margin is the step-time margin (Options:
// inter_token_slo_millis): the 99th percentile of how far the streams' gaps overran the
// predicted step time, moved by 1 % of the SLO a step (across its range in a few hundred
// steps, seconds of generation), starting at a quarter of the SLO and held between 0 and half
// of it.
BatchCostModelOptions StepCostOptions(int64_t slo_millis) {
  BatchCostModelOptions o;
  o.margin_step_micros = slo_millis * 10;
  o.initial_margin_micros = slo_millis * 250;
  o.min_margin_micros = 0;
  o.max_margin_micros = slo_millis * 500;
  return o;
}

// Bytes at the end of `text` that start a UTF-8 character without completing it (0 .. 3): a
// token may end inside a character whose other bytes the next token brings.
size_t IncompleteUtf8Tail(const std::string& text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto byte = static_cast<unsigned char>(text[n - back]);
    if ((byte & 0xC0) == 0x80) continue;  // A continuation byte: look further back.
    const size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
    return length > back ? back : 0;
  }
  return 0;  // Only continuation bytes (or none): nothing a later token can complete.
}

// The longest suffix of `text` that is a proper prefix of one of `stops`: text that may still
// turn out to begin a stop string, so it is held back until the next tokens decide.
size_t PossibleStopTail(const std::string& text, const std::vector<std::string>& stops) {
  size_t longest = 0;
  for (const std::string& stop : stops) {
    for (size_t len = std::min(text.size(), stop.size() - 1); len > longest; --len) {
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

// How many leading tokens `kept` and `prompt` share.
int32_t CommonPrefix(const std::vector<TokenId>& kept, const std::vector<TokenId>& prompt) {
  const auto [k, p] = std::mismatch(kept.begin(), kept.end(), prompt.begin(), prompt.end());
  return static_cast<int32_t>(k - kept.begin());
}

}  // namespace

struct GenerationScheduler::Request {
  std::vector<TokenId> prompt;
  std::unique_ptr<Sampler> sampler;
  GenerationSinkPtr sink;
  std::vector<std::string> stop;  // Non-empty strings only.
  int32_t max_tokens = 0;         // Resolved: > 0, and prompt + max_tokens fits the context.
  CancellationFlag cancellation;
  int64_t call_micros = 0;      // clock_ at Generate().
  int64_t arrival_micros = 0;   // clock_ once tokenised: queueing starts.
  int64_t deadline_micros = 0;  // clock_ time; 0 = none.
  StageTimings timings;
  int32_t cells() const { return static_cast<int32_t>(prompt.size()) + max_tokens; }
};

struct GenerationScheduler::Sequence {
  std::unique_ptr<Request> request;
  SequenceId id = 0;
  int64_t admitted_micros = 0;
  size_t prefilled = 0;           // Prompt tokens in the cache.
  int32_t reused = 0;             // Of those, kept from its previous request or copied.
  std::vector<TokenId> cached;    // The tokens in the sequence's KV cache, from position 0.
  TokenPosition position = 0;     // Where the next decoded token goes.
  TokenId pending = kNoToken;     // Sampled, streamed, not yet decoded into the cache.
  int32_t generated = 0;          // Tokens sampled.
  std::string held;               // Generated text not yet sent (a possible stop, a partial
                                  // UTF-8 character).
  int32_t unsent_tokens = 0;      // Tokens whose text is (partly) in `held`.
  float last_logprob = 0.0f;
  int64_t first_token_micros = 0;
  int64_t last_token_micros = 0;
  std::string finish_reason;
};

GenerationScheduler::GenerationScheduler(GenerativeModel* model, GenerationSchedulerOptions options,
                                         const Clock& clock)
    : model_(model),
      options_(std::move(options)),
      clock_(clock),
      // At least one decode entry per sequence fits a step (when the model's batch allows).
      step_tokens_(std::min(model->batch_tokens(),
                            std::max(options_.max_tokens_per_step > 0 ? options_.max_tokens_per_step
                                                                      : model->batch_tokens(),
                                     model->max_sequences()))),
      step_cost_(StepCostOptions(options_.inter_token_slo_millis)) {
  for (SequenceId id = model_->max_sequences() - 1; id >= 0; --id) free_ids_.push_back(id);
  kept_tokens_.resize(static_cast<size_t>(model_->max_sequences()));
  freed_micros_.assign(static_cast<size_t>(model_->max_sequences()), 0);
  stats_.kv_capacity_cells = model_->context_tokens();
  if (options_.metrics) {
    options_.metrics->kv_capacity_cells->Inc(static_cast<double>(model_->context_tokens()));
  }
  published_.kv_capacity_cells = model_->context_tokens();
  thread_ = std::thread([this] { Loop(); });
}

GenerationScheduler::~GenerationScheduler() { Stop(/*drain=*/false); }

void GenerationScheduler::Generate(GenerateRequest request, GenerationSinkPtr sink) {
  const int64_t start = clock_.NowMicros();
  auto r = std::make_unique<Request>();
  r->sink = std::move(sink);
  auto refuse = [&](Status status) {
    if (options_.metrics && status.code() == Status::Code::kResourceExhausted) {
      options_.metrics->rejected->Inc();
    }
    r->sink->OnEnd(std::move(status));
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return refuse(Status::Unavailable("the model is shutting down"));
  }
  if (request.chat && request.messages.empty()) {
    return refuse(Status::InvalidArgument("messages is empty"));
  }
  auto tokens = [&]() -> Result<std::vector<TokenId>> {
    if (!request.chat) {
      return model_->Tokenize(request.prompt, /*add_special=*/true, /*parse_special=*/false);
    }
    auto text = model_->ApplyChatTemplate(request.messages, /*add_generation_prompt=*/true);
    if (!text.ok()) return text.status();
    return model_->Tokenize(*text, /*add_special=*/false, /*parse_special=*/true);
  }();
  if (!tokens.ok()) return refuse(Status::InvalidArgument(tokens.status().message()));
  r->prompt = std::move(tokens).value();
  if (r->prompt.empty()) return refuse(Status::InvalidArgument("the prompt is empty"));

  // What one sequence may hold: its own stream, or (shared layout) the whole pool.
  const int32_t context = model_->sequence_context_tokens();
  const auto prompt_tokens = static_cast<int32_t>(r->prompt.size());
  if (request.max_tokens < 0) {
    return refuse(Status::InvalidArgument("max_tokens must not be negative, got " +
                                          std::to_string(request.max_tokens)));
  }
  if (prompt_tokens >= context) {
    return refuse(Status::InvalidArgument(
        "the prompt has " + std::to_string(prompt_tokens) +
        " tokens; the model's context holds " + std::to_string(context) +
        " per sequence (prompt and generated tokens together)"));
  }
  if (request.max_tokens > context - prompt_tokens) {
    return refuse(Status::InvalidArgument(
        "the prompt (" + std::to_string(prompt_tokens) + " tokens) plus max_tokens (" +
        std::to_string(request.max_tokens) + ") exceed the model's context of " +
        std::to_string(context) + " tokens per sequence"));
  }
  if (request.max_tokens > 0) {
    r->max_tokens = request.max_tokens;
  } else if (model_->kv_cache_layout() == KvCacheLayout::kPerSequence) {
    // Unset (chat clients rarely send one): until the sequence's own stream is full, as in
    // llama-server; the stream is no one else's, so reserving it costs the others nothing.
    r->max_tokens = context - prompt_tokens;
  } else {
    // Shared pool: a sequence's share of it, less the prompt, but at least a quarter share.
    // Admission reserves prompt + max_tokens cells, so "until the context is full" would
    // reserve the whole cache and run every such request alone.
    const int32_t share = context / std::max(1, model_->max_sequences());
    r->max_tokens = std::min(context - prompt_tokens, std::max(share - prompt_tokens, share / 4));
    r->max_tokens = std::max(1, r->max_tokens);
  }

  SamplingParams params = request.sampling;
  params.compute_logprob = request.logprobs;
  auto sampler = CreateSampler(params);
  if (!sampler.ok()) return refuse(sampler.status());
  r->sampler = std::move(sampler).value();
  for (std::string& s : request.stop) {
    if (!s.empty()) r->stop.push_back(std::move(s));
  }
  r->cancellation = std::move(request.cancellation);
  r->timings = request.timings;
  r->call_micros = start;
  r->deadline_micros = request.deadline_micros;
  if (r->deadline_micros == 0 && options_.default_timeout_millis > 0) {
    r->deadline_micros = start + options_.default_timeout_millis * 1000;
  }
  const int64_t tokenized = clock_.NowMicros();
  r->timings.tokenize_micros += tokenized - start;
  r->arrival_micros = tokenized;  // Queue time starts once the request is ready to run.

  Status refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      refused = Status::Unavailable("the model is shutting down");
    } else if (static_cast<int32_t>(waiting_.size()) >= options_.max_waiting_requests) {
      refused = Status::ResourceExhausted(
          std::to_string(waiting_.size()) + " generation requests are already waiting for model '" +
          options_.model_name + "'");
    } else {
      waiting_.push_back(std::move(r));
      stats_.waiting = static_cast<int32_t>(waiting_.size());
    }
  }
  // Answered outside the lock: a sink call must not run under it.
  if (!refused.ok()) return refuse(std::move(refused));
  wake_.notify_one();
}

void GenerationScheduler::Stop(bool drain) {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    drain_ = drain;
    stats_.stopping = true;
  }
  wake_.notify_all();
  thread_.join();
  // This step loop's share of the model's gauges goes with it (a reload's new copy, or the
  // model's other variants, keep theirs).
  if (options_.metrics) {
    const GenerationMetrics& m = *options_.metrics;
    m.running_sequences->Dec(published_.running);
    m.waiting_requests->Dec(published_.waiting);
    m.kv_used_cells->Dec(published_.kv_used_cells);
    m.kv_reserved_cells->Dec(published_.kv_reserved_cells);
    m.kv_capacity_cells->Dec(published_.kv_capacity_cells);
  }
  published_ = {};
}

GenerationSchedulerStats GenerationScheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void GenerationScheduler::ExpireAndAdmitLocked(
    int64_t now, std::vector<std::pair<std::unique_ptr<Request>, Status>>* ended,
    std::vector<std::unique_ptr<Sequence>>* admitted) {
  const int64_t max_delay = options_.max_queue_delay_millis * 1000;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Request& r = **it;
    Status status;
    if (IsCancelled(r.cancellation)) {
      status = Status::Cancelled("the client went away");
    } else if (r.deadline_micros > 0 && now >= r.deadline_micros) {
      status = Status::DeadlineExceeded("the deadline passed before generation started");
    } else if (max_delay > 0 && now - r.arrival_micros > max_delay) {
      status = Status::ResourceExhausted(
          "waited " + std::to_string((now - r.arrival_micros) / 1000) +
          " ms for KV-cache space on model '" + options_.model_name + "' (limit " +
          std::to_string(options_.max_queue_delay_millis) + " ms)");
    }
    if (status.ok()) {
      ++it;
      continue;
    }
    ended->emplace_back(std::move(*it), std::move(status));
    it = waiting_.erase(it);
  }
  // First come, first served: a request that does not fit holds back the ones behind it, so a
  // large request is not starved by a stream of small ones.
  const int32_t capacity = model_->context_tokens();
  while (!waiting_.empty() && !free_ids_.empty()) {
    const Request& front = *waiting_.front();
    const std::pair<size_t, int32_t> choice = PickSequenceLocked(front.prompt);
    const size_t pick = choice.first;
    const int32_t reuse = choice.second;
    auto fits = [&] { return reserved_cells_ + front.cells() + IdleCellsLocked(pick) <= capacity; };
    while (!fits() && EvictIdleLocked(pick)) {
    }
    if (!fits()) break;
    auto seq = std::make_unique<Sequence>();
    seq->request = std::move(waiting_.front());
    waiting_.pop_front();
    seq->id = free_ids_[pick];
    free_ids_.erase(free_ids_.begin() + static_cast<std::ptrdiff_t>(pick));
    // Keep the shared prefix, drop what followed it (the cache holds exactly `cached`).
    std::vector<TokenId>& kept = kept_tokens_[static_cast<size_t>(seq->id)];
    if (static_cast<int32_t>(kept.size()) > reuse &&
        !model_->RemoveTokens(seq->id, reuse, -1).ok()) {
      (void)model_->RemoveSequence(seq->id);  // Not expected; start afresh rather than fail.
      kept.clear();
    }
    kept.resize(std::min(kept.size(), static_cast<size_t>(reuse)));
    seq->cached = std::move(kept);
    kept.clear();
    CopyLongerPrefixLocked(*seq, *admitted);
    seq->reused = static_cast<int32_t>(seq->cached.size());
    seq->prefilled = seq->cached.size();
    seq->position = seq->reused;
    seq->admitted_micros = now;
    reserved_cells_ += seq->request->cells();
    admitted->push_back(std::move(seq));
  }
}

void GenerationScheduler::CopyLongerPrefixLocked(
    Sequence& seq, const std::vector<std::unique_ptr<Sequence>>& admitted) {
  if (!options_.reuse_prompt_prefix) return;
  // A copy costs a KV stream (per-sequence layout: about 12 MB for SmolLM2's 512 cells, a
  // millisecond or two inside the next step) where one prompt token costs 2.4-2.8 ms of the
  // step; below a few tokens' gain it is not worth the copy.
  constexpr int32_t kMinGainTokens = 4;
  const std::vector<TokenId>& prompt = seq.request->prompt;
  const auto most = static_cast<int32_t>(prompt.size()) - 1;  // As PickSequenceLocked.
  const Sequence* source = nullptr;
  const auto kept = static_cast<int32_t>(seq.cached.size());
  int32_t longest = kept;
  auto consider = [&](const std::unique_ptr<Sequence>& other) {
    const int32_t common = std::min(CommonPrefix(other->cached, prompt), most);
    if (common > longest) {
      longest = common;
      source = other.get();
    }
  };
  std::for_each(running_.begin(), running_.end(), consider);
  std::for_each(admitted.begin(), admitted.end(), consider);
  if (source == nullptr || longest - kept < kMinGainTokens) return;
  // The sequence's own kept tokens are a shorter prefix of the same prompt: they make way.
  if (!model_->RemoveSequence(seq.id).ok()) return;  // Not expected; prefill as chosen.
  seq.cached.clear();
  if (model_->CopyPrefix(source->id, seq.id, longest).ok()) {
    seq.cached.assign(prompt.begin(), prompt.begin() + longest);
    ++stats_.prefix_copies;
    if (options_.metrics) options_.metrics->prefix_copies->Inc();
  }
}

std::pair<size_t, int32_t> GenerationScheduler::PickSequenceLocked(
    const std::vector<TokenId>& prompt) const {
  // The longest common prefix wins. Among equals: with a stream per sequence, the lowest id,
  // because llama.cpp computes a step once per run of consecutive sequence ids in it (see
  // LlamaGenerativeModel::Decode), so running ids packed from 0 make a step one graph run
  // where scattered ids made several (3-4 ms each for this model on 2 cores); with one shared
  // pool, where the ids cost nothing, the sequence freed longest ago, so that the most
  // recently used prefixes stay cached longest. At least one prompt token is always
  // prefilled again: its logits predict the first generated token.
  const bool lowest_id = model_->kv_cache_layout() == KvCacheLayout::kPerSequence;
  size_t best = 0;
  int32_t best_reuse = -1;
  const auto most = static_cast<int32_t>(prompt.size()) - 1;
  for (size_t i = 0; i < free_ids_.size(); ++i) {
    const auto id = static_cast<size_t>(free_ids_[i]);
    const auto best_id = static_cast<size_t>(free_ids_[best]);
    const int32_t reuse = std::min(CommonPrefix(kept_tokens_[id], prompt), most);
    const bool better_tie = lowest_id ? id < best_id : freed_micros_[id] < freed_micros_[best_id];
    if (reuse > best_reuse || (reuse == best_reuse && better_tie)) {
      best = i;
      best_reuse = reuse;
    }
  }
  return {best, std::max(best_reuse, 0)};
}

int32_t GenerationScheduler::IdleCellsLocked(size_t except) const {
  if (model_->kv_cache_layout() != KvCacheLayout::kShared) return 0;  // Streams of their own.
  int32_t cells = 0;
  for (size_t i = 0; i < free_ids_.size(); ++i) {
    if (i != except) {
      cells += static_cast<int32_t>(kept_tokens_[static_cast<size_t>(free_ids_[i])].size());
    }
  }
  return cells;
}

bool GenerationScheduler::EvictIdleLocked(size_t except) {
  size_t oldest = free_ids_.size();
  for (size_t i = 0; i < free_ids_.size(); ++i) {
    const auto id = static_cast<size_t>(free_ids_[i]);
    if (i == except || kept_tokens_[id].empty()) continue;
    if (oldest == free_ids_.size() ||
        freed_micros_[id] < freed_micros_[static_cast<size_t>(free_ids_[oldest])]) {
      oldest = i;
    }
  }
  if (oldest == free_ids_.size()) return false;
  const SequenceId id = free_ids_[oldest];
  (void)model_->RemoveSequence(id);
  kept_tokens_[static_cast<size_t>(id)].clear();
  return true;
}

void GenerationScheduler::Loop() {
  for (;;) {
    std::vector<std::pair<std::unique_ptr<Request>, Status>> ended;
    std::vector<std::unique_ptr<Sequence>> admitted;
    bool abort = false;
    bool exit = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return !waiting_.empty() || !running_.empty() || stopping_; });
      const int64_t now = clock_.NowMicros();
      if (stopping_ && !drain_) {
        abort = true;
        for (auto& r : waiting_) {
          ended.emplace_back(std::move(r), Status::Unavailable("the model is shutting down"));
        }
        waiting_.clear();
      } else {
        ExpireAndAdmitLocked(now, &ended, &admitted);
      }
      exit = stopping_ && waiting_.empty() && running_.empty() && admitted.empty();
      // Current before any sink call of this round (PublishStats adds the KV usage later).
      stats_.waiting = static_cast<int32_t>(waiting_.size());
      stats_.running = static_cast<int32_t>(running_.size() + admitted.size());
      stats_.kv_reserved_cells = reserved_cells_;
    }
    for (auto& [request, status] : ended) {
      if (options_.metrics) {
        if (status.code() == Status::Code::kResourceExhausted) options_.metrics->rejected->Inc();
        if (status.code() == Status::Code::kCancelled) options_.metrics->cancellations->Inc();
      }
      request->sink->OnEnd(std::move(status));
    }
    if (abort) {
      while (!running_.empty()) {
        std::unique_ptr<Sequence> seq = std::move(running_.back());
        running_.pop_back();
        Finish(std::move(seq), Status::Unavailable("the model is shutting down"));
      }
      PublishStats();
      return;
    }
    for (auto& seq : admitted) {
      const Request& r = *seq->request;
      if (options_.metrics) {
        options_.metrics->queue_seconds->Observe(Seconds(seq->admitted_micros - r.arrival_micros));
        options_.metrics->prompt_tokens->Inc(static_cast<double>(r.prompt.size()));
        options_.metrics->cached_prompt_tokens->Inc(static_cast<double>(seq->reused));
      }
      GenerationStart start;
      start.model = options_.model_name;
      start.variant = options_.variant_name;
      start.prompt_tokens = static_cast<int32_t>(r.prompt.size());
      start.queue_micros = seq->admitted_micros - r.arrival_micros;
      r.sink->OnStart(start);
      running_.push_back(std::move(seq));
    }
    if (exit) {
      PublishStats();
      return;
    }
    if (!running_.empty()) Step();
    PublishStats();
  }
}

void GenerationScheduler::Step() {
  const int64_t now = clock_.NowMicros();
  // Sequences whose request ended from outside leave before the step spends work on them.
  for (size_t i = 0; i < running_.size();) {
    const Request& r = *running_[i]->request;
    Status status;
    if (IsCancelled(r.cancellation)) {
      status = Status::Cancelled("the client went away");
    } else if (r.deadline_micros > 0 && now >= r.deadline_micros) {
      status = Status::DeadlineExceeded("the deadline passed after " +
                                        std::to_string(running_[i]->generated) +
                                        " generated tokens");
    }
    if (status.ok()) {
      ++i;
      continue;
    }
    if (options_.metrics && status.code() == Status::Code::kCancelled) {
      options_.metrics->cancellations->Inc();
    }
    std::unique_ptr<Sequence> seq = std::move(running_[i]);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    Finish(std::move(seq), std::move(status));
  }
  if (running_.empty()) return;
  PackSequenceIds(now);

  // One token for every generating sequence first (they are what clients are waiting on),
  // then prompt chunks with what is left of the step's budget, the prompt with the fewest
  // tokens left first (admission order among equals): a short question admitted after a
  // long document gets its first token in a step or two instead of waiting behind the
  // document's whole prefill (measured: 10 s behind a 1,077-token prompt at 16 tokens a step).
  // The long prompt still gets every token the short ones leave, so it waits only while
  // shorter prompts are being prefilled.
  DecodeBatch batch;
  std::vector<Sequence*> owner;  // Per batch entry.
  int32_t budget = step_tokens_;
  for (auto& seq : running_) {
    if (seq->pending == kNoToken || budget == 0) continue;
    batch.Add(seq->pending, seq->position, seq->id, /*logits=*/true);
    owner.push_back(seq.get());
    --budget;
  }
  std::vector<Sequence*> prefilling;
  for (auto& seq : running_) {
    if (seq->prefilled < seq->request->prompt.size()) prefilling.push_back(seq.get());
  }
  std::stable_sort(prefilling.begin(), prefilling.end(), [](const Sequence* a, const Sequence* b) {
    return a->request->prompt.size() - a->prefilled < b->request->prompt.size() - b->prefilled;
  });
  // While streams are generating, prompt tokens only up to the step time bound, or what the
  // first-token target needs if that is more.
  const auto generating = static_cast<int32_t>(batch.size());
  const int64_t max_step_micros = StepTimeBoundMicros();
  if (generating > 0 && max_step_micros > 0 && !prefilling.empty() && step_cost_.measured() &&
      step_cost_.micros_per_token() > 0) {
    const double fit = (static_cast<double>(max_step_micros) - step_cost_.fixed_micros()) /
                       step_cost_.micros_per_token();
    const auto prefill = static_cast<int32_t>(
        std::max<double>(options_.min_prefill_tokens_per_step, fit - generating));
    budget = std::min(
        budget, std::max({prefill, PromptTokensForFirstTokenTarget(prefilling, generating, now),
                          PromptTokensForSlowGapBudget(generating)}));
  }
  std::vector<std::pair<Sequence*, int32_t>> chunks;
  for (Sequence* seq : prefilling) {
    const std::vector<TokenId>& prompt = seq->request->prompt;
    if (budget == 0) break;
    const auto remaining = static_cast<int32_t>(prompt.size() - seq->prefilled);
    const int32_t n = std::min({remaining, options_.prefill_chunk_tokens, budget});
    batch.AddTokens(std::span<const TokenId>(prompt).subspan(seq->prefilled, n), seq->position,
                    seq->id, /*logits_for_last=*/n == remaining);
    owner.insert(owner.end(), static_cast<size_t>(n), seq);
    chunks.emplace_back(seq, n);
    budget -= n;
  }
  // The chunks went to a prefix of `prefilling` (each got at least one token until the
  // budget ran out); the rest got none.
  AddGapFillers(std::span<Sequence* const>(prefilling).subspan(chunks.size()), &batch, &owner,
                &chunks);
  if (batch.empty()) return;

  const auto step_tokens = static_cast<int64_t>(batch.size());
  // Predicted before this step joins the fit: what the step time bound went by.
  const int64_t predicted_micros = step_cost_.measured() ? step_cost_.BatchMicros(step_tokens) : 0;
  const int64_t step_start = clock_.NowMicros();
  auto logits = model_->Decode(batch);
  const int64_t step_end = clock_.NowMicros();
  step_cost_.Observe(step_tokens, step_tokens, step_end - step_start);
  // A generating stream's gap is from the previous step's end (its last token) to this one's:
  // the decode and the loop's own work between steps.
  if (generating > 0) {
    RecordGaps(generating,
               step_end - (last_step_end_micros_ > 0 ? last_step_end_micros_ : step_start),
               predicted_micros);
  }
  last_step_end_micros_ = step_end;
  if (spdlog::should_log(spdlog::level::trace)) {
    TraceStep(step_end - step_start, predicted_micros, max_step_micros, generating, chunks,
              prefilling.size(), now);
  }
  if (!logits.ok()) {
    // Admission reserved every cell, so this is a bug or an engine failure: end the
    // sequences in the batch rather than retrying forever.
    const Status error = Status::Internal("decode failed: " + logits.status().message());
    std::vector<Sequence*> failed(owner.begin(), owner.end());
    std::sort(failed.begin(), failed.end());
    failed.erase(std::unique(failed.begin(), failed.end()), failed.end());
    for (Sequence* f : failed) {
      auto it = std::find_if(running_.begin(), running_.end(),
                             [f](const auto& s) { return s.get() == f; });
      std::unique_ptr<Sequence> seq = std::move(*it);
      running_.erase(it);
      Finish(std::move(seq), error);
    }
    return;
  }
  for (auto& [seq, n] : chunks) {
    const auto from = seq->request->prompt.begin() + static_cast<std::ptrdiff_t>(seq->prefilled);
    seq->cached.insert(seq->cached.end(), from, from + n);
    seq->prefilled += static_cast<size_t>(n);
    seq->position += n;
    prompt_tokens_decoded_ += n;
  }
  for (Sequence* seq : owner) {
    if (seq->pending != kNoToken) {
      seq->cached.push_back(seq->pending);
      seq->pending = kNoToken;
      seq->position += 1;
      ++generated_tokens_decoded_;
    }
  }
  const int64_t decoded = clock_.NowMicros();
  std::vector<Sequence*> finished;
  for (int32_t row = 0; row < logits->rows(); ++row) {
    Sequence* seq = owner[static_cast<size_t>(logits->EntryIndex(row))];
    if (Advance(*seq, logits->Row(row), decoded)) finished.push_back(seq);
  }
  for (Sequence* f : finished) {
    auto it =
        std::find_if(running_.begin(), running_.end(), [f](const auto& s) { return s.get() == f; });
    std::unique_ptr<Sequence> seq = std::move(*it);
    running_.erase(it);
    GenerationEnd end;
    end.finish_reason = seq->finish_reason;
    Finish(std::move(seq), std::move(end));
  }
}

void GenerationScheduler::TraceStep(int64_t micros, int64_t predicted_micros, int64_t bound_micros,
                                    int32_t generating,
                                    const std::vector<std::pair<Sequence*, int32_t>>& chunks,
                                    size_t prefilling, int64_t now) const {
  // Per chunk: the request's age at the step's start in ms, the tokens the step took of it,
  // and what was left of its prompt before the step.
  std::string parts;
  for (const auto& [seq, n] : chunks) {
    if (!parts.empty()) parts += ' ';
    parts += std::to_string((now - seq->request->call_micros) / 1000) + "ms:" + std::to_string(n) +
             "/" + std::to_string(seq->request->prompt.size() - seq->prefilled);
  }
  spdlog::trace(
      "generation step {}/{}: {} us (predicted {}, bound {}, margin {}), {} generating, "
      "{} prompts prefilling, chunks [{}], slow-gap window {:.0f} of {:.0f}",
      options_.model_name, options_.variant_name, micros, predicted_micros, bound_micros,
      step_cost_.wait_margin_micros(), generating, prefilling, parts, window_slow_gaps_,
      window_gaps_);
}

void GenerationScheduler::PackSequenceIds(int64_t now) {
  if (model_->kv_cache_layout() != KvCacheLayout::kPerSequence) return;
  for (;;) {
    auto highest = std::max_element(running_.begin(), running_.end(),
                                    [](const auto& a, const auto& b) { return a->id < b->id; });
    Sequence& seq = **highest;
    std::lock_guard<std::mutex> lock(mu_);
    const auto lowest_free = std::min_element(free_ids_.begin(), free_ids_.end());
    if (lowest_free == free_ids_.end() || *lowest_free > seq.id) return;
    const SequenceId to = *lowest_free;
    const auto length = static_cast<TokenPosition>(seq.cached.size());
    // The free id's kept tokens make way (what they share with the moved sequence's, a common
    // system prompt, moves with it). Neither call is expected to fail; if one does, the step
    // just runs split, as without packing.
    if (!model_->RemoveSequence(to).ok()) return;
    kept_tokens_[static_cast<size_t>(to)].clear();
    if (length > 0 && !model_->CopyPrefix(seq.id, to, length).ok()) return;
    *lowest_free = seq.id;
    kept_tokens_[static_cast<size_t>(seq.id)] = seq.cached;
    freed_micros_[static_cast<size_t>(seq.id)] = now;
    seq.id = to;
    ++stats_.sequence_moves;
    if (options_.metrics) options_.metrics->sequence_moves->Inc();
  }
}

void GenerationScheduler::AddGapFillers(std::span<Sequence* const> unchunked, DecodeBatch* batch,
                                        std::vector<Sequence*>* owner,
                                        std::vector<std::pair<Sequence*, int32_t>>* chunks) {
  if (model_->kv_cache_layout() != KvCacheLayout::kPerSequence || batch->empty()) return;
  SequenceId lowest = std::numeric_limits<SequenceId>::max();
  SequenceId highest = std::numeric_limits<SequenceId>::min();
  for (const DecodeEntry& e : batch->entries) {
    lowest = std::min(lowest, e.sequence);
    highest = std::max(highest, e.sequence);
  }
  for (Sequence* seq : unchunked) {
    if (batch->size() >= static_cast<size_t>(step_tokens_)) break;
    if (seq->id <= lowest || seq->id >= highest) continue;
    const std::vector<TokenId>& prompt = seq->request->prompt;
    const bool last = seq->prefilled + 1 == prompt.size();
    batch->Add(prompt[seq->prefilled], seq->position, seq->id, /*logits=*/last);
    owner->push_back(seq);
    chunks->emplace_back(seq, 1);
  }
}

void GenerationScheduler::RecordGaps(int32_t generating, int64_t gap_micros,
                                     int64_t predicted_micros) {
  if (options_.inter_token_slo_millis <= 0) return;
  // The step-time margin is the step cost model's wait margin (StepCostOptions).
  if (predicted_micros > 0) step_cost_.ObserveWait(predicted_micros, gap_micros);
  constexpr double kWindowGaps = 4000;
  window_gaps_ += generating;
  if (gap_micros > options_.inter_token_slo_millis * 1000) window_slow_gaps_ += generating;
  if (window_gaps_ > 2 * kWindowGaps) {
    window_gaps_ /= 2;
    window_slow_gaps_ /= 2;
  }
}

int64_t GenerationScheduler::StepTimeBoundMicros() const {
  int64_t bound = options_.max_step_millis_while_generating * 1000;
  if (options_.inter_token_slo_millis > 0) {
    const int64_t from_slo =
        options_.inter_token_slo_millis * 1000 - step_cost_.wait_margin_micros();
    bound = bound > 0 ? std::min(bound, from_slo) : from_slo;
  }
  return std::max<int64_t>(bound, 0);
}

int32_t GenerationScheduler::PromptTokensForSlowGapBudget(int32_t generating) const {
  if (options_.inter_token_slo_millis <= 0 || options_.slow_gaps_per_mille <= 0) return 0;
  const double share = options_.slow_gaps_per_mille / 1000.0;
  // Enough gaps seen that one slow gap is within the share, and this step's gaps, all slow,
  // still within it.
  if (window_gaps_ < 1.0 / share) return 0;
  if (window_slow_gaps_ + generating > share * (window_gaps_ + generating)) return 0;
  // As many prompt tokens as fit a step of twice the SLO: no stall longer than that.
  const double c = step_cost_.micros_per_token();
  const double fit = (2.0 * static_cast<double>(options_.inter_token_slo_millis) * 1000 -
                      step_cost_.fixed_micros()) /
                         c -
                     generating;
  return fit > 0 ? static_cast<int32_t>(fit) : 0;
}

int32_t GenerationScheduler::PromptTokensForFirstTokenTarget(
    const std::vector<Sequence*>& prefilling, int32_t generating, int64_t now) const {
  if (options_.target_time_to_first_token_millis <= 0) return 0;
  // A prompt of R tokens left, prefilled p a step, takes R / p steps of (d + c p): R / p
  // times the step's fixed and generating part d, plus c R for its own tokens, whatever p.
  // To end within the time left L: p >= R d / (L - c R); no p does when L <= c R.
  const double c = step_cost_.micros_per_token();
  const double d = step_cost_.fixed_micros() + c * generating;
  const auto target = static_cast<double>(options_.target_time_to_first_token_millis) * 1000;
  double tokens = 0;
  for (const Sequence* seq : prefilling) {
    const auto remaining = static_cast<double>(seq->request->prompt.size() - seq->prefilled);
    const double slack =
        target - static_cast<double>(now - seq->request->call_micros) - c * remaining;
    if (slack <= 0) continue;  // Too long or too late: the step time bound rules.
    tokens += std::min(remaining, std::ceil(remaining * d / slack));
  }
  return static_cast<int32_t>(std::min<double>(tokens, std::numeric_limits<int32_t>::max()));
}

bool GenerationScheduler::Advance(Sequence& seq, std::span<const float> logits, int64_t now) {
  Request& r = *seq.request;
  const SampledToken sampled = r.sampler->Sample(logits);
  ++seq.generated;
  ++seq.unsent_tokens;
  seq.last_logprob = sampled.logprob;
  if (options_.metrics) {
    options_.metrics->generated_tokens->Inc();
    if (seq.first_token_micros == 0) {
      options_.metrics->time_to_first_token_seconds->Observe(Seconds(now - r.call_micros));
    } else {
      options_.metrics->inter_token_seconds->Observe(Seconds(now - seq.last_token_micros));
    }
  }
  if (seq.first_token_micros == 0) seq.first_token_micros = now;
  seq.last_token_micros = now;

  auto send = [&](size_t bytes) {
    GenerationPiece piece;
    piece.text = seq.held.substr(0, bytes);
    piece.tokens = seq.unsent_tokens;
    piece.logprob = seq.last_logprob;
    seq.held.erase(0, bytes);
    seq.unsent_tokens = 0;
    r.sink->OnText(piece);
  };
  // At the end, what was held back is released: it did not become a stop string, and a
  // character the model never completed is sent as U+FFFD rather than as broken UTF-8.
  auto flush = [&](std::string reason) {
    if (const size_t partial = IncompleteUtf8Tail(seq.held); partial > 0) {
      seq.held.replace(seq.held.size() - partial, partial, "\xEF\xBF\xBD");
    }
    if (!seq.held.empty() || seq.unsent_tokens > 0) send(seq.held.size());
    seq.finish_reason = std::move(reason);
    return true;
  };

  if (model_->IsEndOfGeneration(sampled.token)) return flush("stop");
  seq.held += model_->TokenToPiece(sampled.token, /*render_special=*/false);
  // A stop string can only start in held text: anything already sent was no possible start.
  size_t stop_at = std::string::npos;
  for (const std::string& stop : r.stop) stop_at = std::min(stop_at, seq.held.find(stop));
  if (stop_at != std::string::npos) {
    seq.held.resize(stop_at);
    send(stop_at);
    seq.finish_reason = "stop";
    return true;
  }
  if (seq.generated >= r.max_tokens) return flush("length");
  const size_t hold = std::max(PossibleStopTail(seq.held, r.stop), IncompleteUtf8Tail(seq.held));
  if (seq.held.size() > hold) send(seq.held.size() - hold);
  seq.pending = sampled.token;
  return false;
}

void GenerationScheduler::Finish(std::unique_ptr<Sequence> seq, Result<GenerationEnd> end) {
  // The sequence is free before the sink hears of the end, so a client that sends its next
  // request on OnEnd finds it free (and its tokens kept for reuse). A failed decode may have
  // left the cache unlike `cached`: then nothing is kept.
  const int64_t now = clock_.NowMicros();
  const bool keep = options_.reuse_prompt_prefix &&
                    (end.ok() || end.status().code() != Status::Code::kInternal) &&
                    model_->SequenceLength(seq->id) ==
                        static_cast<TokenPosition>(seq->cached.size());
  if (!keep) {
    (void)model_->RemoveSequence(seq->id);
    seq->cached.clear();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_ids_.push_back(seq->id);
    kept_tokens_[static_cast<size_t>(seq->id)] = std::move(seq->cached);
    freed_micros_[static_cast<size_t>(seq->id)] = now;
    reserved_cells_ -= seq->request->cells();
    stats_.running = static_cast<int32_t>(running_.size());
    stats_.kv_used_cells = model_->CacheUsage().used_cells;
    stats_.kv_reserved_cells = reserved_cells_;
    // Current before the sink hears of the end, like the rest: a caller that reads stats()
    // once its request ended (the precision controller's tests) sees the request's tokens.
    stats_.prompt_tokens_decoded = prompt_tokens_decoded_;
    stats_.generated_tokens_decoded = generated_tokens_decoded_;
  }
  const Request& r = *seq->request;
  if (options_.metrics) options_.metrics->duration_seconds->Observe(Seconds(now - r.call_micros));
  if (end.ok()) {
    end->model = options_.model_name;
    end->variant = options_.variant_name;
    end->usage.prompt_tokens = static_cast<int32_t>(r.prompt.size());
    end->usage.completion_tokens = seq->generated;
    end->usage.cached_prompt_tokens = seq->reused;
    end->timings = r.timings;
    end->timings.queue_micros = seq->admitted_micros - r.arrival_micros;
    const int64_t first = seq->first_token_micros > 0 ? seq->first_token_micros : now;
    end->timings.prefill_micros = first - seq->admitted_micros;
    end->timings.decode_micros = now - first;
  }
  r.sink->OnEnd(std::move(end));
}

void GenerationScheduler::PublishStats() {
  const KvCacheUsage usage = model_->CacheUsage();
  GenerationSchedulerStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.running = static_cast<int32_t>(running_.size());
    stats_.waiting = static_cast<int32_t>(waiting_.size());
    stats_.kv_used_cells = usage.used_cells;
    stats_.kv_capacity_cells = usage.capacity_cells;
    stats_.kv_reserved_cells = reserved_cells_;
    stats_.prompt_tokens_decoded = prompt_tokens_decoded_;
    stats_.generated_tokens_decoded = generated_tokens_decoded_;
    stats_.step_time_bound_micros = StepTimeBoundMicros();
    stats_.step_time_margin_micros = step_cost_.wait_margin_micros();
    s = stats_;
  }
  if (options_.metrics) {
    const GenerationMetrics& m = *options_.metrics;
    m.running_sequences->Inc(s.running - published_.running);
    m.waiting_requests->Inc(s.waiting - published_.waiting);
    m.kv_used_cells->Inc(s.kv_used_cells - published_.kv_used_cells);
    m.kv_reserved_cells->Inc(s.kv_reserved_cells - published_.kv_reserved_cells);
    m.kv_capacity_cells->Inc(s.kv_capacity_cells - published_.kv_capacity_cells);
  }
  published_ = s;
}

}  // namespace tailcut
