// The Prometheus text exposition: counters by label set, histograms with
// cumulative buckets, _sum and _count, gauges read when scraped, escaped
// label values; and the /metrics endpoint over a real socket.
#include "util/metrics.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/metrics_http.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, ExpositionFormat) {
  Metrics& m = Metrics::Get();
  m.Describe("graphrun_test_total", "counter", "a test counter");
  m.Increment("graphrun_test_total", {{"method", "/a/B"}, {"code", "OK"}});
  m.Increment("graphrun_test_total", {{"method", "/a/B"}, {"code", "OK"}}, 2);
  m.Increment("graphrun_test_total", {{"method", "say \"hi\"\n"}, {"code", "Unavailable"}});
  m.Observe("graphrun_test_seconds", {}, 0.003);
  m.Observe("graphrun_test_seconds", {}, 0.2);
  m.Observe("graphrun_test_seconds", {}, 100);
  // (Outlives the test: the registry is process-wide.)
  static int reads = 0;
  m.Gauge("graphrun_test_gauge", "read when scraped", [] { return ++reads; });
  const std::string text = m.Exposition();
  EXPECT_THAT(text, HasSubstr("# HELP graphrun_test_total a test counter\n"
                              "# TYPE graphrun_test_total counter\n"));
  EXPECT_THAT(text, HasSubstr("graphrun_test_total{method=\"/a/B\",code=\"OK\"} 3\n"));
  EXPECT_THAT(
      text,
      HasSubstr("graphrun_test_total{method=\"say \\\"hi\\\"\\n\",code=\"Unavailable\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE graphrun_test_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("graphrun_test_seconds_bucket{le=\"0.0025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("graphrun_test_seconds_bucket{le=\"0.005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("graphrun_test_seconds_bucket{le=\"0.25\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("graphrun_test_seconds_bucket{le=\"60\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("graphrun_test_seconds_bucket{le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("graphrun_test_seconds_count 3\n"));
  EXPECT_THAT(text, HasSubstr("graphrun_test_seconds_sum 100.203"));
  EXPECT_THAT(text, HasSubstr("graphrun_test_gauge 1\n"));
  EXPECT_EQ(m.Value("graphrun_test_total", {{"method", "/a/B"}, {"code", "OK"}}), 3);
  EXPECT_EQ(m.Sum("graphrun_test_total"), 4);
  EXPECT_EQ(m.Sum("graphrun_absent_total"), 0);
}

std::string Get(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return "";
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
  if (send(fd, req.data(), req.size(), 0) < 0) return "";
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, n);
  close(fd);
  return out;
}

TEST(MetricsTest, HttpEndpoint) {
  Metrics::Get().Increment("graphrun_http_test_total", {});
  auto s = MetricsHttpServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string ok = Get((*s)->port(), "/metrics");
  EXPECT_THAT(ok, HasSubstr("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(ok, HasSubstr("\ngraphrun_http_test_total 1\n"));
  EXPECT_THAT(Get((*s)->port(), "/other"), HasSubstr("HTTP/1.1 404 Not Found"));
}

}  // namespace
}  // namespace graphrun
