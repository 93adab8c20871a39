// GenerationScheduler: continuous batching for one generative model (the vLLM / llama.cpp
// server design). One step-loop thread owns the model and every running sequence; each step
// decodes one token for every running sequence and, in the same Decode() call, a chunk of the
// prompt of each newly admitted request, so a long prompt is prefilled a chunk per step beside
// the running streams instead of stalling them. Requests join the running set between steps
// and leave it the step they finish, freeing their KV cells for the next. How many prompt
// tokens a step takes while streams generate is a trade between the two halves of a latency
// SLO: a step time bound for the running streams' inter-token latency, and a first-token
// target for the new prompts that can still make it (the Options say how each is applied).
//
// Admission reserves each request's whole KV need up front (prompt + max_tokens cells, and a
// sequence id), so a running sequence can never run out of cache halfway: no preemption, no
// recomputation. A request that does not fit waits, first come first served, in a bounded
// queue; a full queue or a wait longer than max_queue_delay_millis is kResourceExhausted (the
// front-end's 429).
//
// Prompt prefixes are reused as llama-server's slots reuse them: a finished sequence keeps its
// tokens in the KV cache, and a new request takes the free sequence whose kept tokens share
// the longest prefix with its prompt (a common system prompt, the earlier turns of a chat),
// drops the rest and prefills only what differs (GenerationUsage::cached_prompt_tokens). With
// no common prefix it takes the sequence idle longest, so recent caches survive. In a shared
// KV layout kept tokens hold cells of the pool, so admission drops idle caches (least
// recently used first) when a request needs their cells.
//
// Generate() validates and tokenises (chat template included) on the calling thread, so the
// step loop only decodes, samples and detokenises. Sink calls come from the step loop, never
// under the scheduler's lock, one request's never concurrently (core/generation.h).
//
// Thread-safety: Generate() and stats() are safe from any thread; Stop() once, not from a
// sink. The model must outlive the scheduler and is driven only by its step loop after
// construction (its vocabulary methods are used from callers' threads, which it allows).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "core/batch_cost_model.h"
#include "core/generation.h"
#include "core/generation_metrics.h"
#include "engine/generative_model.h"

