// A llama.cpp model's chat template, rendered as llama-server renders it: the GGUF's Jinja
// tokenizer.chat_template run by llama.cpp's own Jinja engine (its common library's
// common_chat_templates_apply, from the same source tree as libllama), with llama-server's
// inputs, so that a chat request gives llama-server's prompt token for token (SmolLM2's
// template, for one, adds a default system prompt when the conversation has none).
//
// A template that llama.cpp's Jinja parser refuses falls back to llama_chat_apply_template,
// llama.cpp's built-in renderings of the template families it recognises by heuristics (no
// default system prompts, no template logic); a model without a template renders nothing.
// No llama.cpp type appears here beyond the forward-declared model.
//
// Thread-safety: Render is const and may be called from any number of threads at once; Jinja
// renders are serialised process-wide inside (llama.cpp's chat code uses std::localtime).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "engine/generative_model.h"

struct llama_model;

namespace tailcut {

class LlamaChatTemplate {
 public:
  enum class Renderer { kNone, kJinja, kBuiltIn };

  // The template of `model` (which must outlive this), or `source` instead when not empty
  // (llama-server's --chat-template). Never fails: a template Jinja cannot parse is logged and
  // rendered by the fallback, and Render reports a missing one.
  LlamaChatTemplate(const llama_model* model, std::string model_path, const std::string& source);
  ~LlamaChatTemplate();
  LlamaChatTemplate(const LlamaChatTemplate&) = delete;
  LlamaChatTemplate& operator=(const LlamaChatTemplate&) = delete;

  // GenerativeModel::ApplyChatTemplate's contract. InvalidArgument when the template refuses
  // the messages (its raise_exception, e.g. for roles out of order), with the template's words;
  // FailedPrecondition when there is no template, or the fallback does not recognise it.
  Result<std::string> Render(std::span<const ChatMessage> messages,
                             bool add_generation_prompt) const;

  Renderer renderer() const { return renderer_; }

 private:
  Result<std::string> RenderJinja(std::span<const ChatMessage> messages,
                                  bool add_generation_prompt) const;
  Result<std::string> RenderBuiltIn(std::span<const ChatMessage> messages,
                                    bool add_generation_prompt) const;

  struct Jinja;  // llama.cpp's parsed templates (common/chat.h), kept out of this header.
  std::string path_;
  std::string source_;
  Renderer renderer_ = Renderer::kNone;
  std::unique_ptr<Jinja> jinja_;
};

}  // namespace tailcut
