// Training across hosts made of Linux network namespaces (a switch
// namespace with a bridge, one veth per host, 10.231.0.11, .12, ...),
// `graphrun train` started in each with TF_CONFIG naming the other hosts'
// tasks, as a user would on several machines: PS training on two hosts
// (a PS and worker 1 on one, the chief on the other), on three with mutual
// TLS (certificates from `graphrun tls init`) and on three with a cluster
// token, and on four (one task each); multi-worker mirrored on three (one
// worker each). Strangers on another host (no certificate, another CA's, no
// token) are refused. Each task listens on its cluster entry's address (not
// loopback), and the MLP trains to the accuracy bar (5 epochs, as the
// issue asks; >= 0.85). A task that would listen beyond loopback without
// credentials exits at once saying so. Without CAP_NET_ADMIN (namespaces
// cannot be made) the test says why and skips.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/process_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sanitizers.h"
#include "util/json.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

std::string Graphrun() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/tools/graphrun";
}
std::string TmpDir() { return std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp"; }

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The last line of a log (a trainer's JSON result), trailing newlines
// ignored.
std::string ResultLine(const std::string& log) {
  const std::string trimmed = log.substr(0, log.find_last_not_of('\n') + 1);
  return trimmed.substr(trimmed.rfind('\n') + 1);
}

int Sh(const std::string& cmd) {
  int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// `n` hosts on one switch, all namespaces of their own; torn down at the
// end.
class Hosts {
 public:
  explicit Hosts(int n = 2) : n_(n), prefix_(absl::StrCat("gr", getpid())) {}
  ~Hosts() {
    for (const std::string& ns : made_) Sh("ip netns del " + ns);
  }
  // "" on success, else why not.
  std::string Make() {
    RemoveStale();
    const std::string sw = switch_ns();
    if (Sh("ip netns add " + sw) != 0) {
      return "cannot create network namespaces here (`ip netns add` failed: needs CAP_NET_ADMIN)";
    }
    made_.push_back(sw);
    if (Sh(in(sw) + "ip link add br0 type bridge") != 0 || Sh(in(sw) + "ip link set br0 up") != 0) {
      return "cannot create a bridge in a namespace";
    }
    for (int h = 1; h <= n_; ++h) {
      const std::string ns = host(h);
      if (Sh("ip netns add " + ns) != 0) return "cannot create " + ns;
      made_.push_back(ns);
      const std::string port = absl::StrCat("p", h);
      if (Sh(in(sw) + "ip link add " + port + " type veth peer name eth0 netns " + ns) != 0 ||
          Sh(in(sw) + "ip link set " + port + " master br0 up") != 0 ||
          Sh(in(ns) + "ip addr add " + address(h) + "/24 dev eth0") != 0 ||
          Sh(in(ns) + "ip link set eth0 up") != 0 || Sh(in(ns) + "ip link set lo up") != 0) {
        return "cannot wire " + ns + " to the switch";
      }
    }
    return "";
  }
  // Namespaces of test processes that were killed before their teardown
  // ("gr<pid>sw", "gr<pid>h<n>" whose process is gone, or this process'
  // own names before it made them): left, they would make this test's
  // `ip netns add` fail and the test skip.
  void RemoveStale() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/var/run/netns", ec)) {
      const std::string name = e.path().filename().string();
      std::smatch m;
      if (!std::regex_match(name, m, std::regex("gr([0-9]+)(sw|h[0-9]+)"))) continue;
      const std::string pid = m[1];
      if (absl::StrCat("gr", pid) == prefix_ || !std::filesystem::exists("/proc/" + pid)) {
        // Its tasks outlived the test (never torn down): they go first.
        Sh("ip netns pids " + name + " | xargs -r kill -9");
        Sh("ip netns del " + name);
      }
    }
  }
  std::string host(int h) const { return absl::StrCat(prefix_, "h", h); }
  // The switch; host h's link is its port "p<h>".
  std::string switch_ns() const { return prefix_ + "sw"; }
  static std::string address(int h) { return absl::StrCat("10.231.0.", 10 + h); }
  static std::string in(const std::string& ns) { return "ip netns exec " + ns + " "; }

 private:
  int n_;
  std::string prefix_;
  std::vector<std::string> made_;
};

struct Task {
  distributed::ChildProcess p;
  ~Task() {
    if (p.pid > 0) {
      kill(p.pid, SIGKILL);
      int st;
      waitpid(p.pid, &st, 0);
    }
  }
};

// `graphrun ARGS` in namespace `ns` with `env`, output to `log`.
absl::Status Start(Task& t, const std::string& ns, const std::vector<std::string>& args,
                   const std::vector<std::string>& env, const std::string& log) {
  std::vector<std::string> argv = {"netns", "exec", ns, Graphrun()};
  argv.insert(argv.end(), args.begin(), args.end());
  t.p.log_file = log;
  auto pid = distributed::SpawnProcess("/usr/sbin/ip", argv, env, log);
  if (!pid.ok()) return pid.status();
  t.p.pid = *pid;
  return absl::OkStatus();
}

// Waits (bounded) for `t` to exit; its exit status, or -1.
int Wait(Task& t, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (waitpid(t.p.pid, &st, WNOHANG) == t.p.pid) {
      t.p.pid = 0;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// One task of a namespace cluster: its job, index and host.
struct Placed {
  std::string job;
  int index;
  int host;
  int port;
};

// Trains the MLP (5 epochs) on `tasks`, each started in its host's
// namespace with TF_CONFIG, `extra` flags for every trainer; checks that
// every task listened on its own address and the chief's accuracy.
// With `token`, every task gets it (GRAPHRUN_AUTH_TOKEN) instead of
// --insecure; with `tls_dir`, each task gets its host's certificate from
// there (--tls_ca, --tls_cert, --tls_key); `after` runs while the tasks
// still serve.
void TrainAcrossHosts(int num_hosts, const std::vector<Placed>& tasks,
                      const std::vector<std::string>& extra, const std::string& name,
                      const std::string& token = "",
                      const std::function<void(const Hosts&)>& after = nullptr,
                      const std::string& tls_dir = "") {
  if (!std::filesystem::exists(kData)) GTEST_SKIP() << "no " << kData;
  Hosts hosts(num_hosts);
  const std::string why = hosts.Make();
  if (!why.empty()) GTEST_SKIP() << why;
  std::map<std::string, std::vector<std::string>> jobs;
  for (const Placed& t : tasks) {
    auto& list = jobs[t.job];
    if (static_cast<int>(list.size()) <= t.index) list.resize(t.index + 1);
    list[t.index] = absl::StrCat("\"", Hosts::address(t.host), ":", t.port, "\"");
  }
  std::string cluster = "{";
  for (const auto& [job, list] : jobs) {
    if (cluster.size() > 1) cluster += ", ";
    absl::StrAppend(&cluster, "\"", job, "\": [", absl::StrJoin(list, ", "), "]");
  }
  cluster += "}";
  const std::string dir = TmpDir() + "/" + name + "_ckpt";
  std::filesystem::remove_all(dir);
  // A token (in the environment) or --insecure: the tasks listen beyond
  // loopback.
  const std::string credentials =
      token.empty() && tls_dir.empty() ? "--insecure" : "--log_every=100";
  // Batches of 128: twice the updates of the default 256 in the same 5
  // epochs. Asynchronous updates from two workers vary from run to run;
  // with batches of 256 the mutual-TLS run once ended at 0.847.
  std::vector<std::string> train = {"train",
                                    credentials,
                                    "--epochs=5",
                                    "--batch_size=128",
                                    "--checkpoint_dir=" + dir,
                                    "--format=json",
                                    "--intra_op_threads=1",
                                    "--inter_op_threads=2"};
  train.insert(train.end(), extra.begin(), extra.end());
  std::vector<std::unique_ptr<Task>> running;
  Task* chief = nullptr;
  for (const Placed& t : tasks) {
    running.push_back(std::make_unique<Task>());
    // As Kubeflow's TFJob writes it: with "environment".
    const std::string env =
        absl::StrCat(R"(TF_CONFIG={"cluster": )", cluster, R"(, "task": {"type": ")", t.job,
                     R"(", "index": )", t.index, R"(}, "environment": "cloud"})");
    std::vector<std::string> args =
        t.job == "ps" ? std::vector<std::string>{"train", credentials, "--checkpoint_dir=" + dir}
                      : train;
    if (!tls_dir.empty()) {
      const std::string host = Hosts::address(t.host);
      args.push_back("--tls_ca=" + tls_dir + "/ca.crt");
      args.push_back("--tls_cert=" + tls_dir + "/" + host + ".crt");
      args.push_back("--tls_key=" + tls_dir + "/" + host + ".key");
    }
    std::vector<std::string> envs = {env};
    if (!token.empty()) envs.push_back("GRAPHRUN_AUTH_TOKEN=" + token);
    ASSERT_TRUE(Start(*running.back(), hosts.host(t.host), args, envs,
                      absl::StrCat(TmpDir(), "/", name, "_", t.job, t.index, ".log"))
                    .ok());
    // The chief: "master" (TFJob, SageMaker) when there is one, else
    // worker 0.
    if (t.job == "master" || (t.job == "worker" && t.index == 0 && chief == nullptr)) {
      chief = running.back().get();
    }
  }
  ASSERT_NE(chief, nullptr);
  const int chief_rc = Wait(*chief, std::chrono::seconds(600));
  const std::string chief_log = ReadAll(chief->p.log_file);
  ASSERT_EQ(chief_rc, 0) << chief_log;
  for (size_t i = 0; i < tasks.size(); ++i) {
    Task& t = *running[i];
    if (tasks[i].job == "worker" && t.p.pid > 0 && &t != chief) {
      EXPECT_EQ(Wait(t, std::chrono::seconds(120)), 0) << ReadAll(t.p.log_file);
    }
    if (tasks[i].job == "ps") {
      // Each task listens on its host's address, as its cluster entry says.
      EXPECT_THAT(ReadAll(t.p.log_file),
                  HasSubstr(absl::StrCat("listening on ", Hosts::address(tasks[i].host), ":",
                                         tasks[i].port)));
    }
  }
  // The last line: the chief's result.
  const std::string last = ResultLine(chief_log);
  auto json = ParseJson(last);
  ASSERT_TRUE(json.ok()) << last;
  const JsonValue* acc = json->Find("test_accuracy");
  ASSERT_NE(acc, nullptr) << last;
  std::cout << name << ": " << last << "\n";
  EXPECT_GE(std::stod(acc->number_text()), 0.85) << last;
  if (after) after(hosts);
}

