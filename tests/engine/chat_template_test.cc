// Chat templates (src/engine/chat_template_llama.cc) on the real SmolLM2-135M-Instruct GGUF:
// its Jinja template rendered by llama.cpp's Jinja engine as llama-server renders it (the
// template's default system prompt when the conversation has none), a replacement template
// (GenerativeModelOptions.chat_template), the built-in fallback for a template Jinja cannot
// parse, and a template's raise_exception as InvalidArgument naming the problem.
#include <gtest/gtest.h>

#include <vector>

#include "engine/generative_model.h"
#include "tests/engine/test_paths.h"

namespace tailcut {
namespace {

std::unique_ptr<GenerativeModel> Load(const std::string& chat_template = "") {
  GenerativeModelOptions o;
  o.context_tokens = 256;
  o.max_sequences = 1;
  o.batch_tokens = 64;
  o.chat_template = chat_template;
  auto m = LoadGenerativeModel(testing::GgufPath(), o);
  EXPECT_TRUE(m.ok()) << m.status().ToString() << " (scripts/setup.sh installs the GGUF)";
  return m.ok() ? std::move(m).value() : nullptr;
}

const std::string kDefaultSystem =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n";

TEST(ChatTemplateTest, WithoutASystemMessageTheTemplatesDefaultSystemPromptComesFirst) {
  auto model = Load();
  ASSERT_NE(model, nullptr);
  const std::vector<ChatMessage> chat = {{"user", "Hi!"}};
  auto prompt = model->ApplyChatTemplate(chat, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  EXPECT_EQ(*prompt, kDefaultSystem + "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  // SmolLM2 adds no BOS, so the prompt is the template's text alone: 37 tokens for
  // "What is the capital of France?", as llama-server's usage.prompt_tokens says.
  const std::vector<ChatMessage> france = {{"user", "What is the capital of France?"}};
  auto tokens = model->Tokenize(*model->ApplyChatTemplate(france, true), false, true);
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->size(), 37u);
}

TEST(ChatTemplateTest, ASystemMessageReplacesTheDefault) {
  auto model = Load();
  ASSERT_NE(model, nullptr);
  const std::vector<ChatMessage> chat = {{"system", "You are terse."}, {"user", "Hi!"}};
  auto prompt = model->ApplyChatTemplate(chat, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  EXPECT_EQ(*prompt,
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto closed = model->ApplyChatTemplate(chat, false);
  ASSERT_TRUE(closed.ok());
  const std::string opening = "<|im_start|>assistant\n";
  EXPECT_EQ(*closed, prompt->substr(0, prompt->size() - opening.size()));
}

TEST(ChatTemplateTest, AReplacementTemplateIsRenderedInstead) {
  auto model = Load(
      "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
      "{% if add_generation_prompt %}[assistant] {% endif %}");
  ASSERT_NE(model, nullptr);
  const std::vector<ChatMessage> chat = {{"user", "Hi!"}};
  auto prompt = model->ApplyChatTemplate(chat, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  EXPECT_EQ(*prompt, "[user] Hi!\n[assistant] ");
}

TEST(ChatTemplateTest, ATemplateJinjaCannotParseFallsBackToTheBuiltInFamily) {
  // Unterminated: no Jinja parser takes it, but llama.cpp's heuristics see ChatML's markers.
  auto model = Load("{% for message in messages %}<|im_start|>{{ message['role'] }");
  ASSERT_NE(model, nullptr);
  const std::vector<ChatMessage> chat = {{"user", "Hi!"}};
  auto prompt = model->ApplyChatTemplate(chat, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  EXPECT_EQ(*prompt, "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");

  auto unknown = Load("{% for message in messages %}{{ message['content'] }");
  ASSERT_NE(unknown, nullptr);
  auto refused = unknown->ApplyChatTemplate(chat, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("nor recognise its family"), std::string::npos)
      << refused.status().message();
}

TEST(ChatTemplateTest, TheTemplatesRaiseExceptionIsAnInvalidArgumentThatSaysWhy) {
  auto model = Load(
      "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/...') }}"
      "{% endif %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}");
  ASSERT_NE(model, nullptr);
  const std::vector<ChatMessage> alternating = {{"user", "Hi!"}, {"assistant", "Hello."}};
  EXPECT_TRUE(model->ApplyChatTemplate(alternating, false).ok());
  const std::vector<ChatMessage> two_users = {{"user", "Hi!"}, {"user", "Again."}};
  auto refused = model->ApplyChatTemplate(two_users, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("roles must alternate"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace tailcut
