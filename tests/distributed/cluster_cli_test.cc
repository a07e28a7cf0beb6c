// Multi-process test of `graphrun cluster` and `graphrun run --target=grpc://`:
// one `graphrun server` process per task on loopback ports. Every wait is
// bounded; the cluster is stopped (and its task processes with it).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/distributed/http_testlib.h"

namespace {

using ::testing::HasSubstr;

std::string Runfile(const std::string& rel) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/" + rel;
}

struct Proc {
  pid_t pid = -1;
  int out_fd = -1;
};

// stdout comes back through Proc::out_fd; stderr goes to `err_file` when
// given.
Proc Spawn(const std::vector<std::string>& args, const std::string& err_file = "") {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    if (!err_file.empty()) {
      const int e = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (e >= 0) dup2(e, 2);
    }
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

// Reads one line within `timeout_ms`; empty on timeout or EOF.
std::string ReadLine(int fd, int timeout_ms) {
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char c;
    if (read(fd, &c, 1) != 1) break;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return "";
}

// Exit status, or -1 if it did not exit within `timeout_ms` (then killed).
int WaitExit(pid_t pid, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

std::string RunAndCapture(const std::vector<std::string>& args, int* exit_code) {
  Proc p = Spawn(args);
  std::string out;
  char buf[4096];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pf{p.out_fd, POLLIN, 0};
    if (poll(&pf, 1, 100) <= 0) continue;
    ssize_t n = read(p.out_fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, n);
  }
  close(p.out_fd);
  *exit_code = WaitExit(p.pid, 5000);
  return out;
}

TEST(ClusterCliTest, MultiProcessClusterRunsAGraph) {
  const std::string graphrun = Runfile("tools/graphrun");
  const std::string token_file = absl::StrCat(::testing::TempDir(), "/cluster_token_", getpid());
  unlink(token_file.c_str());
  Proc cluster =
      Spawn({graphrun, "cluster", "--ps=1", "--workers=2", "--token_file=" + token_file});
  ASSERT_GT(cluster.pid, 0);
  std::string spec = ReadLine(cluster.out_fd, 20000);
  ASSERT_FALSE(spec.empty()) << "no ClusterSpec line within 20 s";
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(spec, m, std::regex(R"re("worker": \["([0-9.:]+)", "([0-9.:]+)"\])re")))
      << spec;
  const std::string worker1 = m[2];

  // The token file is the user's alone.
  struct stat st;
  ASSERT_EQ(stat(token_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);

  int code = 0;
  std::string out = RunAndCapture(
      {graphrun, "run", Runfile("examples/variables.pbtxt"), "--target=grpc://" + worker1,
       "--fetch", "increment_again", "--auth_token_file=" + token_file},
      &code);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, HasSubstr("increment_again:0 = Tensor<int32, []: 10>"));

  // A client without the token is refused, and the cluster keeps serving.
  out = RunAndCapture({graphrun, "run", Runfile("examples/variables.pbtxt"),
                       "--target=grpc://" + worker1, "--fetch", "increment_again"},
                      &code);
  EXPECT_EQ(code, 1);
  out = RunAndCapture(
      {graphrun, "run", Runfile("examples/variables.pbtxt"), "--target=grpc://" + worker1,
       "--fetch", "increment_again", "--auth_token_file=" + token_file},
      &code);
  EXPECT_EQ(code, 0);

  kill(cluster.pid, SIGTERM);
  EXPECT_EQ(WaitExit(cluster.pid, 10000), 0);
  close(cluster.out_fd);
  // --token_file was ours to choose: the cluster removes the token it wrote.
  EXPECT_NE(access(token_file.c_str(), F_OK), 0);
  // The tasks are gone: the address refuses connections.
  out = RunAndCapture({graphrun, "run", Runfile("examples/variables.pbtxt"),
                       "--target=grpc://" + worker1, "--fetch", "increment_again"},
                      &code);
  EXPECT_EQ(code, 1);
}

// GRAPHRUN_AUTH_TOKEN is the cluster's token when no --auth_token_file is
// given, as for every command: clients with it are served, others refused.
TEST(ClusterCliTest, TakesTheTokenFromTheEnvironment) {
  const std::string graphrun = Runfile("tools/graphrun");
  setenv("GRAPHRUN_AUTH_TOKEN", "cluster-env-token", 1);
  Proc cluster = Spawn({graphrun, "cluster", "--workers=1", "--in_process"});
  ASSERT_GT(cluster.pid, 0);
  std::string spec = ReadLine(cluster.out_fd, 20000);
  ASSERT_FALSE(spec.empty()) << "no ClusterSpec line within 20 s";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(spec, m, std::regex(R"re("worker": \["([0-9.:]+)"\])re"))) << spec;
  const std::string worker0 = m[1];
  const std::vector<std::string> run = {graphrun,
                                        "run",
                                        Runfile("examples/variables.pbtxt"),
                                        "--target=grpc://" + worker0,
                                        "--fetch",
                                        "increment_again"};
  int code = 0;
  std::string out = RunAndCapture(run, &code);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, HasSubstr("increment_again:0 = Tensor<int32, []: 10>"));
  unsetenv("GRAPHRUN_AUTH_TOKEN");
  out = RunAndCapture(run, &code);
  EXPECT_EQ(code, 1);
  setenv("GRAPHRUN_AUTH_TOKEN", "another-token", 1);
  out = RunAndCapture(run, &code);
  EXPECT_EQ(code, 1);
  unsetenv("GRAPHRUN_AUTH_TOKEN");
  kill(cluster.pid, SIGTERM);
  EXPECT_EQ(WaitExit(cluster.pid, 10000), 0);
  close(cluster.out_fd);
}

