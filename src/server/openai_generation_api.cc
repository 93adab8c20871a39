#include "server/openai_generation_api.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <random>

#include "server/generation_params.h"
#include "server/generation_sink.h"
#include "server/json_body.h"

namespace tailcut {
namespace {

constexpr std::string_view kCompletionsRoute = "/v1/completions";
constexpr std::string_view kChatRoute = "/v1/chat/completions";

struct GenerationCall {
  GenerateRequest request;
  std::string requested_model;
  bool stream = false;
  bool include_usage = false;
};

Status Bad(std::string message) { return Status::InvalidArgument(std::move(message)); }

Result<std::string> ReadPrompt(const nlohmann::json& j) {
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return Bad("field 'prompt' is required");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    if (it->size() == 1 && (*it)[0].is_string()) return (*it)[0].get<std::string>();
    if (it->size() > 1) {
      return Bad("field 'prompt' holds " + std::to_string(it->size()) +
                 " prompts; send one per request");
    }
    if (it->empty()) return Bad("field 'prompt' must not be empty");
    return Bad("field 'prompt' must be a string (token ids are not accepted), got an array of " +
               JsonTypeName((*it)[0]));
  }
  return Bad("field 'prompt' must be a string, got " + JsonTypeName(*it));
}

Result<std::string> ReadContent(const nlohmann::json& message, const std::string& name) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) return Bad("field '" + name + ".content' is required");
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    return Bad("field '" + name + ".content' must be a string or a list of text parts, got " +
               JsonTypeName(*it));
  }
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& part = (*it)[i];
    const std::string part_name = name + ".content[" + std::to_string(i) + "]";
    if (!part.is_object()) return Bad("field '" + part_name + "' must be an object");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || *type != "text") {
      return Bad("field '" + part_name + ".type' must be \"text\" (only text parts are served)");
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) {
      return Bad("field '" + part_name + ".text' must be a string");
    }
    if (i) text += '\n';
    text += t->get<std::string>();
  }
  return text;
}

Result<std::vector<ChatMessage>> ReadMessages(const nlohmann::json& j) {
  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return Bad("field 'messages' is required");
  if (!it->is_array()) return Bad("field 'messages' must be an array, got " + JsonTypeName(*it));
  if (it->empty()) return Bad("field 'messages' must not be empty");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& m = (*it)[i];
    const std::string name = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) {
      return Bad("field '" + name + "' must be an object, got " + JsonTypeName(m));
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return Bad("field '" + name + ".role' must be a string");
    }
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system turn.
    if (r != "system" && r != "user" && r != "assistant") {
      return Bad("field '" + name + ".role' must be \"system\", \"user\" or \"assistant\", got \"" +
                 role->get<std::string>() + "\"");
    }
    auto content = ReadContent(m, name);
    if (!content.ok()) return content.status();
    messages.push_back({std::move(r), std::move(content).value()});
  }
  return messages;
}

// Fields this server does not implement: answered 400 rather than silently ignored, since
// the answer would not be what the client asked for.
Status RejectUnsupported(const nlohmann::json& j, bool chat) {
  for (const char* field : {"tools", "functions", "tool_choice", "function_call", "suffix",
                            "response_format", "logit_bias", "audio", "modalities"}) {
    auto it = j.find(field);
    if (it == j.end() || it->is_null()) continue;
    if (std::string_view(field) == "tool_choice" && *it == "none") continue;
    if (std::string_view(field) == "response_format" && it->is_object() &&
        it->value("type", "") == "text") {
      continue;
    }
    if (std::string_view(field) == "logit_bias" && it->is_object() && it->empty()) continue;
    return Bad(std::string("field '") + field + "' is not supported by this server");
  }
  if (!chat) {
    auto echo = ReadOptionalBool(j, "echo");
    if (!echo.ok()) return echo.status();
    if (echo->value_or(false)) return Bad("field 'echo' is not supported by this server");
    auto best_of = ReadOptionalInt(j, "best_of");
    if (!best_of.ok()) return best_of.status();
    if (best_of->value_or(1) != 1) return Bad("field 'best_of' must be 1 (the only value served)");
  }
  return Status::Ok();
}