namespace tailcut {

struct GenerationSchedulerOptions {
  // Most tokens one step decodes: one per running sequence plus the prefill chunks. Bounds the
  // step's duration, hence the inter-token latency every running stream sees while prompts
  // are prefilled; larger prefills prompts in fewer steps (better time to first token and
  // throughput). 0 = the model's batch_tokens(), the most one Decode() takes.
  int32_t max_tokens_per_step = 0;
  // Most prompt tokens of one request in one step. Smaller spreads a long prompt over more
  // steps (the running streams stall less, the new request's first token comes later).
  int32_t prefill_chunk_tokens = 256;
  // Longest a step may take while sequences are generating: the step's prompt tokens are cut
  // to what the step time fitted on recent steps (BatchCostModel: fixed + per token) says
  // fits beside the generating ones. This is the inter-token latency every running stream
  // sees while new prompts are prefilled (each prefill token costs about as much as one
  // stream's token); lower makes new requests' first token later. With
  // inter_token_slo_millis set, the bound is also never above that SLO less the step-time
  // margin below, so a fixed bound is needed only to hold steps shorter than the SLO asks.
  // 0 = none of its own (with no SLO either: no time bound, only the token budgets above).
  int64_t max_step_millis_while_generating = 0;
  // Prompt tokens a step takes at least, whatever the time bound, so that prompts progress
  // when the generating streams alone fill it (their first token would never come).
  int32_t min_prefill_tokens_per_step = 16;
  // Time to first token the prefill aims for while streams generate; 0 = none. The step time
  // bound above favours the running streams; this favours the new ones. Each step, a prompt
  // that can still get its first token within this time of its arrival gets as many tokens as
  // it needs to (at the fitted step cost: the fewer steps it is spread over, the fewer fixed
  // and generating parts it waits for), even past the step time bound; one that cannot (too
  // long, or already late) gets no more than the bound gives, so a long document never
  // stalls the running streams for the sake of a target it would miss anyway. Set it under
  // the TTFT SLO by a step or so; lower makes steps longer (inter-token latency) when prompts
  // arrive while many streams generate.
  int64_t target_time_to_first_token_millis = 0;
  // The inter-token SLO is a percentile, not a bound on every gap: a P99 lets 1 % of gaps be
  // slow. llama-server spends that slack without counting it (a whole prompt in one step);
  // this spends it on purpose. A step may take whole prompts past the step time bound (at
  // most a step of 2 x inter_token_slo_millis, as the fitted step cost predicts, so that no
  // stall is longer) while the running streams' gaps over inter_token_slo_millis, this
  // step's counted as slow, stay within slow_gaps_per_mille of the recent gaps (the last
  // 4,000 to 8,000: the counts are halved at 8,000; and at least 1000 / slow_gaps_per_mille
  // gaps seen). Lower per mille keeps the percentile safer and gives fewer first tokens in
  // one step; set it under the percentile the SLO is judged at (5 for a P99). 0 = off: the
  // step time bound and the first-token target alone.
  //
  // The SLO also bounds ordinary steps: their prompt tokens are cut so that the predicted
  // step plus the step-time margin stays within inter_token_slo_millis. The margin is the
  // 99th percentile of how much longer the streams' gaps were than the fitted step time
  // predicted (the loop's own work between steps, a preempted thread, the fit's error),
  // tracked over recent generating steps (stochastic approximation: up 0.99 %, down 0.01 % of
  // the SLO a step), so a quiet machine gets steps close to the SLO and a noisy one keeps
  // its distance. It starts at a quarter of the SLO, until steps have been seen.
  int64_t inter_token_slo_millis = 0;
  int32_t slow_gaps_per_mille = 5;
  // Requests waiting for KV space or a free sequence: beyond it Generate() answers
  // kResourceExhausted at once. Bounds the memory and the wait behind a full model; a client
  // then retries elsewhere rather than queueing unboundedly. At least 1: every request passes
  // through the queue, however briefly.
  int32_t max_waiting_requests = 64;
  // Longest a request may wait for admission before it gets kResourceExhausted; 0 = no limit
  // (only its deadline). Below the client's own timeout, so it learns early to go elsewhere.
  int64_t max_queue_delay_millis = 10'000;
  // Deadline for requests that bring none (GenerateRequest::deadline_micros == 0); 0 = none.
  int64_t default_timeout_millis = 0;
  // Whether a finished sequence's tokens stay in its KV cache for a later prompt that starts
  // the same way (see above). Off, every request prefills its whole prompt: for comparisons
  // and for tests of prefill itself.
  bool reuse_prompt_prefix = true;
  // Metric series of this model; null records nothing (tests).
  const GenerationMetrics* metrics = nullptr;
  // Names in GenerationStart/End (canonical model name, the GGUF variant).
  std::string model_name;
  std::string variant_name;
};

// A snapshot of the scheduler, updated by the step loop after each step.
struct GenerationSchedulerStats {
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t kv_used_cells = 0;
  int32_t kv_capacity_cells = 0;
  int32_t kv_reserved_cells = 0;  // Promised to running sequences (prompt + max_tokens each).
  bool stopping = false;          // Stop() has begun: new requests are refused.
  // Since the start, tokens the step loop decoded: prompt tokens (prefill chunks) and
  // generated tokens fed back; the precision controller's prefill share.
  int64_t prompt_tokens_decoded = 0;
  int64_t generated_tokens_decoded = 0;
  // Since the start, running sequences moved to a lower id (PackSequenceIds).
  int64_t sequence_moves = 0;
  // Since the start, admitted requests whose prompt prefix was copied from another sequence's
  // KV cache rather than prefilled (a burst beyond the sequences that kept one).
  int64_t prefix_copies = 0;
  // The step time bound in force while streams generate (the smaller of
  // max_step_millis_while_generating and the SLO less the step-time margin); 0 = none.
  int64_t step_time_bound_micros = 0;
  int64_t step_time_margin_micros = 0;
};

class GenerationScheduler {
 public:
  // Starts the step loop on `model`, which it drives from then on.
  GenerationScheduler(GenerativeModel* model, GenerationSchedulerOptions options,
                      const Clock& clock = SystemClock::Get());
  ~GenerationScheduler();  // Stop(false) unless stopped.

