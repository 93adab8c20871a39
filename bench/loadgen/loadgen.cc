// tailcut-loadgen: an open-loop HTTP load generator for the benchmarks.
//
// Requests are sent on a fixed schedule (constant rate, or Poisson arrivals) whatever the
// server does, and each latency is measured from the request's *scheduled* send time, not
// from when a connection became free. A server that falls behind therefore shows its queueing
// in the latencies instead of hiding it by slowing the client down (no coordinated
// omission). When every connection is busy, requests wait in the generator's own queue and
// that wait counts too.
//
// Why our own tool rather than vegeta or oha: the benchmark machine has two cores shared by
// the server and the client, so the client must cost as little CPU as possible (one Asio
// thread, prebuilt requests, no per-request allocation of note), and it must read request
// bodies from the same workload file for every system under test and report exact
// percentiles (all samples are kept: a 60 s run at 2,000 req/s is 120,000 numbers) plus
// error counts by status in one JSON document the harness consumes.
//
// Usage:
//   tailcut-loadgen --port 8080 --path /v1/embeddings --workload w.jsonl --rate 200
//                   --duration 20 [--warmup 2] [--poisson] [--connections 256] [--start 0]
//                   [--out r.json] [--samples s.jsonl]
// The workload file holds one request body (JSON) per line; lines are used in order, cycling,
// from line --start (0-based), so consecutive runs can continue through a file instead of
// replaying its first lines. With --envelope each line is instead
// {"body_base64": "...", "headers": {"Name": "value", ...}}: a body that is not one line of
// JSON (KServe's binary extension: encoded images after a JSON header) and the headers that go
// with it (Inference-Header-Content-Length, Content-Type), each line its own.
//
// With --stream the responses are Server-Sent Events (OpenAI's `stream: true`, KServe's
// generate_stream): each event's arrival is timed as it is read, and the report adds time to
// first token (from the scheduled send to the first event carrying generated text), the gaps
// between such events (inter-token latency) and their count. An event counts when its JSON has
// non-empty text at choices[0].delta.content (chat), choices[0].text (completions) or
// text_output (KServe); role-only, usage-only and [DONE] events do not. Lines may end in "\n"
// or "\r\n" (sse-starlette, under llama-cpp-python's server, writes "\r\n").
//
// Keep-alive: a request sent on a reused connection that the server had closed meanwhile
// fails before any byte of a response arrives; it is then sent once more on a new connection,
// as HTTP clients do (curl: "Connection died, retrying a fresh connect"), and counted in
// `stale_connection_retries`, not as an error. llama-server needs this: it answers
// "Keep-Alive: timeout=5, max=100" yet closes the connection after each streamed response, so
// without the retry about every other request on a reused connection failed. The latency
// still runs from the scheduled send. Transport errors are counted by kind in
// `transport_error_kinds` (connect, write, timeout, read_before_response, read_mid_response).
//
// The report's percentiles are exact nearest-rank percentiles over every recorded request;
// achieved_rate is 200 responses per second of the measured window, which runs from the end
// of the warm-up to the later of its scheduled end and the last recorded completion (a server
// that falls behind and drains its backlog afterwards does not get credit for a rate it did
// not sustain). send_lag_ms is how late the generator's own timer dispatched requests: when
// it is large the client, not the server, was short of CPU.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string path = "/v1/embeddings";
  std::string workload;
  double rate = 100;
  double duration_s = 10;
  double warmup_s = 1;
  bool poisson = false;
  int max_connections = 256;
  double timeout_s = 30;
  std::string out;
  std::string samples_out;
  std::vector<std::string> headers;
  uint64_t seed = 1;
  uint64_t start_line = 0;
  bool timeline = false;
  bool stream = false;
  bool envelope = false;
};

struct Sample {
  double latency_ms = 0;
  int status = 0;          // HTTP status, or negative for a transport error (TransportError).
  double scheduled_s = 0;  // Scheduled send time, seconds after the start of the run.
  size_t line = 0;         // The workload line sent (0-based).
  // --stream: from the scheduled send to the first token event (< 0: none), the gaps between
  // token events, and how many there were.
  double ttft_ms = -1;
  std::vector<double> gaps_ms;
  int64_t token_events = 0;
  // The response's Server-Timing header, when it has one (--samples): where the server says
  // the request's time went, to set beside the latency the client saw.
  std::string server_timing;
};

