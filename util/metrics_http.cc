#include "util/metrics_http.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "util/metrics.h"

namespace graphrun {
namespace {

void SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

void Serve(int fd) {
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string req;
  char buf[2048];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    req.append(buf, static_cast<size_t>(n));
  }
  const std::string line = req.substr(0, req.find("\r\n"));
  std::string status = "404 Not Found", body = "not found: try /metrics\n";
  std::string type = "text/plain";
  if (absl::StartsWith(line, "GET /metrics ") || line == "GET /metrics") {
    status = "200 OK";
    body = Metrics::Get().Exposition();
    type = "text/plain; version=0.0.4; charset=utf-8";
  }
  SendAll(fd, absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", type, "\r\nContent-Length: ",
                           body.size(), "\r\nConnection: close\r\n\r\n", body));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& host,
                                                                            int port) {
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string where = absl::StrCat(host, ":", port);
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    return absl::UnavailableError(absl::StrCat("metrics: cannot resolve ", where));
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 16) != 0) {
    std::string why = std::strerror(errno);
    freeaddrinfo(res);
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", where, ": ", why));
  }
  freeaddrinfo(res);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  s->listen_fd_ = fd;
  if (pipe2(s->wake_, O_CLOEXEC) != 0) return absl::UnavailableError("metrics: pipe");
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

void MetricsHttpServer::Loop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    int rc = poll(fds, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || fds[1].revents != 0) return;
    int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    Serve(c);
    close(c);
  }
}

MetricsHttpServer::~MetricsHttpServer() {
  if (wake_[1] >= 0) {
    char b = 0;
    if (write(wake_[1], &b, 1) < 0) {
      // The loop then ends at the next connection; nothing else to do.
    }
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace graphrun