  GenerationScheduler(const GenerationScheduler&) = delete;
  GenerationScheduler& operator=(const GenerationScheduler&) = delete;

  // Tokenises `request` on this thread, then queues it; the answer goes to `sink`
  // (core/generation.h). Refused at once, OnEnd only: kInvalidArgument (empty or over-long
  // prompt, bad sampling parameters, no chat template), kResourceExhausted (the waiting queue
  // is full), kUnavailable (stopping).
  void Generate(GenerateRequest request, GenerationSinkPtr sink);

  // Refuses new requests, then: with drain, runs every admitted and waiting request to its
  // end (each bounded by its deadline) — what SIGTERM does; without, ends them all with
  // kUnavailable at the next step. Returns when the step loop has exited and every sink has
  // had its OnEnd. Once; not from a sink.
  void Stop(bool drain);

  GenerationSchedulerStats stats() const;
  const GenerationSchedulerOptions& options() const { return options_; }

 private:
  struct Request;   // A tokenised request and its sink.
  struct Sequence;  // A running request: its sequence id, sampler, text state.

  void Loop();
  // Under mu_: ends waiting requests that waited too long, passed their deadline or were
  // cancelled (appended to `ended`), then moves those that fit into `admitted`.
  void ExpireAndAdmitLocked(int64_t now,
                            std::vector<std::pair<std::unique_ptr<Request>, Status>>* ended,
                            std::vector<std::unique_ptr<Sequence>>* admitted);
  // Under mu_: the free sequence id for `prompt` (as index into free_ids_) and how many of its
  // kept tokens the prompt reuses.
  std::pair<size_t, int32_t> PickSequenceLocked(const std::vector<TokenId>& prompt) const;
  // Under mu_, for `seq` just given its free id and its kept tokens (`cached`): when a running
  // sequence, or one admitted before it in this round (`admitted`), caches a longer prefix of
  // its prompt, copies that prefix into it (GenerativeModel::CopyPrefix) and sets `cached` to
  // it, instead of prefilling it again. The free ids hold only what finished requests left,
  // so in a burst of more requests than warm ids each new one started from an empty stream
  // and prefilled the chat template's system prompt once more (about 20 tokens for SmolLM2, a
  // step or two while streams generate). The caller derives `reused`, `prefilled` and
  // `position` from `cached` afterwards.
  void CopyLongerPrefixLocked(Sequence& seq,
                              const std::vector<std::unique_ptr<Sequence>>& admitted);
  // Under mu_: KV cells held by idle sequences' kept tokens other than free_ids_[except]
  // (shared layout only; 0 otherwise).
  int32_t IdleCellsLocked(size_t except) const;
  // Under mu_: drops the kept tokens of the least recently freed idle sequence other than
  // free_ids_[except]; false when there is none.
  bool EvictIdleLocked(size_t except);
  // Ends the running sequences that were cancelled or passed their deadline, then runs one
  // Decode() over the rest: a token for each generating sequence, prompt chunks after.
  void Step();
  // With a KV stream per sequence, llama.cpp computes a step once per run of consecutive
  // sequence ids in it (LlamaGenerativeModel::Decode): each hole in a step's ids is one more
  // pass over the weights (8-11 ms for SmolLM2 on 2 cores), for nothing. The next two keep
  // the ids consecutive.
  //
  // A finished sequence's id stays free until a new request takes it (a hole in ~30 % of
  // steps at 1 req/s): while a free id lies below the highest running sequence's, moves that
  // sequence down to it, its stream copied (CopyPrefix; about 12 MB for SmolLM2's 512-cell
  // streams, a millisecond or two). The moved-from id keeps the tokens for prefix reuse.
  void PackSequenceIds(int64_t now);
  // A prompt still waiting for its prefill splits the step wherever its id lies between the
  // ids that step decodes. Gives each such sequence of `unchunked` (prompts that got no
  // chunk this step) its next prompt token instead (about a third of a pass: prefill it
  // needs anyway), appended to `batch`, `owner` and `chunks` as Step() builds them, within
  // the step's token limit. Measured at saturation (32 sequences, a 32-prompt burst): steps
  // of 16 generating streams took 137 ms against the engine's 61 ms without it.
  void AddGapFillers(std::span<Sequence* const> unchunked, DecodeBatch* batch,
                     std::vector<Sequence*>* owner,
                     std::vector<std::pair<Sequence*, int32_t>>* chunks);
  // Prompt tokens this step may take by spending the slow-gap budget (inter_token_slo_millis),
  // with `generating` tokens of running streams in it; 0 when the budget does not allow it.
  int32_t PromptTokensForSlowGapBudget(int32_t generating) const;
  // Counts a step's `generating` gaps, each `gap_micros` long, into the slow-gap window, and
  // how far the gap overran the `predicted_micros` step time into the step-time margin.
  void RecordGaps(int32_t generating, int64_t gap_micros, int64_t predicted_micros);
  // The step time bound while streams generate, in microseconds; 0 = none (Options).
  int64_t StepTimeBoundMicros() const;
  // Prompt tokens this step needs for target_time_to_first_token_millis (see there), with
  // `generating` tokens of running streams in it.
  int32_t PromptTokensForFirstTokenTarget(const std::vector<Sequence*>& prefilling,
                                          int32_t generating, int64_t now) const;
  // At log level trace, one line per step: its time against the prediction and the bound,
  // the generating streams, and each prompt chunk with its request's age (what explains a
  // first token's time; `--log.level trace`). Called after the step, before the chunks are
  // counted as prefilled; `now` is the step's start.
  void TraceStep(int64_t micros, int64_t predicted_micros, int64_t bound_micros, int32_t generating,
                 const std::vector<std::pair<Sequence*, int32_t>>& chunks, size_t prefilling,
                 int64_t now) const;
  // Samples the token after `seq`'s last decoded one and streams its text; true when the
  // sequence finished with it.
  bool Advance(Sequence& seq, std::span<const float> logits, int64_t now);
  // Frees `seq`'s sequence id, KV cells and reservation, then answers its sink.
  void Finish(std::unique_ptr<Sequence> seq, Result<GenerationEnd> end);
  void PublishStats();

