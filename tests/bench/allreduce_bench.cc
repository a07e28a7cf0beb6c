// All-reduce between processes on one host through graphrun's task
// transport: each process is a task with a gRPC server and a data channel
// (ports reported through the launcher link), and runs RemoteCollectives'
// all-reduce of a float tensor of --bytes, --iters times after a warm-up.
// Rank 0 prints one line: the median time per all-reduce and the bus
// bandwidth (nccl-tests' busbw = bytes / time * 2 (p - 1) / p).
//
//   allreduce_bench --procs=2 --bytes=1048576 --iters=50
//   allreduce_bench --procs=2 --bytes=1024 --iters=300 --pull  # doubling by request
//   allreduce_bench --tcp --bytes=67108864 --iters=10   # raw single-stream TCP
//
// The second form measures plain loopback TCP at the same message size:
// one socket, the message written by one process and read by the other,
// the median GB/s of --iters transfers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "distributed/cluster_spec.h"
#include "distributed/launcher_link.h"
#include "distributed/process_util.h"
#include "distributed/rpc/grpc_server.h"
#include "util/notification.h"

namespace graphrun {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  int procs = 2, rank = 0, iters = 20;
  int64_t bytes = 1 << 20;
  bool tcp = false;
  bool pull = false;  // recursive doubling by request and answer, not push
  std::string hint = "auto";
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One task: serves, then all-reduces --iters times; rank 0 reports.
int RunTask(const Flags& f, int launcher_fd) {
  distributed::ClusterSpec placeholder;
  for (int i = 0; i < f.procs; ++i) placeholder.AddTask("worker", "127.0.0.1:0");
  distributed::ServerOptions so;
  so.cluster = placeholder;
  so.job = "worker";
  so.task = f.rank;
  so.intra_op_threads = 1;
  so.inter_op_threads = 1;
  so.collective_push = !f.pull;
  std::unique_ptr<distributed::GrpcServer> server;
  std::vector<distributed::ChildProcess> children;
  if (f.rank == 0) {
    so.port = 0;
    so.await_cluster = true;
    auto s = distributed::GrpcServer::Create(so);
    if (!s.ok() || !(*s)->Start().ok()) return 1;
    server = std::move(*s);
    for (int k = 1; k < f.procs; ++k) {
      distributed::ChildProcess c;
      c.task = distributed::TaskName("worker", k);
      std::vector<std::string> args = {
          absl::StrCat("--procs=", f.procs), absl::StrCat("--rank=", k),
          absl::StrCat("--bytes=", f.bytes), absl::StrCat("--iters=", f.iters), "--hint=" + f.hint};
      if (f.pull) args.push_back("--pull");
      absl::Status st = distributed::SpawnTask("/proc/self/exe", args, {}, c);
      if (!st.ok()) return 1;
      children.push_back(c);
    }
    if (!distributed::CollectPorts(children, 60000).ok()) return 1;
    distributed::ClusterSpec spec;
    spec.AddTask("worker", absl::StrCat("127.0.0.1:", server->bound_port()));
    for (const auto& c : children) spec.AddTask("worker", absl::StrCat("127.0.0.1:", c.port));
    server->UpdateCluster(spec);
    if (!distributed::SendCluster(children, spec).ok()) return 1;
  } else {
    auto s = distributed::StartServerForLauncher(so, launcher_fd, 60000);
    if (!s.ok()) {
      fprintf(stderr, "%s\n", std::string(s.status().message()).c_str());
      return 1;
    }
    server = std::move(*s);
  }
  CollectiveArgs a;
  a.type = CollectiveType::kReduce;
  a.group_size = f.procs;
  a.group_key = 1;
  a.instance_key = 1;
  a.final_op = CollectiveFinal::kDiv;
  a.dtype = DT_FLOAT;
  a.communication_hint = f.hint;
  a.device = distributed::TaskName("worker", f.rank) + "/device:CPU:0";
  a.node = "bench";
  Tensor input(DT_FLOAT, TensorShape({std::max<int64_t>(1, f.bytes / 4)}));
  for (int64_t i = 0; i < input.NumElements(); ++i) input.base<float>()[i] = f.rank + i % 7;
  std::vector<double> times;
  const int warmup = 3;
  for (int it = 0; it < warmup + f.iters; ++it) {
    Notification done;
    absl::Status status;
    const auto t0 = Clock::now();
    server->collectives()->Run(a, input, nullptr, [&](absl::StatusOr<Tensor> r) {
      status = r.status();
      done.Notify();
    });
    done.WaitForNotification();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!status.ok()) {
      fprintf(stderr, "rank %d: %s\n", f.rank, std::string(status.message()).c_str());
      return 1;
    }
    if (it >= warmup) times.push_back(us);
  }
  if (f.rank == 0) {
    const double us = Median(times);
    const double algbw = f.bytes / (us * 1e-6) / 1e9;
    printf("graphrun bytes=%lld procs=%d us=%.1f busbw=%.3f\n", static_cast<long long>(f.bytes),
           f.procs, us, algbw * 2.0 * (f.procs - 1) / f.procs);
    for (auto& c : children) {
      int st = 0;
      waitpid(c.pid, &st, 0);
      c.pid = 0;
    }
  }
  // Let the peers finish their last fetches before this server goes.
  if (f.rank != 0) usleep(200000);
  server->Stop();
  return 0;
}

