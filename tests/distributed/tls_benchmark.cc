// What mutual TLS and the token handshake cost the data channel: 64 MiB
// RecvTensor (and 1 MiB, 8 bytes) over loopback, plaintext against TLS 1.3
// (AES-128-GCM) and plaintext with a token, every mode measured in the same
// run, interleaved repetition by repetition:
//   bazel run -c opt //tests/distributed:tls_benchmark [-- --reps=N]
// Prints GB/s (median of --reps, default 7) and the median per-repetition
// ratio to plaintext; the goal is TLS >= 0.7x plaintext at 64 MiB.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/rpc/data_channel.h"
#include "distributed/rpc/data_channel_testlib.h"
#include "util/tls_certs.h"

namespace graphrun {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()      ? 0
         : v.size() % 2 ? v[v.size() / 2]
                        : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Mode {
  std::string name;
  distributed::DataChannelOptions options;
  std::unique_ptr<distributed::DataChannelServer> server;
  std::shared_ptr<distributed::DataConnection> conn;
  std::string describe;
};

// Seconds for `calls` RecvTensor of `key` on `conn`; -1 on error.
double Time(distributed::DataConnection& conn, const std::string& key, int calls,
            int64_t want_bytes) {
  auto start = Clock::now();
  for (int i = 0; i < calls; ++i) {
    distributed::RecvTensorRequest req;
    req.set_rendezvous_key(key);
    distributed::RecvTensorResult r;
    absl::Status s = distributed::CallAndWait(
        [&](distributed::StatusCallback done) { conn.RecvTensorAsync(nullptr, req, &r, done); });
    if (!s.ok() || r.tensor.TotalBytes() != want_bytes) {
      std::fprintf(stderr, "RecvTensor %s: %s\n", key.c_str(), s.ToString().c_str());
      return -1;
    }
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int Main(int argc, char** argv) {
  int reps = 7;
  std::string only;  // --only=tls: that mode alone (for profiling)
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--reps=", 7) == 0) reps = std::max(1, std::atoi(argv[i] + 7));
    if (std::strncmp(argv[i], "--only=", 7) == 0) only = argv[i] + 7;
  }
  const std::string dir = std::filesystem::temp_directory_path().string() + "/graphrun_tls_bench";
  std::filesystem::remove_all(dir);
  if (absl::Status s = MakeClusterCertificates(dir, {"127.0.0.1"}, 1); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  auto tls = LoadTlsCredentials(dir + "/ca.crt", dir + "/127.0.0.1.crt", dir + "/127.0.0.1.key");
  if (!tls.ok()) return 1;

  distributed::test::FakeRecvWorker worker;
  const std::vector<int64_t> sizes = {8, int64_t{1} << 20, int64_t{64} << 20};
  for (int64_t n : sizes) worker.Add(absl::StrCat(n), Tensor(DT_UINT8, TensorShape({n})));

  std::vector<Mode> modes(3);
  // Every byte through the socket: same-host reads (on by default) would
  // hand the 1 MiB and 64 MiB payloads over by process_vm_readv, past TLS.
  for (Mode& m : modes) m.options.same_host_reads = false;
  modes[0].name = "plaintext";
  modes[1].name = "token (HMAC)";
  modes[1].options.auth_token = "benchmark-token";
  modes[2].name = "mutual TLS";
  modes[2].options.tls = *tls;
  if (only == "tls") modes.erase(modes.begin(), modes.begin() + 2);
  if (only == "plain") modes.resize(1);
  for (Mode& m : modes) {
    auto s = distributed::DataChannelServer::Start(&worker, "127.0.0.1", m.options);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      return 1;
    }
    m.server = std::move(*s);
    auto c =
        distributed::DataConnection::Connect("127.0.0.1", m.server->port(), "bench", m.options);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
      return 1;
    }
    m.conn = *c;
  }
  std::printf("RecvTensor over the data channel, loopback, one call at a time; median of %d\n",
              reps);
  std::printf("%-8s %-14s %12s %10s\n", "size", "mode", "GB/s", "ratio");
  for (int64_t n : sizes) {
    const int calls = n >= (int64_t{64} << 20) ? 4 : n >= (int64_t{1} << 20) ? 64 : 2000;
    std::vector<std::vector<double>> rate(modes.size()), ratio(modes.size());
    for (int r = 0; r < reps; ++r) {
      std::vector<double> sec(modes.size());
      for (size_t m = 0; m < modes.size(); ++m) {
        Time(*modes[m].conn, absl::StrCat("t:", n), 1, n);  // warm
        sec[m] = Time(*modes[m].conn, absl::StrCat("t:", n), calls, n);
        if (sec[m] <= 0) return 1;
        rate[m].push_back(static_cast<double>(n) * calls / sec[m]);
      }
      for (size_t m = 0; m < modes.size(); ++m) ratio[m].push_back(sec[0] / sec[m]);
    }
    for (size_t m = 0; m < modes.size(); ++m) {
      const std::string size =
          n >= (1 << 20) ? absl::StrCat(n >> 20, " MiB") : absl::StrCat(n, " B");
      if (n < 1024) {
        std::printf("%-8s %-14s %9.1f us %9.3fx\n", size.c_str(), modes[m].name.c_str(),
                    1e6 * n / Median(rate[m]), Median(ratio[m]));
      } else {
        std::printf("%-8s %-14s %7.3f GB/s %9.3fx\n", size.c_str(), modes[m].name.c_str(),
                    Median(rate[m]) / 1e9, Median(ratio[m]));
      }
    }
  }
  std::printf(
      "(8 B rows: microseconds per call; ratio = plaintext time / mode time, so\n"
      " below 1 is slower; the goal is mutual TLS >= 0.7x at 64 MiB)\n");
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace graphrun

int main(int argc, char** argv) { return graphrun::Main(argc, argv); }
