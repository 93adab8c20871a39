// Process-wide llama.cpp set-up shared by the engine's *_llama.cc files: the backend is
// initialised once, and llama.cpp's log is routed into spdlog (warnings and errors only; its
// info lines are for a console, not a server's log). llama.cpp reports most failures of load,
// decode and quantize only through that log, so the last error line is kept per thread for the
// Status that follows the failed call. No llama.cpp type appears here.
//
// Thread-safety: all functions may be called from any thread. The last error is thread-local:
// clear it, make the llama.cpp call, then read it, on the same thread.
#pragma once

#include <string>

namespace tailcut::llama_backend {

// llama_backend_init() and the log hook, once per process (later calls return at once).
void Init();

// Forgets this thread's last logged llama.cpp error (call before the call that may fail).
void ClearLastError();

// The last error line llama.cpp logged on this thread since ClearLastError(), or
// "no detail logged".
std::string LastError();

}  // namespace tailcut::llama_backend