Result<GenerationCall> ParseGenerationRequest(std::string_view body_text, bool chat) {
  auto body = ParseJsonObject(body_text);
  if (!body.ok()) return body.status();
  const nlohmann::json& j = *body;
  GenerationCall call;
  GenerateRequest& req = call.request;

  auto model = ReadOptionalString(j, "model");
  if (!model.ok()) return model.status();
  call.requested_model = model->value_or("default");
  if (call.requested_model.empty()) return Bad("field 'model' must not be empty");
  req.model = call.requested_model;

  req.chat = chat;
  // OpenAI's defaults: 16 tokens for a completion, a chat answer until it ends (or the context
  // is full: 0).
  req.max_tokens = chat ? 0 : 16;
  if (chat) {
    auto messages = ReadMessages(j);
    if (!messages.ok()) return messages.status();
    req.messages = std::move(messages).value();
  } else {
    auto prompt = ReadPrompt(j);
    if (!prompt.ok()) return prompt.status();
    req.prompt = std::move(prompt).value();
  }
  if (Status s = ReadGenerationParams(j, "", chat, &req); !s.ok()) return s;
  // A precision variant pin, as /v1/embeddings takes it (a variant name or a GGUF type).
  auto precision = ReadOptionalString(j, "precision");
  if (!precision.ok()) return precision.status();
  req.precision = precision->value_or("");

  auto n = ReadOptionalInt(j, "n");
  if (!n.ok()) return n.status();
  if (n->value_or(1) != 1) {
    return Bad("field 'n' must be 1 (one choice per request is served), got " +
               std::to_string(**n));
  }
  if (chat) {
    auto logprobs = ReadOptionalBool(j, "logprobs");
    if (!logprobs.ok()) return logprobs.status();
    req.logprobs = logprobs->value_or(false);
    auto top = ReadOptionalInt(j, "top_logprobs");
    if (!top.ok()) return top.status();
    if (top->has_value()) {
      if (!req.logprobs) return Bad("field 'top_logprobs' needs 'logprobs' set to true");
      if (**top != 0) {
        return Bad("field 'top_logprobs' must be 0: alternatives to the sampled token are not "
                   "served");
      }
    }
  } else {
    auto logprobs = ReadOptionalInt(j, "logprobs");
    if (!logprobs.ok()) return logprobs.status();
    if (logprobs->has_value()) {
      if (**logprobs != 0) {
        return Bad("field 'logprobs' must be 0 (the sampled tokens' log-probabilities): "
                   "alternatives are not served, got " + std::to_string(**logprobs));
      }
      req.logprobs = true;
    }
  }
  auto stream = ReadOptionalBool(j, "stream");
  if (!stream.ok()) return stream.status();
  call.stream = stream->value_or(false);
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      return Bad("field 'stream_options' must be an object, got " + JsonTypeName(*it));
    }
    if (!call.stream) return Bad("field 'stream_options' is only allowed with 'stream': true");
    auto usage = it->find("include_usage");
    if (usage != it->end() && !usage->is_null()) {
      if (!usage->is_boolean()) {
        return Bad("field 'stream_options.include_usage' must be a boolean, got " +
                   JsonTypeName(*usage));
      }
      call.include_usage = usage->get<bool>();
    }
  }
  if (auto user = ReadOptionalString(j, "user"); !user.ok()) return user.status();
  if (Status s = RejectUnsupported(j, chat); !s.ok()) return s;
  return call;
}

std::string NewId(std::string_view prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string(prefix) + hex;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A log-probability as JSON. JSON has no infinity; OpenAI writes -9999.0 for "impossible".
void AppendLogprob(float v, std::string* out) {
  if (!std::isfinite(v)) v = -9999.0f;
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, static_cast<size_t>(end - buf));
}