// `graphrun cluster` with certificates from `graphrun tls init`: its tasks
// speak mutual TLS with each other and with clients; a client with a
// certificate of the CA runs a graph across them, one without is refused.
TEST(ClusterCliTest, TlsClusterServesOnlyCertificateHolders) {
  const std::string graphrun = Runfile("tools/graphrun");
  const std::string certs = absl::StrCat(::testing::TempDir(), "/cluster_certs_", getpid());
  int code = 0;
  RunAndCapture({graphrun, "tls", "init", certs, "--hosts=127.0.0.1,client"}, &code);
  ASSERT_EQ(code, 0);
  const std::string token_file =
      absl::StrCat(::testing::TempDir(), "/cluster_tls_token_", getpid());
  unlink(token_file.c_str());
  Proc cluster = Spawn({graphrun, "cluster", "--ps=1", "--workers=2", "--token_file=" + token_file,
                        "--tls_ca=" + certs + "/ca.crt", "--tls_cert=" + certs + "/127.0.0.1.crt",
                        "--tls_key=" + certs + "/127.0.0.1.key"});
  ASSERT_GT(cluster.pid, 0);
  std::string spec = ReadLine(cluster.out_fd, 20000);
  ASSERT_FALSE(spec.empty()) << "no ClusterSpec line within 20 s";
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(spec, m, std::regex(R"re("worker": \["([0-9.:]+)", "([0-9.:]+)"\])re")))
      << spec;
  const std::string target = "--target=grpc://" + std::string(m[2]);
  const std::vector<std::string> run = {graphrun,
                                        "run",
                                        Runfile("examples/variables.pbtxt"),
                                        target,
                                        "--fetch",
                                        "increment_again",
                                        "--auth_token_file=" + token_file};
  std::vector<std::string> member = run;
  for (const char* f :
       {"--tls_ca=%s/ca.crt", "--tls_cert=%s/client.crt", "--tls_key=%s/client.key"}) {
    std::string flag = f;
    flag.replace(flag.find("%s"), 2, certs);
    member.push_back(flag);
  }
  std::string out = RunAndCapture(member, &code);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, HasSubstr("increment_again:0 = Tensor<int32, []: 10>"));
  // The token alone is not enough: no certificate, no connection.
  std::vector<std::string> stranger = run;
  stranger.push_back("--timeout_ms=5000");
  RunAndCapture(stranger, &code);
  EXPECT_EQ(code, 1);
  kill(cluster.pid, SIGTERM);
  EXPECT_EQ(WaitExit(cluster.pid, 10000), 0);
  close(cluster.out_fd);
}

// The local addresses TCP port `port` listens on, as /proc/net/tcp{,6}
// write them ("0100007F" is 127.0.0.1, all zeros the wildcard), every
// listening row (a port may listen on IPv4 and IPv6 both).
std::vector<std::string> ListeningAddresses(int port) {
  char hex[8];
  snprintf(hex, sizeof(hex), "%04X", port);
  std::vector<std::string> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    FILE* f = fopen(table, "r");
    if (f == nullptr) continue;
    char line[512];
    while (fgets(line, sizeof(line), f) != nullptr) {
      char local[64], remote[64], state[8];
      int slot;
      if (sscanf(line, "%d: %63s %63s %7s", &slot, local, remote, state) != 4) continue;
      const std::string l = local;
      if (std::string(state) == "0A" && l.size() > 5 && l.substr(l.size() - 4) == hex) {
        found.push_back(l.substr(0, l.size() - 5));
      }
    }
    fclose(f);
  }
  return found;
}

using graphrun::distributed::test::HttpGet;

std::string ReadFile(const std::string& path) {
  std::string out;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
  fclose(f);
  return out;
}