// Two hosts: a PS and worker 1 on the first, the chief on the second.
TEST(NetnsTrainTest, PsTrainingAcrossTwoHosts) {
  TrainAcrossHosts(2, {{"ps", 0, 1, 2222}, {"worker", 0, 2, 2222}, {"worker", 1, 1, 2223}}, {},
                   "two_hosts_ps");
}

// Runs `graphrun run` of a one-Const graph against the PS on host 1 from
// host `from` with `flags`; its exit code and output.
int StrangerRun(const Hosts& hosts, int from, const std::vector<std::string>& flags,
                const std::string& name, std::string* log) {
  const std::string graph = TmpDir() + "/stranger.pbtxt";
  std::ofstream(graph) << R"(node { name: "c" op: "Const"
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } })";
  std::vector<std::string> args = {"run", graph, "--fetch=c",
                                   absl::StrCat("--target=grpc://", Hosts::address(1), ":2222"),
                                   "--timeout_ms=10000"};
  args.insert(args.end(), flags.begin(), flags.end());
  Task client;
  if (!Start(client, hosts.host(from), args, {}, TmpDir() + "/" + name + ".log").ok()) return -2;
  const int rc = Wait(client, std::chrono::seconds(60));
  *log = ReadAll(client.p.log_file);
  return rc;
}

