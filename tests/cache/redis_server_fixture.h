// RedisServer: a private, throwaway redis-server for tests. It runs on a free loopback port
// with persistence off (--save "" --appendonly no) in its own temp dir, and can be killed
// (SIGKILL), paused (SIGSTOP), resumed (SIGCONT) and restarted on the same port, to test the
// client against a server that dies, hangs or comes back.
//
// Teardown is reliable: the destructor SIGKILLs and reaps the server and removes its dir, and
// the server is started with PR_SET_PDEATHSIG, so the kernel kills it even if the test binary
// crashes. (The death signal fires when the forking *thread* exits; tests start servers from
// the GoogleTest main thread.)
//
// The binary is $TAILCUT_REDIS_SERVER, else redis-server on PATH, else /usr/bin/redis-server.
// A missing binary fails the test with a clear message (CI installs redis-server).
//
// Thread-safety: none; drive it from the test thread. Command() opens its own connection, so
// it can run while clients under test are busy.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tailcut::testing {

struct RedisReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyDeleter>;

class RedisServer {
 public:
  // `extra_args` go after the fixture's own (e.g. --cluster-enabled yes).
  explicit RedisServer(std::vector<std::string> extra_args = {})
      : extra_args_(std::move(extra_args)) {
    // Admin connections write to a server the test may have just killed.
    signal(SIGPIPE, SIG_IGN);
  }
  ~RedisServer() {
    Kill();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  static std::string FindBinary() {
    if (const char* env = std::getenv("TAILCUT_REDIS_SERVER"); env != nullptr && *env != '\0') {
      return access(env, X_OK) == 0 ? env : "";
    }
    if (const char* path = std::getenv("PATH"); path != nullptr) {
      std::stringstream ss(path);
      std::string dir;
      while (std::getline(ss, dir, ':')) {
        const std::string candidate = (dir.empty() ? "." : dir) + "/redis-server";
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
      }
    }
    return access("/usr/bin/redis-server", X_OK) == 0 ? "/usr/bin/redis-server" : "";
  }

  // Starts the server on a free port; false with `error` set if it can't.
  bool Start(std::string* error) {
    binary_ = FindBinary();
    if (binary_.empty()) {
      *error =
          "redis-server not found ($TAILCUT_REDIS_SERVER, PATH, /usr/bin/redis-server); these "
          "tests need a real Redis: apt-get install redis-server";
      return false;
    }
    char tmpl[] = "/tmp/tailcut-redis-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      *error = "mkdtemp failed";
      return false;
    }
    dir_ = tmpl;
    // Another process can take the port between our probe and redis's bind; try a few.
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = FreePort();
      if (port_ > 0 && Spawn(error)) return true;
    }
    return false;
  }

  // Starts it again on the same port (after Kill()).
  bool Restart(std::string* error) {
    Kill();
    for (int attempt = 0; attempt < 20; ++attempt) {
      if (Spawn(error)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);  // Works on a stopped process too.
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  void Pause() {
    if (pid_ > 0) kill(pid_, SIGSTOP);
  }
  void Resume() {
    if (pid_ > 0) kill(pid_, SIGCONT);
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }

  // Credentials Command() authenticates with (after the test sets requirepass or ACLs).
  void SetAdminAuth(std::string username, std::string password) {
    admin_user_ = std::move(username);
    admin_password_ = std::move(password);
  }

  // Runs one command on a fresh connection; null if the server can't be reached.
  RedisReplyPtr Command(const std::vector<std::string>& args) const {
    timeval tv{2, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (c == nullptr) return nullptr;
    if (c->err != 0) {
      redisFree(c);
      return nullptr;
    }
    redisSetTimeout(c, tv);
    if (!admin_password_.empty()) {
      std::vector<std::string> auth{"AUTH"};
      if (!admin_user_.empty()) auth.push_back(admin_user_);
      auth.push_back(admin_password_);
      RedisReplyPtr r(Run(c, auth));
    }
    RedisReplyPtr r(Run(c, args));
    redisFree(c);
    return r;
  }
  // The reply as text: a string/status/error's text, an integer in decimal, "(nil)", or
  // "(no reply)". Arrays are not rendered.
  std::string CommandText(const std::vector<std::string>& args) const {
    RedisReplyPtr r = Command(args);
    if (r == nullptr) return "(no reply)";
    switch (r->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
      case REDIS_REPLY_ERROR:
        return std::string(r->str, r->len);
      case REDIS_REPLY_INTEGER:
        return std::to_string(r->integer);
      case REDIS_REPLY_NIL:
        return "(nil)";
      default:
        return "(array)";
    }
  }
  // One field of INFO <section>, e.g. InfoField("stats", "total_reads_processed"); -1 if absent.
  int64_t InfoField(const std::string& section, const std::string& field) const {
    const std::string info = CommandText({"INFO", section});
    const std::string key = field + ":";
    const size_t at = info.find(key);
    if (at == std::string::npos) return -1;
    return std::atoll(info.c_str() + at + key.size());
  }

  // A loopback TCP port free at the time of the call.
  static int FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    close(fd);
    return port;
  }

  std::string LogTail() const {
    std::ifstream in(dir_ + "/redis.log");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str();
    return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
  }

 private:
  static redisReply* Run(redisContext* c, const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    return static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
  }

  bool Spawn(std::string* error) {
    const std::string port = std::to_string(port_);
    const std::string log = dir_ + "/redis.log";
    std::vector<std::string> args = {
        binary_, "--port",       port, "--bind",      "127.0.0.1", "--save",
        "",      "--appendonly", "no", "--dir",       dir_,        "--logfile",
        log,     "--daemonize",  "no", "--databases", "16"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      *error = "fork failed";
      return false;
    }
    if (pid == 0) {
      // Only async-signal-safe calls between fork and exec (the parent has threads).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      const int devnull = open("/dev/null", O_RDWR);
      if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
    pid_ = pid;
    // Ready when it answers PING; give up after 10 s or if it exits (e.g. port taken).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < give_up) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *error = "redis-server exited during start-up; log tail:\n" + LogTail();
        return false;
      }
      if (CommandText({"PING"}) == "PONG") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    *error = "redis-server did not answer PING within 10 s; log tail:\n" + LogTail();
    Kill();
    return false;
  }

  std::vector<std::string> extra_args_;
  std::string binary_;
  std::string dir_;
  int port_ = -1;
  pid_t pid_ = -1;
  std::string admin_user_;
  std::string admin_password_;
};

}  // namespace tailcut::testing