// Sample::status of a transport error.
enum TransportError : int {
  kConnect = -1,
  kWrite = -2,
  kTimeout = -3,
  kReadBeforeResponse = -4,  // The connection ended before any byte of the response.
  kReadMidResponse = -5,     // ... or during it.
};
const char* TransportErrorKind(int status) {
  switch (status) {
    case kConnect:
      return "connect";
    case kWrite:
      return "write";
    case kTimeout:
      return "timeout";
    case kReadBeforeResponse:
      return "read_before_response";
    default:
      return "read_mid_response";
  }
}

// Whether one SSE event's data carries generated text (see --stream above).
bool CarriesText(std::string_view data) {
  if (data == "[DONE]") return false;
  const auto j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  // json::empty() is false for every string (it means "no elements" for arrays and objects
  // only), so the string itself is asked: an OpenAI role chunk's "content": "" is no text.
  auto non_empty = [](const nlohmann::json& v) {
    return v.is_string() && !v.get_ref<const std::string&>().empty();
  };
  if (auto t = j.find("text_output"); t != j.end()) return non_empty(*t);
  const auto c = j.find("choices");
  if (c == j.end() || !c->is_array() || c->empty() || !(*c)[0].is_object()) return false;
  const auto& choice = (*c)[0];
  if (auto t = choice.find("text"); t != choice.end()) return non_empty(*t);
  const auto d = choice.find("delta");
  if (d == choice.end() || !d->is_object()) return false;
  const auto content = d->find("content");
  return content != d->end() && non_empty(*content);
}

class LoadGenerator;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(asio::io_context& io, LoadGenerator& gen) : stream_(io), gen_(gen) {}
  void Send(size_t request_index, Clock::time_point scheduled, bool record);
  bool connected = false;

 private:
  void Connect();
  void Write();
  void OnRead(beast::error_code ec);
  void Fail(int code);
  // A request on a reused connection that died before any response byte: true when it was
  // sent again on a new connection (once per request).
  bool RetryStale();
  // --stream: bytes of the event stream as they arrive; times each complete event.
  void OnStreamBytes(std::string_view bytes);

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::string events_;  // Stream bytes not yet split into events.
  Sample sample_;       // The request's stream timings so far.
  Clock::time_point last_event_;
  // The parser keeps a reference to its chunk callback, so it lives here, as long as the
  // connection.
  std::function<size_t(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_ =
      [this](std::uint64_t, beast::string_view body, beast::error_code&) {
        OnStreamBytes({body.data(), body.size()});
        return body.size();
      };
  LoadGenerator& gen_;
  size_t request_index_ = 0;
  Clock::time_point scheduled_;
  bool record_ = false;
  bool reused_ = false;   // Sent on a connection that had carried a request before.
  bool retried_ = false;  // Already sent again once.
};

class LoadGenerator {
 public:
  explicit LoadGenerator(const Options& o) : o_(o), timer_(io_) {}

  bool LoadWorkload() {
    std::ifstream in(o_.workload);
    if (!in) {
      std::cerr << "loadgen: cannot read workload '" << o_.workload << "'\n";
      return false;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto req = std::make_shared<http::request<http::string_body>>(http::verb::post, o_.path, 11);
      req->set(http::field::host, o_.host);
      req->set(http::field::content_type, "application/json");
      req->set(http::field::connection, "keep-alive");
      for (const auto& h : o_.headers) {
        const size_t colon = h.find(':');
        if (colon == std::string::npos) continue;
        std::string value = h.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(value.begin());
        req->set(h.substr(0, colon), value);
      }
      if (o_.envelope) {
        if (!Unwrap(line, req.get())) {
          std::cerr << "loadgen: workload line " << requests_.size() + 1
                    << " is not {\"body_base64\": ..., \"headers\": {...}}\n";
          return false;
        }
      } else {
        req->body() = line;
      }
      req->prepare_payload();
      requests_.push_back(std::move(req));
    }
    if (requests_.empty()) {
      std::cerr << "loadgen: workload '" << o_.workload << "' is empty\n";
      return false;
    }
    return true;
  }