// `--bind` and `--metrics_port` on `graphrun cluster`, one process per task
// and in-process: by default every task listens on loopback; with
// --bind=0.0.0.0 (or ::) on the wildcard address (the printed cluster still
// names 127.0.0.1, which reaches it), and --metrics_port=0 gives each task a
// metrics port that the log names and that serves graphrun_* series.
// Only loopback is ever contacted.
TEST(ClusterCliTest, BindsTheGivenHostAndServesMetrics) {
  const std::string graphrun = Runfile("tools/graphrun");
  struct Mode {
    std::vector<std::string> flags;
    std::string address;  // as /proc/net/tcp writes the listening host
    int metrics;          // metrics lines expected
  };
  const std::vector<Mode> modes = {
      {{}, "0100007F", 0},
      {{"--bind=0.0.0.0", "--metrics_port=0"}, "wildcard", 2},
      {{"--bind=0.0.0.0", "--metrics_port=0", "--in_process"}, "wildcard", 2},
      {{"--bind=::", "--metrics_port=0"}, "wildcard", 2},
  };
  for (const Mode& mode : modes) {
    SCOPED_TRACE(absl::StrJoin(mode.flags, " "));
    const std::string log = absl::StrCat(::testing::TempDir(), "/cluster_bind_", getpid(), ".log");
    std::vector<std::string> args = {graphrun, "cluster", "--ps=1", "--workers=1"};
    args.insert(args.end(), mode.flags.begin(), mode.flags.end());
    Proc cluster = Spawn(args, log);
    ASSERT_GT(cluster.pid, 0);
    const std::string spec = ReadLine(cluster.out_fd, 20000);
    std::smatch m;
    const bool parsed = std::regex_search(
        spec, m,
        std::regex(
            R"re(\{"ps": \["127\.0\.0\.1:([0-9]+)"\], "worker": \["127\.0\.0\.1:([0-9]+)"\]\})re"));
    EXPECT_TRUE(parsed) << spec << ReadFile(log);
    for (int i = 1; parsed && i <= 2; ++i) {
      // Every socket listening on the task's port (one or more).
      const std::vector<std::string> addresses = ListeningAddresses(std::stoi(m[i]));
      if (mode.address == "wildcard") {
        EXPECT_THAT(addresses, ::testing::AllOf(::testing::Not(::testing::IsEmpty()),
                                                ::testing::Each(::testing::MatchesRegex("0+"))))
            << "port " << m[i];
      } else {
        // gRPC listens on IPv6 sockets: 127.0.0.1 shows as ::ffff:127.0.0.1.
        EXPECT_THAT(addresses,
                    ::testing::AllOf(::testing::Not(::testing::IsEmpty()),
                                     ::testing::Each(::testing::AnyOf(
                                         mode.address, "0000000000000000FFFF0000" + mode.address))))
            << "port " << m[i];
      }
    }
    // The metrics ports as logged: the tasks' own lines (one process per
    // task) or the cluster's (in process).
    std::vector<int> metrics;
    const std::regex line(
        R"re(metrics (of \S+ )?at http://(\[[0-9a-f:]*\]|[0-9.]+):([0-9]+)/metrics)re");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (static_cast<int>(metrics.size()) < mode.metrics &&
           std::chrono::steady_clock::now() < deadline) {
      metrics.clear();
      const std::string text = ReadFile(log);
      for (auto it = std::sregex_iterator(text.begin(), text.end(), line);
           it != std::sregex_iterator(); ++it) {
        metrics.push_back(std::stoi((*it)[3]));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(static_cast<int>(metrics.size()), mode.metrics) << ReadFile(log);
    for (int port : metrics) {
      const std::string body = HttpGet(port, "/metrics");
      EXPECT_THAT(body, HasSubstr("200 OK")) << port;
      EXPECT_THAT(body, HasSubstr("# TYPE graphrun_")) << port;
    }
    kill(cluster.pid, SIGTERM);
    EXPECT_EQ(WaitExit(cluster.pid, 10000), 0);
    close(cluster.out_fd);
    unlink(log.c_str());
  }
  // Bad values are usage errors, before any task starts.
  int code = 0;
  RunAndCapture({graphrun, "cluster", "--workers=1", "--bind=fe80::1"}, &code);
  EXPECT_EQ(code, 2);
  RunAndCapture({graphrun, "cluster", "--workers=2", "--metrics_port=65535"}, &code);
  EXPECT_EQ(code, 2);
  RunAndCapture({graphrun, "cluster", "--workers=1", "--metrics_port=-3"}, &code);
  EXPECT_EQ(code, 2);
}

TEST(ClusterCliTest, BadClusterSpecIsAUsageError) {
  int code = 0;
  RunAndCapture({Runfile("tools/graphrun"), "server", "--cluster={\"ps\": [7]}", "--job=ps"},
                &code);
  EXPECT_EQ(code, 2);
  RunAndCapture({Runfile("tools/graphrun"), "server", "--cluster={\"ps\": [\"127.0.0.1:1\"]}",
                 "--job=worker"},
                &code);
  EXPECT_EQ(code, 2);
}

}  // namespace
