// RawClient: a blocking loopback HTTP/1.1 client for tests of the real server, which writes
// exactly the bytes it is given (so framing the server must reject reaches it untouched) and
// reads responses, chunks or raw bytes as they arrive. Post() and Get() build requests.
//
// Thread-safety: none; one test thread per client.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tailcut {

struct RawResponse {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // Names in lower case.
  std::string body;
};

// A blocking loopback client that writes exactly the bytes it is given, so framing the server
// must reject reaches it untouched.
class RawClient {
 public:
  using milliseconds = std::chrono::milliseconds;
  using steady_clock = std::chrono::steady_clock;

  explicit RawClient(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // One response, or nullopt when the connection closes (or nothing comes for `timeout`).
  std::optional<RawResponse> Read(milliseconds timeout = milliseconds(10'000)) {
    const auto deadline = steady_clock::now() + timeout;
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return std::nullopt;
    }
    RawResponse r;
    const std::string head = buffer_.substr(0, head_end);
    buffer_.erase(0, head_end + 4);
    size_t line_end = head.find("\r\n");
    r.status = static_cast<unsigned>(std::stoul(head.substr(9, 3)));
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end - start);
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    const size_t length =
        r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    while (buffer_.size() < length) {
      if (!Fill(deadline)) return std::nullopt;
    }
    r.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return r;
  }

  // Reads until `marker` has arrived; returns what came before and including it (consumed),
  // or nullopt when the connection closes or nothing comes for `timeout`.
  std::optional<std::string> ReadUntil(std::string_view marker,
                                       milliseconds timeout = milliseconds(10'000)) {
    const auto deadline = steady_clock::now() + timeout;
    size_t at;
    while ((at = buffer_.find(marker)) == std::string::npos) {
      if (!Fill(deadline)) return std::nullopt;
    }
    std::string got = buffer_.substr(0, at + marker.size());
    buffer_.erase(0, at + marker.size());
    return got;
  }

  // Reads one chunk of a chunked body: its data, empty for the last chunk (whose trailer must
  // be empty); nullopt when the connection closes or nothing comes for `timeout`.
  std::optional<std::string> ReadChunk(milliseconds timeout = milliseconds(10'000)) {
    auto size_line = ReadUntil("\r\n", timeout);
    if (!size_line) return std::nullopt;
    const size_t size = std::stoul(*size_line, nullptr, 16);
    const auto deadline = steady_clock::now() + timeout;
    while (buffer_.size() < size + 2) {
      if (!Fill(deadline)) return std::nullopt;
    }
    std::string data = buffer_.substr(0, size);
    buffer_.erase(0, size + 2);  // The data's CRLF (or the empty trailer's).
    return data;
  }

  // Reads and drops everything until the server closes the connection; false when it stays
  // open for `timeout`.
  bool DrainUntilClosed(milliseconds timeout) {
    const auto deadline = steady_clock::now() + timeout;
    char chunk[65536];
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      if (recv(fd_, chunk, sizeof chunk, 0) <= 0) return true;
    }
  }

  // Shrinks the socket's receive buffer, so a client that does not read fills up sooner.
  void SetReceiveBuffer(int bytes) {
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  }

  // True when the server closes the connection (EOF or reset) within `timeout`, with nothing
  // more to read.
  bool ClosedWithin(milliseconds timeout) {
    const auto deadline = steady_clock::now() + timeout;
    char c;
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      const ssize_t n = recv(fd_, &c, 1, 0);
      if (n <= 0) return true;
    }
  }

 private:
  bool Fill(steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

inline std::string Post(std::string_view target, std::string_view body,
                        std::string_view extra = "") {
  return "POST " + std::string(target) + " HTTP/1.1\r\nHost: test\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + std::string(extra) + "\r\n" + std::string(body);
}

inline std::string Get(std::string_view target) {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n\r\n";
}

}  // namespace tailcut
