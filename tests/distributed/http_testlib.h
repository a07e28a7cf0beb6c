// One HTTP GET to a server on loopback, for tests that scrape a task's
// metrics or query a Prometheus server.
#ifndef GRAPHRUN_TESTS_DISTRIBUTED_HTTP_TESTLIB_H_
#define GRAPHRUN_TESTS_DISTRIBUTED_HTTP_TESTLIB_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace graphrun {
namespace distributed {
namespace test {

// The whole response (status line, headers, body) of GET `path` from
// 127.0.0.1:`port`, read until the server closes (10 s receive timeout);
// "" when the connection or the request fails.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string req =
        absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[8192];
      for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, n);
    }
  }
  close(fd);
  return out;
}

}  // namespace test
}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_TESTS_DISTRIBUTED_HTTP_TESTLIB_H_