// Three hosts, one task each, every connection mutual TLS with
// certificates `graphrun tls init` made. Then, from host 3: a client
// without certificates, and one with another CA's, are refused (exit 1,
// no task named); one with the cluster's certificate for its host runs.
TEST(NetnsTrainTest, PsTrainingAcrossThreeHostsWithMutualTls) {
  const std::string certs = TmpDir() + "/netns_tls";
  const std::string other = TmpDir() + "/netns_other_ca";
  std::filesystem::remove_all(certs);
  std::filesystem::remove_all(other);
  const std::string hosts_flag =
      absl::StrCat("--hosts=", Hosts::address(1), ",", Hosts::address(2), ",", Hosts::address(3));
  for (const auto& [dir, flag] : {std::pair{certs, hosts_flag}, std::pair{other, hosts_flag}}) {
    auto pid = distributed::SpawnProcess(Graphrun(), {"tls", "init", dir, flag}, {},
                                         TmpDir() + "/netns_tls_init.log");
    ASSERT_TRUE(pid.ok());
    int st = 0;
    waitpid(*pid, &st, 0);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << ReadAll(TmpDir() + "/netns_tls_init.log");
  }
  TrainAcrossHosts(
      3, {{"ps", 0, 1, 2222}, {"worker", 0, 2, 2222}, {"worker", 1, 3, 2222}}, {},
      "three_hosts_tls", "",
      [&](const Hosts& hosts) {
        std::string log;
        EXPECT_EQ(StrangerRun(hosts, 3, {}, "tls_stranger_plain", &log), 1) << log;
        EXPECT_EQ(log.find("/job:"), std::string::npos) << log;
        std::cout << "a client without a certificate: " << log;
        const std::string h3 = Hosts::address(3);
        EXPECT_EQ(
            StrangerRun(hosts, 3,
                        {"--tls_ca=" + other + "/ca.crt", "--tls_cert=" + other + "/" + h3 + ".crt",
                         "--tls_key=" + other + "/" + h3 + ".key"},
                        "tls_stranger_other_ca", &log),
            1)
            << log;
        EXPECT_EQ(log.find("/job:"), std::string::npos) << log;
        std::cout << "a client with another CA's certificate: " << log;
        EXPECT_EQ(
            StrangerRun(hosts, 3,
                        {"--tls_ca=" + certs + "/ca.crt", "--tls_cert=" + certs + "/" + h3 + ".crt",
                         "--tls_key=" + certs + "/" + h3 + ".key",
                         // The workers are gone: the session uses the PS alone.
                         "--device_filters=/job:ps"},
                        "tls_member", &log),
            0)
            << log;
      },
      certs);
}