// Raw single-stream loopback TCP: the median GB/s of one message.
int RunTcp(const Flags& f) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(lfd, 1) != 0 ||
      getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return 1;
  }
  std::vector<char> buf(static_cast<size_t>(f.bytes), 1);
  const int total = 3 + f.iters;
  pid_t pid = fork();
  if (pid == 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(1);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (int i = 0; i < total; ++i) {
      size_t done = 0;
      while (done < buf.size()) {
        ssize_t n = write(fd, buf.data() + done, buf.size() - done);
        if (n <= 0) _exit(1);
        done += static_cast<size_t>(n);
      }
      char ack;
      if (read(fd, &ack, 1) != 1) _exit(1);
    }
    _exit(0);
  }
  int fd = accept(lfd, nullptr, nullptr);
  std::vector<double> gbps;
  for (int i = 0; i < total; ++i) {
    const auto t0 = Clock::now();
    size_t done = 0;
    while (done < buf.size()) {
      ssize_t n = read(fd, buf.data() + done, buf.size() - done);
      if (n <= 0) return 1;
      done += static_cast<size_t>(n);
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (write(fd, "k", 1) != 1) return 1;
    if (i >= 3) gbps.push_back(f.bytes / s / 1e9);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  printf("tcp bytes=%lld GBps=%.3f\n", static_cast<long long>(f.bytes), Median(gbps));
  return 0;
}

}  // namespace
}  // namespace graphrun

int main(int argc, char** argv) {
  graphrun::Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      std::string p = std::string("--") + name + "=";
      return a.rfind(p, 0) == 0 ? argv[i] + p.size() : nullptr;
    };
    if (const char* v = value("procs")) f.procs = atoi(v);
    if (const char* v = value("rank")) f.rank = atoi(v);
    if (const char* v = value("iters")) f.iters = atoi(v);
    if (const char* v = value("bytes")) f.bytes = atoll(v);
    if (const char* v = value("hint")) f.hint = v;
    if (a == "--tcp") f.tcp = true;
    if (a == "--pull") f.pull = true;
  }
  if (f.procs < 1 || f.iters < 1 || f.bytes < 4) {
    fprintf(stderr, "usage: allreduce_bench --procs=P --bytes=N --iters=R [--hint=H] | --tcp\n");
    return 2;
  }
  if (f.tcp) return graphrun::RunTcp(f);
  return graphrun::RunTask(f, graphrun::distributed::TakeLauncherFd());
}
