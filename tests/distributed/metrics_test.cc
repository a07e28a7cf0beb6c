// Prometheus metrics of real task processes: a PS and a worker (`graphrun
// server --metrics_port=0`), five steps that each move 4 MiB from the PS to
// the worker. The worker's /metrics has exactly 5 OK steps, a latency
// histogram of 5, and 5 x 4 MiB received from the PS; the PS's has 5 OK
// RunGraph RPCs and 5 x 4 MiB sent. Then Debian's real `prometheus`
// scrapes the worker and its query API answers graphrun_steps_total = 5.
// Skipped, saying so, without /usr/bin/prometheus (for that part only).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/launcher_link.h"
#include "distributed/process_util.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "tests/distributed/http_testlib.h"
#include "tests/distributed/ps_worker_testlib.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;

std::string TmpDir() { return test::TestTmpDir(); }

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

using test::HttpGet;

// The value of one series line "NAME{labels} V" in an exposition; -1 if absent.
double Series(const std::string& text, const std::string& series) {
  const std::string key = series + " ";
  size_t at = text.find("\n" + key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + key.size()));
}

// The metrics port a `graphrun server` logged (bounded wait).
int MetricsPort(const std::string& log) {
  const std::regex re("metrics at http://[^:]+:([0-9]+)/metrics");
  for (int i = 0; i < 200; ++i) {
    std::smatch m;
    const std::string text = ReadAll(log);
    if (std::regex_search(text, m, re)) return std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

TEST(MetricsTest, TasksServePrometheusMetricsAndPrometheusScrapesThem) {
  test::PsAndWorker tasks;
  ASSERT_TRUE(
      tasks.Start("metrics", {"--metrics_port=0"}, {"GRAPHRUN_AUTH_TOKEN=metrics-token"}).ok());
  const ClusterSpec& spec = tasks.spec;
  const std::string graphrun = test::GraphrunBinary();
  const int ps_metrics = MetricsPort(tasks.ps().log_file);
  const int worker_metrics = MetricsPort(tasks.worker().log_file);
  ASSERT_GT(ps_metrics, 0) << ReadAll(tasks.ps().log_file);
  ASSERT_GT(worker_metrics, 0) << ReadAll(tasks.worker().log_file);

  RegisterGrpcSession();
  SessionOptions so;
  so.target = tasks.target();
  so.auth_token = "metrics-token";
  auto session = NewSession(so);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Create(test::CrossTaskGraph(1)).ok());
  for (int i = 0; i < 5; ++i) {
    auto r = (*session)->Run({}, {"sum"}, {});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  constexpr double kBytes = 5.0 * 4 * 1048576;
  const std::string worker = HttpGet(worker_metrics, "/metrics");
  EXPECT_THAT(worker, HasSubstr("HTTP/1.1 200 OK"));
  EXPECT_EQ(Series(worker, "graphrun_steps_total{code=\"OK\"}"), 5) << worker;
  EXPECT_EQ(Series(worker, "graphrun_step_seconds_count"), 5) << worker;
  EXPECT_EQ(Series(worker,
                   "graphrun_recv_bytes_total{peer=\"/job:ps/replica:0/task:0\","
                   "path=\"data_channel\"}"),
            kBytes)
      << worker;
  EXPECT_GE(Series(worker, "graphrun_tensor_bytes"), 0) << worker;
  EXPECT_GE(Series(worker, "graphrun_tensors"), 0) << worker;
  const std::string ps = HttpGet(ps_metrics, "/metrics");
  EXPECT_EQ(Series(ps,
                   "graphrun_rpcs_total{method=\"/graphrun.distributed.WorkerService/"
                   "RunGraph\",code=\"OK\"}"),
            5)
      << ps;
  EXPECT_EQ(Series(ps,
                   "graphrun_sent_bytes_total{peer=\"/job:worker/replica:0/task:0\","
                   "path=\"data_channel\"}"),
            kBytes)
      << ps;
  // The PS's master ran no step.
  EXPECT_EQ(Series(ps, "graphrun_steps_total{code=\"OK\"}"), -1) << ps;

  // `graphrun status` sees the same, for the whole cluster, from the
  // worker's address; without the token it is refused.
  {
    const std::string log = TmpDir() + "/status.json";
    auto st = SpawnProcess(
        graphrun, {"status", *spec.Address("worker", 0), "--format=json", "--interval_ms=200"},
        {"GRAPHRUN_AUTH_TOKEN=metrics-token"}, log);
    ASSERT_TRUE(st.ok());
    int status = 0;
    waitpid(*st, &status, 0);
    const std::string json = ReadAll(log);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << json;
    std::cout << "graphrun status: " << json;
    EXPECT_THAT(json, HasSubstr(absl::StrCat("\"cluster\": ", spec.ToJson())));
    EXPECT_THAT(json, HasSubstr("{\"task\": \"/job:ps/replica:0/task:0\", \"address\": \"" +
                                *spec.Address("ps", 0) + "\", \"devices\": "));
    EXPECT_THAT(json, HasSubstr(absl::StrCat("\"steps\": 5, ")));
    EXPECT_THAT(json, HasSubstr(absl::StrCat("\"received_bytes\": {\"/job:ps/replica:0/task:0\": ",
                                             static_cast<int64_t>(kBytes), "}")));
    EXPECT_THAT(json, HasSubstr(absl::StrCat(
                          "\"graph_runs\": 5, \"sent_bytes\": ", static_cast<int64_t>(kBytes),
                          ", \"sent_bytes_by_peer\": "
                          "{\"/job:worker/replica:0/task:0\": ",
                          static_cast<int64_t>(kBytes), "}")));
    const std::string refused_log = TmpDir() + "/status_refused.log";
    st = SpawnProcess(graphrun, {"status", *spec.Address("worker", 0)}, {"GRAPHRUN_AUTH_TOKEN="},
                      refused_log);
    ASSERT_TRUE(st.ok());
    waitpid(*st, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    EXPECT_THAT(ReadAll(refused_log), HasSubstr("Unauthenticated: "));
  }

  if (access("/usr/bin/prometheus", X_OK) != 0) {
    GTEST_SKIP() << "/usr/bin/prometheus is not installed (Debian's prometheus): the real "
                    "scrape is not checked";
  }
  // Debian's Prometheus, scraping the worker every second.
  const std::string dir = TmpDir() + "/prometheus";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\n"
      << "scrape_configs:\n  - job_name: graphrun\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << worker_metrics << "']\n";
  int prom_port = 0;
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    prom_port = ntohs(a.sin_port);
    close(fd);
  }
  std::vector<ChildProcess> prom(1);
  prom[0].task = "prometheus";
  prom[0].log_file = dir + "/prometheus.log";
  auto pid = SpawnProcess(
      "/usr/bin/prometheus",
      {"--config.file=" + dir + "/prometheus.yml", "--storage.tsdb.path=" + dir + "/data",
       absl::StrCat("--web.listen-address=127.0.0.1:", prom_port)},
      {}, prom[0].log_file);
  ASSERT_TRUE(pid.ok());
  prom[0].pid = *pid;
  struct StopProm {
    std::vector<ChildProcess>* p;
    ~StopProm() { StopProcesses(*p, 5000); }
  } stop_prom{&prom};
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    answer = HttpGet(prom_port, "/api/v1/query?query=graphrun_steps_total");
    if (answer.find("\"5\"]") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_THAT(answer, HasSubstr("\"__name__\":\"graphrun_steps_total\""))
      << answer << "\n"
      << ReadAll(prom[0].log_file);
  EXPECT_THAT(answer, HasSubstr("\"code\":\"OK\"")) << answer;
  EXPECT_THAT(answer, HasSubstr("\"5\"]")) << answer;
  std::cout << "Prometheus answered: " << answer.substr(answer.find("\r\n\r\n") + 4) << "\n";
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