// Three hosts with a cluster token instead (the tasks' calls to each
// other carry it; the data channel proves it by HMAC); then a stranger on
// the third host, without the token, is refused by the PS:
// Unauthenticated, exit 1, no task named.
TEST(NetnsTrainTest, PsTrainingAcrossThreeHostsWithAToken) {
  TrainAcrossHosts(3, {{"ps", 0, 1, 2222}, {"worker", 0, 2, 2222}, {"worker", 1, 3, 2222}}, {},
                   "three_hosts_token", "a-cluster-token-for-the-test", [](const Hosts& hosts) {
                     const std::string graph = TmpDir() + "/stranger.pbtxt";
                     std::ofstream(graph) << R"(node { name: "c" op: "Const"
          attr { key: "dtype" value { type: DT_FLOAT } }
          attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } })";
                     const std::string target =
                         absl::StrCat("--target=grpc://", Hosts::address(1), ":2222");
                     Task client;
                     ASSERT_TRUE(Start(client, hosts.host(3), {"run", graph, "--fetch=c", target},
                                       {}, TmpDir() + "/stranger.log")
                                     .ok());
                     const int rc = Wait(client, std::chrono::seconds(60));
                     const std::string log = ReadAll(client.p.log_file);
                     EXPECT_EQ(rc, 1) << log;
                     EXPECT_THAT(log, HasSubstr("Unauthenticated: ")) << log;
                     EXPECT_EQ(log.find("/job:"), std::string::npos) << log;  // learns nothing else
                     std::cout << "a stranger without the token: " << log;
                   });
}

