// llama_backend.h on llama.cpp: one log callback for the process (llama_log_set is global, so
// the model, sampler and quantizer share it rather than each installing its own).
#include <llama.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <string_view>

#include "engine/llama_backend.h"

namespace tailcut::llama_backend {
namespace {

// llama.cpp logs from the thread that made the call (quantize's worker threads only compute),
// so a thread-local line belongs to that thread's call.
thread_local std::string t_last_error;
thread_local bool t_last_was_error = false;

void LogFromLlama(ggml_log_level level, const char* text, void* /*user_data*/) {
  std::string_view line(text ? text : "");
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.remove_suffix(1);
  switch (level) {
    case GGML_LOG_LEVEL_ERROR:
      t_last_error.assign(line);
      t_last_was_error = true;
      spdlog::error("llama.cpp: {}", line);
      return;
    case GGML_LOG_LEVEL_WARN:
      t_last_was_error = false;
      spdlog::warn("llama.cpp: {}", line);
      return;
    case GGML_LOG_LEVEL_CONT:  // The rest of the previous line.
      if (t_last_was_error) t_last_error.append(line);
      return;
    default:  // Loading, context set-up and quantize are chatty at info level.
      t_last_was_error = false;
      return;
  }
}

}  // namespace

void Init() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(LogFromLlama, nullptr);
    llama_backend_init();
  });
}

void ClearLastError() {
  t_last_error.clear();
}

std::string LastError() {
  return t_last_error.empty() ? std::string("no detail logged") : t_last_error;
}

}  // namespace tailcut::llama_backend
