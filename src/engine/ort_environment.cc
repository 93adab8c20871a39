#include "engine/ort_environment.h"

#include <cstdlib>
#include <mutex>

#include "common/cpu_quota.h"

namespace tailcut {
namespace {

std::mutex g_mutex;
std::unique_ptr<OrtEnvironment> g_environment;  // Guarded by g_mutex until created.

int ResolveThreads(int requested) {
  return requested > 0 ? requested : AvailableCpus();
}

Ort::ThreadingOptions MakeThreadingOptions(const OrtEnvironmentOptions& options) {
  Ort::ThreadingOptions threading;
  threading.SetGlobalIntraOpNumThreads(ResolveThreads(options.intra_op_threads));
  threading.SetGlobalInterOpNumThreads(options.inter_op_threads > 0 ? options.inter_op_threads : 1);
  threading.SetGlobalSpinControl(options.allow_spinning ? 1 : 0);
  // Denormals are slow on x86 and carry no information in inference activations.
  threading.SetGlobalDenormalAsZero();
  return threading;
}

}  // namespace

OrtEnvironment::OrtEnvironment(const OrtEnvironmentOptions& options)
    : options_(options),
      resolved_intra_op_threads_(ResolveThreads(options.intra_op_threads)),
      env_(MakeThreadingOptions(options), static_cast<OrtLoggingLevel>(options.log_severity),
           "tailcut") {
  env_.DisableTelemetryEvents();
}

Status OrtEnvironment::Init(const OrtEnvironmentOptions& options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_environment) {
    const auto& o = g_environment->options_;
    if (o.intra_op_threads == options.intra_op_threads &&
        o.inter_op_threads == options.inter_op_threads &&
        o.allow_spinning == options.allow_spinning) {
      return Status::Ok();
    }
    return Status::FailedPrecondition(
        "ONNX Runtime environment already created with other thread options");
  }
  // The ONNX Runtime library set-up installs (npm's build) collects telemetry: every process
  // that creates an environment writes a 3 MB SQLite store under ~/.cache/Microsoft and an
  // empty /tmp/mat-debug-<pid>.log, and would send events where it can reach its endpoint.
  // A server does neither; DisableTelemetryEvents() alone does not stop it, the library's own
  // switch does. An operator who set the variable keeps their choice (no overwrite).
  setenv("ORT_DISABLE_TELEMETRY", "1", /*overwrite=*/0);
  try {
    g_environment.reset(new OrtEnvironment(options));
  } catch (const Ort::Exception& e) {
    return Status::Internal(std::string("cannot create ONNX Runtime environment: ") + e.what());
  }
  return Status::Ok();
}

OrtEnvironment& OrtEnvironment::Get() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_environment) return *g_environment;
  }
  (void)Init(OrtEnvironmentOptions{});
  std::lock_guard<std::mutex> lock(g_mutex);
  return *g_environment;
}

std::string OrtEnvironment::RuntimeVersion() {
  return Ort::GetVersionString();
}

}  // namespace tailcut