  // An --envelope line: the body (base64) and its own headers, set over the shared ones.
  static bool Unwrap(const std::string& line, http::request<http::string_body>* req) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("body_base64") || !j["body_base64"].is_string()) {
      return false;
    }
    const std::string& encoded = j["body_base64"].get_ref<const std::string&>();
    std::string body(beast::detail::base64::decoded_size(encoded.size()), '\0');
    const auto [written, read] =
        beast::detail::base64::decode(body.data(), encoded.data(), encoded.size());
    // beast stops at the '=' padding: everything before it must have been read.
    const size_t padding = encoded.size() - encoded.find_last_not_of('=') - 1;
    if (read + padding != encoded.size()) return false;
    body.resize(written);
    req->body() = std::move(body);
    if (auto h = j.find("headers"); h != j.end()) {
      if (!h->is_object()) return false;
      for (const auto& [name, value] : h->items()) {
        if (!value.is_string()) return false;
        req->set(name, value.get<std::string>());
      }
    }
    return true;
  }

  int Run() {
    asio::ip::tcp::resolver resolver(io_);
    beast::error_code ec;
    endpoints_ = resolver.resolve(o_.host, std::to_string(o_.port), ec);
    if (ec) {
      std::cerr << "loadgen: cannot resolve " << o_.host << ": " << ec.message() << "\n";
      return 1;
    }
    // The whole schedule up front: the send times do not depend on the server at all.
    std::mt19937_64 rng(o_.seed);
    std::exponential_distribution<double> gap(o_.rate);
    const double total_s = o_.warmup_s + o_.duration_s;
    double t = 0;
    while (t < total_s) {
      schedule_.push_back(t);
      t += o_.poisson ? gap(rng) : 1.0 / o_.rate;
    }
    start_ = Clock::now();
    ScheduleNext();
    io_.run();
    return 0;
  }

  // Called by connections.
  const http::request<http::string_body>& request(size_t i) const { return *requests_[i]; }
  double SecondsSinceStart(Clock::time_point t) const {
    return std::chrono::duration<double>(t - start_).count();
  }
  const tcp::resolver::results_type& endpoints() const { return endpoints_; }
  double timeout_s() const { return o_.timeout_s; }
  bool stream() const { return o_.stream; }
  bool keep_server_timing() const { return !o_.samples_out.empty(); }
  void CountStaleRetry() { ++stale_retries_; }

  void Done(std::shared_ptr<Connection> conn, const Sample& s, bool record) {
    --outstanding_;
    if (record) {
      samples_.push_back(s);
      last_recorded_done_s_ = std::chrono::duration<double>(Clock::now() - start_).count();
    }
    if (s.status < 0) ++transport_errors_;
    if (conn) {
      if (!pending_.empty()) {
        auto [index, scheduled, rec] = pending_.front();
        pending_.pop_front();
        conn->Send(index, scheduled, rec);
        ++outstanding_;
      } else {
        idle_.push_back(std::move(conn));
      }
    } else {
      --open_;
      StartPending();
    }
    MaybeFinish();
  }

  // --samples: one JSON line per recorded request, so a harness can split the report by kind
  // of request (e.g. short and long prompts) with the workload's line numbers.
  void WriteSamples(std::ostream& out) const {
    for (const auto& s : samples_) {
      nlohmann::json j = {{"line", s.line},
                          {"status", s.status},
                          {"scheduled_s", s.scheduled_s},
                          {"latency_ms", s.latency_ms},
                          {"ttft_ms", s.ttft_ms},
                          {"gaps_ms", s.gaps_ms}};
      if (!s.server_timing.empty()) j["server_timing"] = s.server_timing;
      out << j.dump() << "\n";
    }
  }

  nlohmann::json Report() const {
    std::vector<double> all, ok;
    std::map<std::string, int64_t> statuses, transport_kinds;
    for (const auto& s : samples_) {
      all.push_back(s.latency_ms);
      if (s.status == 200) ok.push_back(s.latency_ms);
      statuses[s.status >= 0 ? std::to_string(s.status) : "transport_error"]++;
      if (s.status < 0) transport_kinds[TransportErrorKind(s.status)]++;
    }
    auto pct = [](std::vector<double> v) {
      nlohmann::json j = nlohmann::json::object();
      if (v.empty()) return j;
      std::sort(v.begin(), v.end());
      // Nearest rank: the smallest sample with at least q of all samples at or below it.
      auto at = [&](double q) {
        const double rank = std::ceil(q * static_cast<double>(v.size()));
        const size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
        return v[std::min(v.size() - 1, i)];
      };
      double sum = 0;
      for (double x : v) sum += x;
      j = {{"p50", at(0.50)},    {"p90", at(0.90)}, {"p99", at(0.99)},
           {"p99_9", at(0.999)}, {"max", v.back()}, {"mean", sum / v.size()}};
      return j;
    };
    // Latency by status: how fast refusals (429/503) come back matters as much as how fast
    // answers do.
    std::map<std::string, std::vector<double>> by_status;
    for (const auto& s : samples_) {
      by_status[s.status >= 0 ? std::to_string(s.status) : "transport_error"].push_back(
          s.latency_ms);
    }
    nlohmann::json status_latency = nlohmann::json::object();
    for (auto& [status, v] : by_status) status_latency[status] = pct(v);
    // Per second of scheduled send time (after warm-up): how latency moved during the run.
    nlohmann::json timeline = nlohmann::json::array();
    if (o_.timeline) {
      std::map<int64_t, std::vector<const Sample*>> seconds;
      for (const auto& s : samples_) {
        seconds[static_cast<int64_t>(s.scheduled_s - o_.warmup_s)].push_back(&s);
      }
      for (const auto& [second, list] : seconds) {
        std::vector<double> lat, ok_lat;
        int64_t errors = 0;
        for (const Sample* s : list) {
          lat.push_back(s->latency_ms);
          if (s->status == 200) {
            ok_lat.push_back(s->latency_ms);
          } else {
            ++errors;
          }
        }
        timeline.push_back({{"second", second},
                            {"sent", list.size()},
                            {"non_200", errors},
                            {"latency_ms", pct(lat)},
                            {"ok_latency_ms", pct(ok_lat)}});
      }
    }
    nlohmann::json streaming = nullptr;
    if (o_.stream) {
      std::vector<double> ttft, gaps;
      int64_t events = 0;
      for (const auto& s : samples_) {
        if (s.status != 200) continue;
        if (s.ttft_ms >= 0) ttft.push_back(s.ttft_ms);
        gaps.insert(gaps.end(), s.gaps_ms.begin(), s.gaps_ms.end());
        events += s.token_events;
      }
      const double window = std::max(o_.duration_s, last_recorded_done_s_ - o_.warmup_s);
      streaming = {
          {"ttft_ms", pct(ttft)},
          {"inter_token_ms", pct(gaps)},
          {"token_events", events},
          {"token_events_per_s", window > 0 ? events / window : 0.0},
          {"answers_without_tokens", static_cast<int64_t>(std::count_if(
                                         samples_.begin(), samples_.end(), [](const Sample& s) {
                                           return s.status == 200 && s.ttft_ms < 0;
                                         }))}};
    }
    const int64_t recorded_sent = static_cast<int64_t>(samples_.size()) + unfinished_recorded_;
    // The measured window: from the end of the warm-up to the later of its scheduled end and
    // the last recorded completion.
    const double window_s = std::max(o_.duration_s, last_recorded_done_s_ - o_.warmup_s);
    return {{"offered_rate", o_.rate},
            {"arrivals", o_.poisson ? "poisson" : "constant"},
            {"duration_s", o_.duration_s},
            {"warmup_s", o_.warmup_s},
            {"sent", recorded_sent},
            {"completed", samples_.size()},
            {"ok", ok.size()},
            {"unfinished", unfinished_recorded_},
            {"achieved_rate", window_s > 0 ? ok.size() / window_s : 0.0},
            {"window_s", window_s},
            {"latency_ms", pct(all)},
            {"ok_latency_ms", pct(ok)},
            {"status_counts", statuses},
            {"transport_error_kinds", transport_kinds},
            {"stale_connection_retries", stale_retries_},
            {"status_latency_ms", status_latency},
            {"timeline", timeline},
            {"streaming", streaming},
            {"send_lag_ms", pct(send_lag_ms_)},
            {"start_line", o_.start_line},
            {"next_line", (o_.start_line + next_) % requests_.size()},
            {"max_connections_used", max_open_}};
  }

 private:
  void ScheduleNext() {
    if (next_ >= schedule_.size()) {
      schedule_done_ = true;
      // Give outstanding requests until the timeout, then stop regardless.
      timer_.expires_after(
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout_s)));
      timer_.async_wait([this](beast::error_code ec) {
        if (!ec) Finish();
      });
      MaybeFinish();
      return;
    }
    const auto when = start_ + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(schedule_[next_]));
    timer_.expires_at(when);
    timer_.async_wait([this](beast::error_code ec) {
      if (ec) return;
      const auto now = Clock::now();
      // Send everything that is due (catching up if the timer fired late).
      while (next_ < schedule_.size() &&
             start_ + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(schedule_[next_])) <=
                 now) {
        const auto scheduled = start_ + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(schedule_[next_]));
        const bool record = schedule_[next_] >= o_.warmup_s;
        if (record) {
          send_lag_ms_.push_back(
              std::chrono::duration<double, std::milli>(now - scheduled).count());
        }
        Dispatch((o_.start_line + next_) % requests_.size(), scheduled, record);
        ++next_;
      }
      ScheduleNext();
    });
  }

  void Dispatch(size_t index, Clock::time_point scheduled, bool record) {
    if (record) ++recorded_dispatched_;
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      ++outstanding_;
      conn->Send(index, scheduled, record);
      return;
    }
    pending_.emplace_back(index, scheduled, record);
    StartPending();
  }

  void StartPending() {
    while (!pending_.empty() && open_ < o_.max_connections) {
      auto [index, scheduled, record] = pending_.front();
      pending_.pop_front();
      auto conn = std::make_shared<Connection>(io_, *this);
      ++open_;
      max_open_ = std::max(max_open_, open_);
      ++outstanding_;
      conn->Send(index, scheduled, record);
    }
  }

  void MaybeFinish() {
    if (schedule_done_ && outstanding_ == 0 && pending_.empty()) Finish();
  }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    // Requests still queued here or out on a connection when the timeout struck count as
    // unfinished.
    const int64_t recorded_done = static_cast<int64_t>(samples_.size());
    unfinished_recorded_ = recorded_dispatched_ - recorded_done;
    io_.stop();
  }

  const Options o_;
  asio::io_context io_;
  asio::steady_timer timer_;
  tcp::resolver::results_type endpoints_;
  std::vector<std::shared_ptr<http::request<http::string_body>>> requests_;
  std::vector<double> schedule_;
  size_t next_ = 0;
  Clock::time_point start_;
  std::vector<std::shared_ptr<Connection>> idle_;
  std::deque<std::tuple<size_t, Clock::time_point, bool>> pending_;
  int open_ = 0;
  int max_open_ = 0;
  int64_t outstanding_ = 0;
  int64_t recorded_dispatched_ = 0;
  int64_t unfinished_recorded_ = 0;
  int64_t transport_errors_ = 0;
  int64_t stale_retries_ = 0;
  bool schedule_done_ = false;
  bool finished_ = false;
  std::vector<Sample> samples_;
  std::vector<double> send_lag_ms_;
  double last_recorded_done_s_ = 0;

 public:
  asio::io_context& io() { return io_; }
};

