// `srun graphrun train` on a real Slurm (Debian's slurm-wlm and munge): the
// test writes a one-node configuration (ports chosen free at run time,
// every file under its temporary directory), starts munged, slurmctld and
// slurmd in the foreground, and runs a 1 PS + 2 worker job as three tasks
// of one srun step. Each task derives the cluster from SLURM_* (rank 0 the
// PS, ranks 1 and 2 the workers, worker 0 the chief; ports port_base +
// local rank) and the job trains Fashion-MNIST for one epoch. Skipped,
// saying why, where Slurm is not installed, not root, or the host name
// does not resolve.
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/process_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/json.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;
constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A port free now (bound and released).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// The first of `n` consecutive ports that are all free now.
int FreePortRun(int n) {
  for (int base = 20000 + getpid() % 20000; base < 60000; base += 97) {
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(base + i);
      ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      close(fd);
    }
    if (ok) return base;
  }
  return 0;
}

// Runs a command to completion (bounded by `seconds`); its exit status.
int RunCommand(const std::string& binary, const std::vector<std::string>& args,
               const std::vector<std::string>& env, const std::string& log, int seconds) {
  auto pid = distributed::SpawnProcess(binary, args, env, log);
  if (!pid.ok()) return -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (waitpid(*pid, &st, WNOHANG) == *pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(-*pid, SIGKILL);
  kill(*pid, SIGKILL);
  waitpid(*pid, nullptr, 0);
  return -2;
}

struct Daemons {
  std::vector<distributed::ChildProcess> all;
  ~Daemons() { distributed::StopProcesses(all, 5000); }
  bool Start(const std::string& binary, const std::vector<std::string>& args,
             const std::vector<std::string>& env, const std::string& log) {
    distributed::ChildProcess c;
    c.task = binary;
    c.log_file = log;
    auto pid = distributed::SpawnProcess(binary, args, env, log);
    if (!pid.ok()) return false;
    c.pid = *pid;
    all.push_back(c);
    return true;
  }
};

std::string WhyNot() {
  for (const char* b : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd",
                        "/usr/bin/srun", "/usr/bin/sinfo"}) {
    if (access(b, X_OK) != 0) return absl::StrCat(b, " is not installed (slurm-wlm, munge)");
  }
  if (geteuid() != 0) return "slurmd must run as root here";
  if (!std::filesystem::exists(kData)) return absl::StrCat("no ", kData);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  addrinfo* res = nullptr;
  if (getaddrinfo(host, nullptr, nullptr, &res) != 0) {
    return absl::StrCat("the host name '", host, "' does not resolve (Slurm's node name)");
  }
  freeaddrinfo(res);
  return "";
}