nlohmann::json UsageJson(const GenerationUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

// The chat logprobs entry of one piece: {"token","logprob","bytes","top_logprobs":[]}.
void AppendChatLogprob(const GenerationPiece& piece, std::string* out) {
  *out += "{\"token\":";
  AppendJsonString(piece.text, out);
  *out += ",\"logprob\":";
  AppendLogprob(piece.logprob, out);
  *out += ",\"bytes\":[";
  for (size_t i = 0; i < piece.text.size(); ++i) {
    if (i) *out += ',';
    *out += std::to_string(static_cast<unsigned char>(piece.text[i]));
  }
  *out += "],\"top_logprobs\":[]}";
}

// The events of one streamed completion or chat completion, in OpenAI's chunk shapes.
class OpenAiEvents final : public GenerationEvents {
 public:
  OpenAiEvents(bool chat, std::string id, int64_t created, std::string requested_model,
               bool include_usage, bool logprobs)
      : chat_(chat),
        id_(std::move(id)),
        created_(created),
        model_(std::move(requested_model)),
        include_usage_(include_usage),
        logprobs_(logprobs) {}

  std::vector<std::string> Start(const GenerationStart& start) override {
    // Answer with the name the client used, as OpenAI does; "default" becomes the model's.
    if (model_ == "default") model_ = start.model;
    prefix_ = "{\"id\":";
    AppendJsonString(id_, &prefix_);
    prefix_ += chat_ ? ",\"object\":\"chat.completion.chunk\"" : ",\"object\":\"text_completion\"";
    prefix_ += ",\"created\":" + std::to_string(created_) + ",\"model\":";
    AppendJsonString(model_, &prefix_);
    // The precision variant that generates the answer, in every chunk (as the header).
    prefix_ += ",\"system_fingerprint\":";
    AppendJsonString(start.variant, &prefix_);
    if (!chat_) return {};
    // OpenAI's first chat chunk names the role, with empty content.
    return {Chunk("\"delta\":{\"role\":\"assistant\",\"content\":\"\"}", "null", "null")};
  }

  std::string Text(const GenerationPiece& piece) override {
    if (piece.text.empty()) return {};
    std::string text;
    AppendJsonString(piece.text, &text);
    std::string logprobs = "null";
    if (logprobs_) {
      if (chat_) {
        logprobs = "{\"content\":[";
        AppendChatLogprob(piece, &logprobs);
        logprobs += "]}";
      } else {
        logprobs = "{\"tokens\":[" + text + "],\"token_logprobs\":[";
        AppendLogprob(piece.logprob, &logprobs);
        logprobs += "],\"top_logprobs\":null,\"text_offset\":[" + std::to_string(offset_) + "]}";
      }
    }
    offset_ += piece.text.size();
    return Chunk(chat_ ? "\"delta\":{\"content\":" + text + "}" : "\"text\":" + text, logprobs,
                 "null");
  }

  std::vector<std::string> End(const GenerationEnd& end) override {
    std::string reason;
    AppendJsonString(end.finish_reason, &reason);
    std::vector<std::string> events = {
        Chunk(chat_ ? "\"delta\":{}" : "\"text\":\"\"", "null", reason)};
    if (include_usage_) {
      events.push_back(prefix_ + ",\"choices\":[],\"usage\":" + UsageJson(end.usage).dump() + "}");
    }
    return events;
  }

  std::string Error(const Status& status) override {
    return ErrorResponse(status, ErrorStyle::kOpenAi).body;
  }
  bool done_marker() const override { return true; }

 private:
  // One chunk with one choice: `content` is the choice's delta or text member.
  std::string Chunk(const std::string& content, const std::string& logprobs,
                    const std::string& finish_reason) const {
    std::string out = prefix_;
    out += ",\"choices\":[{\"index\":0,";
    out += content;
    out += ",\"logprobs\":" + logprobs + ",\"finish_reason\":" + finish_reason + "}]";
    if (include_usage_) out += ",\"usage\":null";  // As OpenAI: every chunk but the last.
    out += '}';
    return out;
  }

  const bool chat_;
  const std::string id_;
  const int64_t created_;
  std::string model_;
  const bool include_usage_;
  const bool logprobs_;
  std::string prefix_;  // The members every chunk opens with, from Start().
  size_t offset_ = 0;   // Of the next piece in the completion's text (text_offset).
};

std::string FormatResponse(bool chat, const std::string& id, int64_t created,
                           const std::string& model, const GeneratedText& g, bool logprobs) {
  nlohmann::json choice = {{"index", 0}, {"finish_reason", g.end.finish_reason}};
  nlohmann::json lp = nullptr;
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", g.text}};
    if (logprobs) {
      std::string content = "[";
      for (size_t i = 0; i < g.pieces.size(); ++i) {
        if (i) content += ',';
        AppendChatLogprob(g.pieces[i], &content);
      }
      content += ']';
      lp = {{"content", nlohmann::json::parse(content)}};
    }
  } else {
    choice["text"] = g.text;
    if (logprobs) {
      nlohmann::json tokens = nlohmann::json::array(), values = nlohmann::json::array(),
                     offsets = nlohmann::json::array();
      size_t offset = 0;
      for (const GenerationPiece& p : g.pieces) {
        if (p.text.empty()) continue;
        tokens.push_back(p.text);
        values.push_back(std::isfinite(p.logprob) ? p.logprob : -9999.0f);
        offsets.push_back(offset);
        offset += p.text.size();
      }
      lp = {{"tokens", tokens},
            {"token_logprobs", values},
            {"top_logprobs", nullptr},
            {"text_offset", offsets}};
    }
  }
  choice["logprobs"] = lp;
  nlohmann::json out = {{"id", id},
                        {"object", chat ? "chat.completion" : "text_completion"},
                        {"created", created},
                        {"model", model},
                        // The precision variant that generated it (also X-Tailcut-Variant).
                        {"system_fingerprint", g.start.variant},
                        {"choices", nlohmann::json::array({choice})},
                        {"usage", UsageJson(g.end.usage)}};
  // Generated text may end inside a character the model split; never fail to answer.
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void HandleGeneration(ApiContext& ctx, const HttpExchangePtr& exchange, bool chat) {
  const std::string_view route = chat ? kChatRoute : kCompletionsRoute;
  const int64_t parse_start = ctx.clock().NowMicros();
  auto parsed = ParseGenerationRequest(exchange->TakeBody(), chat);
  if (!parsed.ok()) {
    return ctx.FinishError(exchange, route, "", parsed.status(), ErrorStyle::kOpenAi);
  }
  GenerationCall call = std::move(parsed).value();
  GenerateRequest& req = call.request;
  const int64_t parse_micros = ctx.clock().NowMicros() - parse_start;
  req.timings.parse_micros = parse_micros;
  auto deadline = ctx.DeadlineFromHeaders(*exchange);
  if (!deadline.ok()) {
    return ctx.FinishError(exchange, route, req.model, deadline.status(), ErrorStyle::kOpenAi,
                           req.timings);
  }
  req.deadline_micros = *deadline;
  req.received_micros = exchange->received_micros();
  std::string id = NewId(chat ? "chatcmpl-" : "cmpl-");
  const int64_t created = UnixSeconds();
  GenerationSinkPtr sink;
  if (call.stream) {
    sink = std::make_shared<StreamingGenerationSink>(
        ctx, exchange,
        GenerationRoute{std::string(route), call.requested_model, ErrorStyle::kOpenAi,
                        parse_micros},
        std::make_unique<OpenAiEvents>(chat, std::move(id), created, call.requested_model,
                                       call.include_usage, req.logprobs));
  } else {
    sink = std::make_shared<CollectingGenerationSink>(
        ctx, req.logprobs, parse_micros,
        [&ctx, exchange, chat, route, id = std::move(id), created,
         requested = call.requested_model, logprobs = req.logprobs](Result<GeneratedText> r) {
          if (!r.ok()) {
            return ctx.FinishError(exchange, route, requested, r.status(), ErrorStyle::kOpenAi);
          }
          const int64_t start = ctx.clock().NowMicros();
          const std::string& model = requested == "default" ? r->start.model : requested;
          FinishGenerated(ctx, exchange, route, *r,
                          FormatResponse(chat, id, created, model, *r, logprobs), start);
        });
  }
  ctx.Generate(*exchange, std::move(req), std::move(sink));
}

}  // namespace

void AddOpenAiGenerationRoutes(Router& router, ApiContext& ctx) {
  router.Add("POST", std::string(kCompletionsRoute),
             [&ctx](const HttpExchangePtr& ex) { HandleGeneration(ctx, ex, /*chat=*/false); });
  router.Add("POST", std::string(kChatRoute),
             [&ctx](const HttpExchangePtr& ex) { HandleGeneration(ctx, ex, /*chat=*/true); });
}

}  // namespace tailcut