void Connection::Send(size_t request_index, Clock::time_point scheduled, bool record) {
  request_index_ = request_index;
  scheduled_ = scheduled;
  record_ = record;
  retried_ = false;
  reused_ = connected;
  stream_.expires_after(
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gen_.timeout_s())));
  if (connected) return Write();
  Connect();
}

void Connection::Connect() {
  stream_.async_connect(gen_.endpoints(),
                        [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
                          if (ec) return self->Fail(kConnect);
                          self->connected = true;
                          beast::error_code ignored;
                          self->stream_.socket().set_option(tcp::no_delay(true), ignored);
                          self->Write();
                        });
}

bool Connection::RetryStale() {
  if (!reused_ || retried_) return false;
  retried_ = true;
  reused_ = false;
  beast::error_code ignored;
  stream_.socket().close(ignored);
  connected = false;
  buffer_.clear();
  gen_.CountStaleRetry();
  Connect();
  return true;
}

void Connection::Write() {
  http::async_write(stream_, gen_.request(request_index_),
                    [self = shared_from_this()](beast::error_code ec, std::size_t) {
                      if (ec) return self->RetryStale() ? void() : self->Fail(kWrite);
                      self->parser_.emplace();
                      self->parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
                      self->sample_ = {};
                      self->events_.clear();
                      if (self->gen_.stream()) {
                        // Chunks are handed over as they are parsed, so each is timed when
                        // read; the body is not kept.
                        self->parser_->on_chunk_body(self->on_chunk_);
                      }
                      http::async_read(
                          self->stream_, self->buffer_, *self->parser_,
                          [self](beast::error_code ec, std::size_t) { self->OnRead(ec); });
                    });
}