// SageMaker's parameter-server layout (and TFJob's with a master): the
// chief is the "master" task, one PS and one worker besides, each on its
// own host.
TEST(NetnsTrainTest, MasterPsAndWorkerAcrossThreeHosts) {
  TrainAcrossHosts(3, {{"ps", 0, 1, 2222}, {"master", 0, 2, 2222}, {"worker", 0, 3, 2222}}, {},
                   "three_hosts_master");
}

// Four hosts, one task each: two PS tasks and two workers.
TEST(NetnsTrainTest, PsTrainingAcrossFourHosts) {
  TrainAcrossHosts(
      4, {{"ps", 0, 1, 2222}, {"ps", 1, 2, 2222}, {"worker", 0, 3, 2222}, {"worker", 1, 4, 2222}},
      {}, "four_hosts_ps");
}

// Three hosts, one worker each, no PS: multi-worker mirrored, the
// gradients all-reduced across the hosts.
TEST(NetnsTrainTest, MultiWorkerMirroredAcrossThreeHosts) {
  TrainAcrossHosts(3, {{"worker", 0, 1, 2222}, {"worker", 1, 2, 2222}, {"worker", 2, 3, 2222}},
                   {"--distribution=multi_worker_mirrored", "--batch_size=255"},
                   "three_hosts_mwms");
}

// The step of the newest checkpoint in `dir` ("DIR/checkpoint" names
// "DIR/model.ckpt-N"), -1 when none; waits (bounded) for one of a step
// >= `at_least`.
int WaitForCheckpoint(const std::string& dir, int at_least) {
  auto latest = [&] {
    std::ifstream state(dir + "/checkpoint");
    std::string line;
    std::getline(state, line);  // model_checkpoint_path: "DIR/model.ckpt-N"
    const size_t dash = line.rfind('-');
    return dash == std::string::npos ? -1 : std::atoi(line.c_str() + dash + 1);
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  while (latest() < at_least && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return latest();
}

// The chaos runs' cluster: a PS on host 1, the chief (worker 0) on
// `chief_host`, worker 1 on `worker_host`, at `cluster`, each under
// TF_CONFIG with --insecure; the trainers run `steps` (--sync when asked)
// with a checkpoint every 100 into `dir`. Logs TmpDir()/NAME_{ps,chief,
// worker}.log.
absl::Status StartCutLinkCluster(const Hosts& hosts, int chief_host, int worker_host,
                                 const std::string& cluster, const std::string& name,
                                 const std::string& dir, int steps, bool sync, Task& ps,
                                 Task& chief, Task& worker) {
  std::vector<std::string> train = {"train",
                                    "--insecure",
                                    absl::StrCat("--steps=", steps),
                                    "--save_checkpoint_steps=100",
                                    "--checkpoint_dir=" + dir,
                                    "--format=json",
                                    "--intra_op_threads=1",
                                    "--inter_op_threads=2"};
  if (sync) train.push_back("--sync");
  auto tf_config = [&](const std::string& job, int index) {
    return absl::StrCat(R"(TF_CONFIG={"cluster": )", cluster, R"(, "task": {"type": ")", job,
                        R"(", "index": )", index, "}}");
  };
  absl::Status s = Start(ps, hosts.host(1), {"train", "--insecure", "--checkpoint_dir=" + dir},
                         {tf_config("ps", 0)}, TmpDir() + "/" + name + "_ps.log");
  if (s.ok()) {
    s = Start(chief, hosts.host(chief_host), train, {tf_config("worker", 0)},
              TmpDir() + "/" + name + "_chief.log");
  }
  if (!s.ok()) return s;
  return Start(worker, hosts.host(worker_host), train, {tf_config("worker", 1)},
               TmpDir() + "/" + name + "_worker.log");
}

