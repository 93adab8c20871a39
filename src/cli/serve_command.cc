// `tailcut serve`: the inference server. Start-up order matters for health checks: the HTTP
// server listens first (answering /health and /v2/health/ready with 503), then the models
// load and warm up, then readiness turns to 200. SIGTERM/SIGINT start a graceful shutdown:
// stop accepting, let in-flight requests finish within the grace period, exit 0.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "common/work_pool.h"
#include "config/engine_layout.h"
#include "config/server_config.h"
#include "core/inference_service.h"
#include "engine/ort_environment.h"
#include "obs/metrics.h"
#include "server/admin_api.h"
#include "server/auth.h"
#include "server/grpc/kserve_grpc_server.h"
#include "server/http_server.h"
#include "server/request_dispatcher.h"
#include "server/server_routes.h"

namespace tailcut::cli {
namespace {

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost" || host.rfind("127.", 0) == 0;
}

int RunServe(ServerConfigLoader& loader) {
  auto loaded = loader.Load();
  if (!loaded.ok()) {
    PrintError(loaded.status().message());
    return 2;
  }
  ServerConfig& config = *loaded;
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  // Signals are taken by this thread alone (sigwait below): block them before any other
  // thread starts so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const EngineLayout layout = ApplyEngineLayout(&config);
  if (Status s = OrtEnvironment::Init(config.engine); !s.ok()) {
    PrintError(s.message());
    return 1;
  }
  MetricsRegistry metrics;
  auto service = InferenceService::Create(config.service, metrics);
  if (!service.ok()) {
    PrintError(service.status().message());
    return 1;
  }
  // Declared before everything its tasks refer to (the context, the router, the service's
  // callbacks), and stopped explicitly below once the server has stopped handing it work.
  WorkPool work_pool(config.work_pool);
  (*service)->SetWorkPool(&work_pool);
  // Before the context, which hands it spans, and destroyed after it (sending what is queued).
  std::unique_ptr<TraceExporter> tracer;
  if (!config.tracing.otlp_endpoint.empty()) {
    auto created = TraceExporter::Create(config.tracing, metrics);
    if (!created.ok()) {
      PrintError(created.status().message());
      return 1;
    }
    tracer = std::move(created).value();
    spdlog::info("tracing: OTLP to {} ({} per million traces started here)",
                 config.tracing.otlp_endpoint, config.tracing.sample_ppm);
  }
  ApiContextOptions api_options;
  api_options.slow_request_log_millis = config.slow_request_log_millis;
  api_options.work_pool = &work_pool;
  api_options.tracer = tracer.get();
  api_options.trace_sample_ppm = config.tracing.sample_ppm;
  ApiContext context(**service, metrics, api_options);
  Router router(context.clock());
  TeiOptions tei;
  tei.max_client_batch_size = static_cast<int>(config.service.text.max_inputs_per_request);
  AddAllRoutes(router, context, tei);
  AddAdminRoutes(router, context, **service);
  auto auth = Authenticator::Create(config.auth);
  if (!auth.ok()) {
    PrintError(auth.status().message());
    return 1;
  }
  Authenticator& authenticator = **auth;

  // Runs on a work-pool thread: IO threads only hand requests over.
  HttpHandler handle = [&router, &authenticator, &context](const HttpExchangePtr& ex) {
    const auto route = Authenticator::Classify(ex->path());
    if (Status s = authenticator.Check(*ex, route); !s.ok()) {
      return context.FinishError(ex, "auth", "", s, ErrorStyle::kOpenAi);
    }
    router.Dispatch(ex);
  };
  auto server = HttpServer::Create(
      config.http, DispatchToWorkPool(work_pool, std::move(handle), context, config.dispatch),
      &metrics);
  if (Status s = server->Start(); !s.ok()) {
    PrintError(s.message());
    return 1;
  }
  // KServe v2 over gRPC beside HTTP: the same context, keys and work pool.
  std::unique_ptr<KServeGrpcServer> grpc_server;
  if (config.grpc.port != 0) {
    KServeGrpcServer::Limits limits;
    limits.host = config.http.host;
    limits.max_message_bytes = config.http.max_body_bytes;
    limits.heavy_request_bytes = config.dispatch.heavy_body_bytes;
    auto started = KServeGrpcServer::Start(config.grpc, limits, context, authenticator, work_pool);
    if (!started.ok()) {
      PrintError(started.status().message());
      server->Stop();
      return 1;
    }
    grpc_server = std::move(started).value();
    spdlog::info("KServe v2 gRPC on {}:{}", config.http.host, grpc_server->port());
    metrics.AddCollectHook(
        [&grpc_server, &gauge = metrics
                                    .AddGauge("tailcut_grpc_calls_in_flight",
                                              "gRPC calls taken and not yet done (a stream is one)")
                                    .Get()] {
          gauge.Set(grpc_server ? static_cast<double>(grpc_server->in_flight()) : 0.0);
        });
  }
  auto in_flight = [&server, &grpc_server] {
    return server->in_flight() + (grpc_server ? grpc_server->in_flight() : 0);
  };
  metrics.AddCollectHook(
      [&server,
       &gauge =
           metrics.AddGauge("tailcut_http_requests_in_flight", "Requests read and not yet answered")
               .Get()] { gauge.Set(static_cast<double>(server->in_flight())); });
  metrics.AddCollectHook(
      [&work_pool, &gauge = metrics
                                .AddGauge("tailcut_work_pool_queued_tasks",
                                          "Requests and responses waiting for a work thread")
                                .Get()] { gauge.Set(static_cast<double>(work_pool.queued())); });
  spdlog::info(
      "tailcut {} listening on http://{}:{} (onnxruntime {}; {} CPUs: {} batch workers per "
      "model x {} inference threads, {}; {} work threads)",
      TAILCUT_VERSION, config.http.host, server->port(), OrtEnvironment::RuntimeVersion(),
      layout.cpus, layout.batch_workers, OrtEnvironment::Get().intra_op_threads(), layout.rule,
      work_pool.threads());
  spdlog::info(
      "access: {} API keys ({}), {} admin keys", authenticator.api_key_count(),
      authenticator.api_keys_required() ? "inference routes need a key" : "inference routes open",
      authenticator.admin_key_count());
  if (IsLoopback(config.http.host)) {
    spdlog::info("bound to loopback only; set --host 0.0.0.0 to accept other machines");
  } else {
    spdlog::warn("bound to {}: reachable from other machines", config.http.host);
  }

  if (Status s = (*service)->LoadStartupModels(); !s.ok()) {
    spdlog::error("not all models loaded; /health reports not ready: {}", s.message());
  } else {
    spdlog::info("ready: default model '{}'", (*service)->default_model());
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("{} received: draining (grace {} ms)",
               signal_number == SIGTERM ? "SIGTERM" : "SIGINT", config.shutdown_grace_millis);
  // Not ready at once (load balancers stop sending), every answer closes its connection,
  // and for a short delay new connections are still served: a client that raced with the
  // signal gets an answer instead of a refused connection.
  (*service)->BeginDrain();
  server->CloseConnectionsAfterResponses();
  std::this_thread::sleep_for(std::chrono::milliseconds(
      std::min(config.shutdown_delay_millis, config.shutdown_grace_millis)));
  server->StopAccepting();
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config.shutdown_grace_millis);
  // gRPC's Shutdown() stops taking calls and blocks until those in flight are answered (at the
  // grace period's end it cancels them, and they are answered as the service fails its
  // queued work below), so it runs beside this thread's drain.
  std::thread grpc_shutdown;
  if (grpc_server) {
    grpc_shutdown = std::thread([&grpc_server, grace = config.shutdown_grace_millis] {
      grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace));
    });
  }
  // Done when nothing has been in flight for a short quiet period: a client that sent on a
  // kept-alive connection just before the signal gets its answer (with Connection: close).
  constexpr auto kQuiet = std::chrono::milliseconds(50);
  auto idle_since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < give_up) {
    const auto now = std::chrono::steady_clock::now();
    if (in_flight() > 0) {
      idle_since = now;
    } else if (now - idle_since >= kQuiet) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int64_t left = in_flight();
  (*service)->Shutdown(/*drain=*/false);
  // Let the answers of anything failed by the shutdown reach their sockets.
  for (int i = 0; i < 100 && server->in_flight() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int64_t dropped = server->in_flight();
  server->Stop();
  if (grpc_shutdown.joinable()) grpc_shutdown.join();
  grpc_server.reset();
  // No more requests come in; what is queued still runs (its answers go nowhere now), and
  // a completion that arrives later runs on its own thread (WorkPool::Submit after Stop).
  work_pool.Stop();
  // The service goes first, explicitly: its Redis client calls back whatever is still
  // pending (an admin flush's answer, for one) while the API context and the stopped server
  // those callbacks refer to still exist. Declaration order would destroy them first.
  service->reset();
  if (dropped > 0) {
    spdlog::error("stopped with {} requests unanswered", dropped);
  } else if (left > 0) {
    spdlog::warn("stopped: {} requests still queued after the grace period were answered 503",
                 left);
  } else {
    spdlog::info("stopped cleanly");
  }
  return 0;
}

}  // namespace

Runner AddServeCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Run the inference server (OpenAI /v1/embeddings, TEI /embed, KServe v2, /metrics).\n"
      "Settings: defaults < --config file (YAML) < TAILCUT_* environment < flags; see "
      "docs/configuration.md");
  auto loader = std::make_shared<ServerConfigLoader>(*cmd);
  return [loader] { return RunServe(*loader); };
}

}  // namespace tailcut::cli