TEST(SlurmTest, SrunTrainsOnePsAndTwoWorkers) {
  const std::string why = WhyNot();
  if (!why.empty()) GTEST_SKIP() << why;
  char hostbuf[256] = {};
  gethostname(hostbuf, sizeof(hostbuf) - 1);
  const std::string host = hostbuf;
  // Short: munged's socket path must fit a sockaddr_un (108 bytes).
  std::string made = "/tmp/grslurm_XXXXXX";
  ASSERT_NE(mkdtemp(made.data()), nullptr);
  const std::string dir = made;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};
  std::filesystem::create_directories(dir + "/state");
  std::filesystem::create_directories(dir + "/spool");
  std::filesystem::create_directories(dir + "/out");
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  {
    std::ofstream key(dir + "/munge.key", std::ios::binary);
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::vector<char> bytes(1024);
    random.read(bytes.data(), bytes.size());
    key.write(bytes.data(), bytes.size());
  }
  std::filesystem::permissions(dir + "/munge.key", std::filesystem::perms::owner_read);
  const std::string sock = dir + "/munge.sock";
  const std::string conf = dir + "/slurm.conf";
  std::ofstream(conf) << "ClusterName=graphrun\n"
                      << "SlurmctldHost=" << host << "(127.0.0.1)\n"
                      << "SlurmctldPort=" << FreePort() << "\nSlurmdPort=" << FreePort() << "\n"
                      << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << sock
                      << "\nSlurmUser=root\nSlurmdUser=root\n"
                      << "StateSaveLocation=" << dir << "/state\nSlurmdSpoolDir=" << dir
                      << "/spool\nSlurmctldPidFile=" << dir
                      << "/slurmctld.pid\nSlurmdPidFile=" << dir << "/slurmd.pid\n"
                      << "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\n"
                      << "JobAcctGatherType=jobacct_gather/none\n"
                      << "AccountingStorageType=accounting_storage/none\nSwitchType=switch/none\n"
                      << "MpiDefault=none\nSelectType=select/cons_tres\n"
                      << "SelectTypeParameters=CR_CPU\nSlurmdParameters=config_overrides\n"
                      << "ReturnToService=2\nSchedulerType=sched/builtin\n"
                      << "NodeName=" << host << " NodeAddr=127.0.0.1 CPUs=4 RealMemory=1000\n"
                      << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP "
                         "OverSubscribe=YES\n";
  const std::vector<std::string> env = {"SLURM_CONF=" + conf};
  Daemons daemons;
  ASSERT_TRUE(daemons.Start("/usr/sbin/munged",
                            {"-F", "-f", "--socket=" + sock, "--key-file=" + dir + "/munge.key",
                             "--pid-file=" + dir + "/munged.pid", "--seed-file=" + dir + "/seed",
                             "--log-file=" + dir + "/munged.log"},
                            env, dir + "/munged.out"));
  ASSERT_TRUE(
      daemons.Start("/usr/sbin/slurmctld", {"-D", "-f", conf}, env, dir + "/slurmctld.log"));
  ASSERT_TRUE(daemons.Start("/usr/sbin/slurmd", {"-D", "-f", conf}, env, dir + "/slurmd.log"));
  // Bounded wait for the node to be idle.
  bool idle = false;
  for (int i = 0; i < 120 && !idle; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    RunCommand("/usr/bin/sinfo", {"-h", "-o", "%t"}, env, dir + "/sinfo.out", 10);
    idle = ReadAll(dir + "/sinfo.out").find("idle") != std::string::npos;
  }
  ASSERT_TRUE(idle) << ReadAll(dir + "/sinfo.out") << ReadAll(dir + "/slurmctld.log")
                    << ReadAll(dir + "/slurmd.log");

  const std::string graphrun = std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/tools/graphrun";
  const int port_base = FreePortRun(3);
  ASSERT_GT(port_base, 0);
  const std::string ckpt = dir + "/ckpt";
  // The token reaches every task through srun's environment; the tasks
  // listen where the node name resolves (loopback or not).
  std::vector<std::string> job_env = env;
  job_env.push_back("GRAPHRUN_AUTH_TOKEN=slurm-test-token");
  const int rc =
      RunCommand("/usr/bin/srun",
                 {"-N1", "-n3", "--overcommit", "--wait=20", "--output=" + dir + "/out/%t.log",
                  graphrun, "train", "--data=" + std::string(kData), "--epochs=1",
                  "--checkpoint_dir=" + ckpt, absl::StrCat("--port_base=", port_base),
                  "--format=json", "--intra_op_threads=1", "--inter_op_threads=2"},
                 job_env, dir + "/srun.log", 300);
  const std::string ps_log = ReadAll(dir + "/out/0.log");
  const std::string chief_log = ReadAll(dir + "/out/1.log");
  const std::string worker_log = ReadAll(dir + "/out/2.log");
  // A PS serves until it is stopped, as in TensorFlow: srun's --wait ends
  // it once the workers are done (so srun's status reflects the killed
  // PS); the step must end well before the test's bound.
  EXPECT_NE(rc, -2) << "srun did not finish within 300 s";
  EXPECT_THAT(ps_log, HasSubstr("TF_CONFIG names a ps task")) << ps_log;
  EXPECT_THAT(ps_log, HasSubstr(absl::StrCat(":", port_base))) << ps_log;
  // The chief's last line: its result.
  std::string trimmed = chief_log.substr(0, chief_log.find_last_not_of('\n') + 1);
  auto json = ParseJson(trimmed.substr(trimmed.rfind('\n') + 1));
  ASSERT_TRUE(json.ok()) << chief_log << "\n--- srun:\n" << ReadAll(dir + "/srun.log");
  std::cout << "srun 1 ps + 2 workers: " << json->Serialize() << "\n";
  EXPECT_EQ(json->Find("mode")->string_value(), "tf_config");
  EXPECT_EQ(std::stod(json->Find("ps")->number_text()), 1);
  EXPECT_EQ(std::stod(json->Find("workers")->number_text()), 2);
  EXPECT_GE(std::stod(json->Find("test_accuracy")->number_text()), 0.75);
  EXPECT_THAT(worker_log, HasSubstr("\"test_accuracy\": null")) << worker_log;
}

}  // namespace
}  // namespace graphrun
