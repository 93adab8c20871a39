// chat_template.h on llama.cpp: common/chat.h's Jinja renderer (libllama-common, which
// scripts/fetch_llama_cpp.sh builds beside libllama), with llama_chat_apply_template behind it.
#include <llama-common/chat.h>
#include <llama.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <mutex>
#include <vector>

#include "engine/chat_template.h"

namespace tailcut {

struct LlamaChatTemplate::Jinja {
  common_chat_templates_ptr templates;
  bool enable_thinking = false;
  // What llama-server's tokenizer adds around the rendered prompt (it tokenizes chat prompts
  // with add_special, after common_chat_templates_apply has removed a BOS the template wrote),
  // as text: this class's callers tokenize without add_special.
  std::string bos;
  std::string eos;
};

LlamaChatTemplate::LlamaChatTemplate(const llama_model* model, std::string model_path,
                                     const std::string& source)
    : path_(std::move(model_path)), source_(source) {
  if (source_.empty()) {
    if (const char* t = llama_model_chat_template(model, nullptr)) source_ = t;
  }
  if (source_.empty()) return;  // Without a template common_chat_templates_init uses ChatML.
  renderer_ = Renderer::kBuiltIn;
  try {
    auto jinja = std::make_unique<Jinja>();
    jinja->templates = common_chat_templates_init(model, source);
    // llama-server's default (--reasoning auto): thinking on where the template has the switch.
    jinja->enable_thinking = common_chat_templates_support_enable_thinking(jinja->templates.get());
    const llama_vocab* vocab = llama_model_get_vocab(model);
    if (llama_vocab_get_add_bos(vocab) && llama_vocab_bos(vocab) != LLAMA_TOKEN_NULL) {
      jinja->bos = common_token_to_piece(vocab, llama_vocab_bos(vocab), true);
    }
    if (llama_vocab_get_add_eos(vocab) && llama_vocab_eos(vocab) != LLAMA_TOKEN_NULL) {
      jinja->eos = common_token_to_piece(vocab, llama_vocab_eos(vocab), true);
    }
    jinja_ = std::move(jinja);
    renderer_ = Renderer::kJinja;
  } catch (const std::exception& e) {
    // common_chat_templates_init rethrows the parser's error as a plain std::exception (its
    // words go to llama.cpp's common log): parsing once more recovers them.
    std::string why = e.what();
    try {
      common_chat_template parsed(source_, "", "");
    } catch (const std::exception& parse_error) {
      why = parse_error.what();
    }
    spdlog::warn(
        "'{}': llama.cpp's Jinja engine cannot parse the chat template ({}); chat prompts use "
        "llama_chat_apply_template's built-in rendering of its family instead, which may differ "
        "from llama-server's",
        path_, why);
  }
}

LlamaChatTemplate::~LlamaChatTemplate() = default;

Result<std::string> LlamaChatTemplate::Render(std::span<const ChatMessage> messages,
                                              bool add_generation_prompt) const {
  switch (renderer_) {
    case Renderer::kJinja:
      return RenderJinja(messages, add_generation_prompt);
    case Renderer::kBuiltIn:
      return RenderBuiltIn(messages, add_generation_prompt);
    case Renderer::kNone:
      break;
  }
  return Status::FailedPrecondition("'" + path_ + "' has no chat template");
}

Result<std::string> LlamaChatTemplate::RenderJinja(std::span<const ChatMessage> messages,
                                                   bool add_generation_prompt) const {
  // The inputs llama-server's OpenAI chat endpoint gives a request of plain text messages
  // (tools/server/server-common.cpp, oaicompat_chat_params_parse, with its default options).
  common_chat_templates_inputs in;
  in.messages.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    common_chat_msg msg;
    msg.role = m.role;
    msg.content = m.content;
    in.messages.push_back(std::move(msg));
  }
  in.use_jinja = true;
  in.add_generation_prompt = add_generation_prompt;
  in.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
  in.enable_thinking = jinja_->enable_thinking;
  std::string prompt;
  try {
    // One render at a time in the process: llama.cpp's chat code reads the date for the
    // templates that print it with std::localtime, whose result is one static buffer (a data
    // race between two renders, which ThreadSanitizer caught). Rendering takes well under a
    // millisecond.
    static std::mutex render_mu;
    std::lock_guard<std::mutex> lock(render_mu);
    prompt = common_chat_templates_apply(jinja_->templates.get(), in).prompt;
  } catch (const std::exception& e) {  // The template's raise_exception, or a runtime error.
    return Status::InvalidArgument("the chat template of '" + path_ +
                                   "' refused the messages: " + e.what());
  }
  return jinja_->bos + prompt + jinja_->eos;
}

Result<std::string> LlamaChatTemplate::RenderBuiltIn(std::span<const ChatMessage> messages,
                                                     bool add_generation_prompt) const {
  std::vector<llama_chat_message> chat;
  chat.reserve(messages.size());
  size_t chars = 0;
  for (const ChatMessage& m : messages) {
    chat.push_back({m.role.c_str(), m.content.c_str()});
    chars += m.role.size() + m.content.size();
  }
  std::string out(2 * chars + 256, '\0');
  int32_t n =
      llama_chat_apply_template(source_.c_str(), chat.data(), chat.size(), add_generation_prompt,
                                out.data(), static_cast<int32_t>(out.size()));
  if (n > static_cast<int32_t>(out.size())) {
    out.resize(static_cast<size_t>(n));
    n = llama_chat_apply_template(source_.c_str(), chat.data(), chat.size(), add_generation_prompt,
                                  out.data(), n);
  }
  if (n < 0) {
    return Status::FailedPrecondition("llama.cpp can neither parse the chat template of '" + path_ +
                                      "' as Jinja nor recognise its family");
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace tailcut