  GenerativeModel* const model_;
  const GenerationSchedulerOptions options_;
  const Clock& clock_;
  const int32_t step_tokens_;  // max_tokens_per_step resolved.

  mutable std::mutex mu_;
  std::condition_variable wake_;  // New work, or Stop().
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<SequenceId> free_ids_;  // Sequence ids no running request holds.
  // Per sequence id, for the free ones: the tokens its KV cache still holds (positions 0 ..)
  // and when it was freed (LRU order). Touched only by the step loop (under mu_ while
  // admitting).
  std::vector<std::vector<TokenId>> kept_tokens_;
  std::vector<int64_t> freed_micros_;
  int32_t reserved_cells_ = 0;        // Sum of the running requests' reservations.
  bool stopping_ = false;             // Generate() refuses.
  bool drain_ = false;
  GenerationSchedulerStats stats_;

  // The step loop's own; no lock.
  std::vector<std::unique_ptr<Sequence>> running_;
  // Step time against the tokens in the step; its wait margin is the step-time margin
  // (StepCostOptions).
  BatchCostModel step_cost_;
  // The slow-gap window (inter_token_slo_millis): gaps of generating streams seen, and those
  // over the SLO, both halved whenever the gaps pass the window's size.
  double window_gaps_ = 0;
  double window_slow_gaps_ = 0;
  int64_t last_step_end_micros_ = 0;  // 0 until a step has run.
  int64_t prompt_tokens_decoded_ = 0;
  int64_t generated_tokens_decoded_ = 0;
  // What PublishStats() last added to the model's gauges: several step loops (one per
  // precision variant) share a model's series, so each adds its change rather than setting.
  GenerationSchedulerStats published_;

  std::mutex stop_mu_;
  bool stopped_ = false;
  std::thread thread_;  // Last: started once everything above exists.
};

}  // namespace tailcut
