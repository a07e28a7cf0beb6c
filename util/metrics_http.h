// The HTTP endpoint Prometheus scrapes: GET /metrics answers
// Metrics::Get().Exposition() (util/metrics.h); anything else 404. One
// thread; each request is read within 2 s and answered, then closed.
#ifndef GRAPHRUN_UTIL_METRICS_HTTP_H_
#define GRAPHRUN_UTIL_METRICS_HTTP_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace graphrun {

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0: any free one). Unavailable naming the
  // address when it cannot.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host,
                                                                  int port);
  ~MetricsHttpServer();
  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;
  void Loop();
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_METRICS_HTTP_H_