// Chaos, a cut link: PS training with the PS on host 1 and the chief and
// worker 1 on host 2, asynchronous or `sync` (--sync: every update waits
// for both workers' gradients). After the checkpoint of step >= 200 host
// 1's link goes down (`ip link set down` on its switch port): nothing
// resets, packets just vanish, so only the heartbeat (1 s, 3 misses) can
// tell. Chief and worker report `Unavailable` naming the PS within 5 s and
// wait for it; the link comes back 2 s later, the PS still holds its
// variables, so nothing is restored (a synchronous chief remakes the
// token queue and accumulators, which workers wait for), and the run ends
// at its step count (`steps`) with a trained model.
void TrainThroughACutLink(bool sync, int steps) {
  if (!std::filesystem::exists(kData)) GTEST_SKIP() << "no " << kData;
  Hosts hosts(2);
  const std::string why = hosts.Make();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string a1 = Hosts::address(1), a2 = Hosts::address(2);
  const std::string cluster = absl::StrCat(R"({"ps": [")", a1, R"(:2222"], "worker": [")", a2,
                                           R"(:2222", ")", a2, R"(:2223"]})");
  const std::string name = sync ? "cut_link_sync" : "cut_link";
  const std::string dir = TmpDir() + "/" + name + "_ckpt";
  std::filesystem::remove_all(dir);
  Task ps, chief, worker;
  ASSERT_TRUE(
      StartCutLinkCluster(hosts, 2, 2, cluster, name, dir, steps, sync, ps, chief, worker).ok());
  const int seen_checkpoint = WaitForCheckpoint(dir, 200);
  ASSERT_GE(seen_checkpoint, 200) << ReadAll(chief.p.log_file);
  const std::string port = Hosts::in(hosts.switch_ns()) + "ip link set p1 ";
  ASSERT_EQ(Sh(port + "down"), 0);
  const auto cut = std::chrono::steady_clock::now();
  double chief_ms = -1, worker_ms = -1;
  while ((chief_ms < 0 || worker_ms < 0) &&
         std::chrono::steady_clock::now() < cut + std::chrono::seconds(30)) {
    const double now =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - cut).count();
    if (chief_ms < 0 && ReadAll(chief.p.log_file).find("Unavailable: ") != std::string::npos) {
      chief_ms = now;
    }
    if (worker_ms < 0 && ReadAll(worker.p.log_file).find("Unavailable: ") != std::string::npos) {
      worker_ms = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_EQ(Sh(port + "up"), 0);
  const auto back = std::chrono::steady_clock::now();
  ASSERT_GE(chief_ms, 0) << ReadAll(chief.p.log_file);
  ASSERT_GE(worker_ms, 0) << ReadAll(worker.p.log_file);
  const int chief_rc = Wait(chief, std::chrono::seconds(180));
  const std::string chief_log = ReadAll(chief.p.log_file);
  ASSERT_EQ(chief_rc, 0) << chief_log;
  EXPECT_EQ(Wait(worker, std::chrono::seconds(120)), 0) << ReadAll(worker.p.log_file);
  std::cout << "link of the PS host cut after the checkpoint of step " << seen_checkpoint
            << "; Unavailable reported by the chief after " << chief_ms << " ms, worker 1 after "
            << worker_ms << " ms; training ended "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - back).count()
            << " s after the link came back\n";
  const std::string line = chief_log.substr(chief_log.find("Unavailable: "));
  EXPECT_THAT(line.substr(0, line.find('\n')), HasSubstr("/job:ps/replica:0/task:0"));
  EXPECT_THAT(chief_log, HasSubstr("goes on with new sessions once the cluster answers again"));
  auto json = ParseJson(ResultLine(chief_log));
  ASSERT_TRUE(json.ok()) << chief_log;
  EXPECT_GE(std::stod(json->Find("global_step")->number_text()), steps);
  EXPECT_LE(std::stod(json->Find("global_step")->number_text()), steps + 1);
  EXPECT_GE(std::stod(json->Find("restarts")->number_text()), 1);
  EXPECT_TRUE(json->Find("restored_devices")->items().empty()) << json->Serialize();
  EXPECT_GT(std::stod(json->Find("test_accuracy")->number_text()), 0.8) << json->Serialize();
  if (!kSanitized) {
    // Within 5 s of the cut (heartbeat), with a margin for a loaded machine.
    EXPECT_LT(chief_ms, 8000);
    EXPECT_LT(worker_ms, 8000);
  }
}