void Connection::OnRead(beast::error_code ec) {
  if (ec == beast::error::timeout) return Fail(kTimeout);
  if (ec) {
    if (parser_->got_some()) return Fail(kReadMidResponse);
    return RetryStale() ? void() : Fail(kReadBeforeResponse);
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - scheduled_).count();
  const auto& response = parser_->get();
  const bool keep = response.keep_alive();
  const int status = static_cast<int>(response.result_int());
  if (!keep) {
    beast::error_code ignored;
    stream_.socket().close(ignored);
    connected = false;
  }
  Sample s = std::move(sample_);
  s.latency_ms = ms;
  s.status = status;
  s.scheduled_s = gen_.SecondsSinceStart(scheduled_);
  s.line = request_index_;
  if (auto it = response.find("Server-Timing"); gen_.keep_server_timing() && it != response.end()) {
    s.server_timing = std::string(it->value());
  }
  gen_.Done(shared_from_this(), s, record_);
}

void Connection::OnStreamBytes(std::string_view bytes) {
  // Lines end in "\n" or "\r\n": dropping every '\r' makes both "\n" (JSON data holds no raw
  // '\r'; SSE's rarely used lone-'\r' line ending is not supported).
  for (char c : bytes) {
    if (c != '\r') events_.push_back(c);
  }
  const auto now = Clock::now();
  size_t end;
  // Events end with a blank line.
  while ((end = events_.find("\n\n")) != std::string::npos) {
    std::string_view event(events_.data(), end);
    bool text = false;
    for (size_t pos = 0; pos < event.size();) {
      size_t eol = event.find('\n', pos);
      if (eol == std::string_view::npos) eol = event.size();
      std::string_view line = event.substr(pos, eol - pos);
      if (line.rfind("data:", 0) == 0) {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        text = text || CarriesText(line);
      }
      pos = eol + 1;
    }
    if (text) {
      if (sample_.token_events == 0) {
        sample_.ttft_ms = std::chrono::duration<double, std::milli>(now - scheduled_).count();
      } else {
        sample_.gaps_ms.push_back(
            std::chrono::duration<double, std::milli>(now - last_event_).count());
      }
      ++sample_.token_events;
      last_event_ = now;
    }
    events_.erase(0, end + 2);
  }
}

void Connection::Fail(int code) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - scheduled_).count();
  beast::error_code ignored;
  stream_.socket().close(ignored);
  connected = false;
  Sample s;
  s.latency_ms = ms;
  s.status = code;
  s.scheduled_s = gen_.SecondsSinceStart(scheduled_);
  s.line = request_index_;
  gen_.Done(nullptr, s, record_);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Open-loop HTTP load generator (no coordinated omission)"};
  app.add_option("--host", o.host, "Server address");
  app.add_option("--port", o.port, "Server port")->required();
  app.add_option("--path", o.path, "Request path");
  app.add_option("--workload", o.workload, "JSONL file: one request body per line")->required();
  app.add_option("--rate", o.rate, "Requests per second")->check(CLI::PositiveNumber);
  app.add_option("--duration", o.duration_s, "Measured seconds (after warm-up)");
  app.add_option("--warmup", o.warmup_s, "Seconds sent before measuring");
  app.add_flag("--poisson", o.poisson, "Poisson arrivals instead of a constant rate");
  app.add_option("--connections", o.max_connections, "Most connections to open");
  app.add_option("--timeout", o.timeout_s, "Seconds to wait for one response");
  app.add_option("-H,--header", o.headers, "Extra header 'Name: value' (repeatable)");
  app.add_option("--seed", o.seed, "Seed for Poisson arrivals");
  app.add_option("--start", o.start_line, "First workload line to send (0-based; wraps around)");
  app.add_flag("--timeline", o.timeline, "Add per-second latency percentiles to the report");
  app.add_flag("--stream", o.stream,
               "Responses are Server-Sent Events: report time to first token and inter-token "
               "latency");
  app.add_flag("--envelope", o.envelope,
               "Workload lines are {\"body_base64\": ..., \"headers\": {...}}: binary bodies "
               "with headers of their own (KServe's binary extension)");
  app.add_option("--out", o.out, "Write the JSON report here (default stdout)");
  app.add_option("--samples", o.samples_out,
                 "Also write each recorded request (workload line, status, latency, TTFT, "
                 "token gaps) here, one JSON object a line");
  CLI11_PARSE(app, argc, argv);

  LoadGenerator gen(o);
  if (!gen.LoadWorkload()) return 1;
  if (int rc = gen.Run(); rc != 0) return rc;
  const std::string report = gen.Report().dump(2);
  if (o.out.empty()) {
    std::cout << report << "\n";
  } else {
    std::ofstream(o.out) << report << "\n";
  }
  if (!o.samples_out.empty()) {
    std::ofstream samples(o.samples_out);
    gen.WriteSamples(samples);
  }
  return 0;
}