TEST(NetnsTrainTest, AsyncTrainingOutlivesACutLink) { TrainThroughACutLink(false, 3000); }

TEST(NetnsTrainTest, SyncTrainingOutlivesACutLink) { TrainThroughACutLink(true, 1500); }

// Chaos, a trainer's link cut: asynchronous PS training with the PS, the
// chief and worker 1 on hosts 1, 2 and 3. After the checkpoint of step >=
// 200 the chief's (or worker 1's) link goes down until the cut-off trainer
// has reported `Unavailable` naming the PS (within 5 s), and 1 s more;
// the PS ends the steps the trainer left there (reported when one was
// running); the other trainer goes on without an error. When the link is
// back the trainer builds new sessions and goes on, nothing is restored,
// and the run ends at its step count with a trained model.
void TrainerLinkCut(bool chief_cut) {
  if (!std::filesystem::exists(kData)) GTEST_SKIP() << "no " << kData;
  Hosts hosts(3);
  const std::string why = hosts.Make();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string cluster =
      absl::StrCat(R"({"ps": [")", Hosts::address(1), R"(:2222"], "worker": [")", Hosts::address(2),
                   R"(:2222", ")", Hosts::address(3), R"(:2222"]})");
  const std::string name = chief_cut ? "cut_chief" : "cut_worker";
  const std::string dir = TmpDir() + "/" + name + "_ckpt";
  std::filesystem::remove_all(dir);
  const int steps = 3000;
  Task ps, chief, worker;
  ASSERT_TRUE(
      StartCutLinkCluster(hosts, 2, 3, cluster, name, dir, steps, false, ps, chief, worker).ok());
  Task& victim = chief_cut ? chief : worker;
  Task& other = chief_cut ? worker : chief;
  const std::string victim_task =
      chief_cut ? "/job:worker/replica:0/task:0" : "/job:worker/replica:0/task:1";
  const int seen_checkpoint = WaitForCheckpoint(dir, 200);
  ASSERT_GE(seen_checkpoint, 200) << ReadAll(chief.p.log_file);
  const size_t other_before = ReadAll(other.p.log_file).size();
  const size_t victim_before = ReadAll(victim.p.log_file).size();
  const size_t ps_before = ReadAll(ps.p.log_file).size();
  const std::string port =
      Hosts::in(hosts.switch_ns()) + absl::StrCat("ip link set p", chief_cut ? 2 : 3, " ");
  ASSERT_EQ(Sh(port + "down"), 0);
  const auto cut = std::chrono::steady_clock::now();
  auto since_cut = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - cut)
        .count();
  };
  // The line that names `task`, in `log`, after `from`; "" when none.
  auto unavailable = [](const std::string& log, const std::string& task, size_t from) {
    for (size_t at = log.find("Unavailable: ", from); at != std::string::npos;
         at = log.find("Unavailable: ", at + 1)) {
      const std::string line = log.substr(at, log.find('\n', at) - at);
      if (line.find(task) != std::string::npos) return line;
    }
    return std::string();
  };
  // Down until the trainer reported the PS (bounded), then 1 s more for
  // the PS's report of the trainer.
  double victim_ms = -1, ps_ms = -1;
  const auto give_up = cut + std::chrono::seconds(kSanitized ? 30 : 15);
  std::optional<std::chrono::steady_clock::time_point> until;
  while (std::chrono::steady_clock::now() < (until ? *until : give_up)) {
    if (victim_ms < 0 &&
        !unavailable(ReadAll(victim.p.log_file), "/job:ps/replica:0/task:0", victim_before)
             .empty()) {
      victim_ms = since_cut();
      until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    if (ps_ms < 0 && !unavailable(ReadAll(ps.p.log_file), victim_task, ps_before).empty()) {
      ps_ms = since_cut();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(Sh(port + "up"), 0);
  const auto back = std::chrono::steady_clock::now();
  const int chief_rc = Wait(chief, std::chrono::seconds(180));
  const std::string chief_log = ReadAll(chief.p.log_file);
  ASSERT_EQ(chief_rc, 0) << chief_log;
  EXPECT_EQ(Wait(worker, std::chrono::seconds(120)), 0) << ReadAll(worker.p.log_file);
  const std::string victim_log = ReadAll(victim.p.log_file);
  const std::string other_log = ReadAll(other.p.log_file);
  std::cout << (chief_cut ? "chief" : "worker 1") << "'s link cut after the checkpoint of "
            << "step " << seen_checkpoint << "; it reported the PS after " << victim_ms
            << " ms, the PS reported it after " << ps_ms << " ms (-1: none); training ended "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - back).count()
            << " s after the link came back\n";
  EXPECT_GE(victim_ms, 0) << victim_log;
  EXPECT_EQ(other_log.find("Unavailable", other_before), std::string::npos) << other_log;
  auto json = ParseJson(ResultLine(chief_log));
  ASSERT_TRUE(json.ok()) << chief_log;
  EXPECT_GE(std::stod(json->Find("global_step")->number_text()), steps);
  EXPECT_LE(std::stod(json->Find("global_step")->number_text()), steps + 1);
  EXPECT_TRUE(json->Find("restored_devices")->items().empty()) << json->Serialize();
  EXPECT_GT(std::stod(json->Find("test_accuracy")->number_text()), 0.8) << json->Serialize();
  auto vjson = ParseJson(ResultLine(victim_log));
  ASSERT_TRUE(vjson.ok()) << victim_log;
  EXPECT_GE(std::stod(vjson->Find("restarts")->number_text()), 1) << vjson->Serialize();
  if (!kSanitized) {
    // Within 5 s of the cut (heartbeat), with a margin for a loaded machine.
    EXPECT_LT(victim_ms, 8000);
  }
}

TEST(NetnsTrainTest, AsyncTrainingOutlivesTheChiefsCutLink) { TrainerLinkCut(true); }

TEST(NetnsTrainTest, AsyncTrainingOutlivesAWorkersCutLink) { TrainerLinkCut(false); }

TEST(NetnsTrainTest, BeyondLoopbackWithoutCredentialsExitsAtOnce) {
  Hosts hosts;
  const std::string why = hosts.Make();
  if (!why.empty()) GTEST_SKIP() << why;
  Task server;
  const std::string cluster = absl::StrCat(R"({"ps": [")", Hosts::address(1), R"(:2222"]})");
  ASSERT_TRUE(Start(server, hosts.host(1), {"server", "--cluster=" + cluster, "--job=ps"}, {},
                    TmpDir() + "/netns_refused.log")
                  .ok());
  EXPECT_EQ(Wait(server, std::chrono::seconds(30)), 1);
  const std::string log = ReadAll(server.p.log_file);
  EXPECT_THAT(log, HasSubstr("FailedPrecondition: task /job:ps/replica:0/task:0 would listen on " +
                             Hosts::address(1)));
  EXPECT_THAT(log, HasSubstr("give the cluster certificates (--tls_ca, --tls_cert, --tls_key"));
  EXPECT_THAT(log,
              HasSubstr("or a token (--auth_token_file or GRAPHRUN_AUTH_TOKEN), or --insecure"));
}

}  // namespace
}  // namespace graphrun
