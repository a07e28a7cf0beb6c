#include "tools/status_command.h"

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "distributed/cluster_spec.h"
#include "distributed/rpc/grpc_worker_client.h"
#include "graph/memory_budget.h"
#include "graph/status.h"
#include "tools/credential_flags.h"
#include "tools/flags.h"
#include "util/json.h"

namespace graphrun {
namespace tools {
namespace {

const FlagSet& StatusFlagSet() {
  static const FlagSet* const kFlags = [] {
    auto* f = new FlagSet();
    f->String("interval_ms", "N", "steps/s over N ms between two looks (default 1000)")
        .String("timeout_ms", "N", "per-task answer deadline (default 5000)")
        .String("format", "text|json", "output format (default text)");
    AddCredentialFlags(*f);
    return f;
  }();
  return *kFlags;
}

struct Row {
  std::string task, address;
  absl::StatusOr<distributed::GetStatusResponse> first = absl::UnknownError("not asked"),
                                                 second = absl::UnknownError("not asked");
};

std::string Devices(const distributed::GetStatusResponse& r) {
  std::map<std::string, int> n;
  for (const auto& d : r.device()) ++n[d.device_type()];
  std::string out;
  for (const auto& [type, count] : n)
    absl::StrAppend(&out, out.empty() ? "" : ",", count, " ", type);
  return out;
}

}  // namespace

std::string StatusUsage() {
  return absl::StrCat(
      "usage: graphrun status HOST:PORT [flags]\n\n"
      "Asks the task at HOST:PORT for its cluster, then every task of it for its\n"
      "devices, sessions, steps and tensor bytes, twice --interval_ms apart (for\n"
      "steps/s). A task that does not answer is named on its row (exit 1).\n\nflags:\n",
      StatusFlagSet().Usage());
}

int StatusCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  auto usage = [&](const absl::Status& s) {
    err << StatusToLine(s) << "\n";
    return kExitUsage;
  };
  auto flags = StatusFlagSet().Parse(args);
  if (!flags.ok()) return usage(flags.status());
  if (flags->positional().size() != 1) {
    return usage(absl::InvalidArgumentError("status: give one task address, HOST:PORT"));
  }
  std::string address(absl::StripPrefix(flags->positional()[0], "grpc://"));
  if (int port = 0; !distributed::ParseHostPort(address, &port) || port == 0) {
    return usage(absl::InvalidArgumentError(
        absl::StrCat("status: '", address, "' is not HOST:PORT (port 1 to 65535)")));
  }
  auto interval = flags->GetInt("interval_ms", 1000, 0, 600000);
  auto timeout = flags->GetInt("timeout_ms", 5000, 1, 600000);
  if (!interval.ok()) return usage(interval.status());
  if (!timeout.ok()) return usage(timeout.status());
  const std::string format = flags->GetString("format", "text");
  if (format != "text" && format != "json") {
    return usage(absl::InvalidArgumentError("--format: text or json"));
  }
  auto creds = LoadCredentials(GetCredentialArgs(*flags));
  if (!creds.ok()) return usage(creds.status());
  distributed::ChannelOptions co;
  co.auth_token = creds->auth_token;
  co.tls = creds->tls;

  auto entry = distributed::FetchTaskStatus(address, co, true, *timeout);
  if (!entry.ok()) {
    err << StatusToLine(entry.status()) << "\n";
    return kExitFailure;
  }
  // The task's view of its cluster: a sparseCluster's task knows only some.
  auto cluster = distributed::ClusterSpec::FromJson(entry->stats().cluster_json(), /*sparse=*/true);
  if (!cluster.ok()) {
    err << StatusToLine(cluster.status()) << "\n";
    return kExitFailure;
  }
  std::vector<Row> rows;
  for (const std::string& task : cluster->TaskNames()) {
    Row r;
    r.task = task;
    r.address = cluster->AddressOfTask(task).value_or("");
    // The task asked is reached where it answered: its own entry may say
    // port 0 (any free port), which nobody can dial.
    if (task == entry->task()) r.address = address;
    rows.push_back(r);
  }
  // Two looks, `interval` apart, every task in parallel each time.
  auto look = [&](bool second) {
    std::vector<std::thread> threads;
    for (Row& r : rows) {
      threads.emplace_back([&r, &co, &timeout, second] {
        (second ? r.second : r.first) = distributed::FetchTaskStatus(r.address, co, true, *timeout);
      });
    }
    for (auto& t : threads) t.join();
  };
  const auto t0 = std::chrono::steady_clock::now();
  look(false);
  std::this_thread::sleep_for(std::chrono::milliseconds(*interval));
  look(true);
  const double seconds =
      std::max(1e-3, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  bool all_ok = true;
  std::string json = absl::StrCat("{\"cluster\": ", cluster->ToJson(), ", \"tasks\": [");
  std::string text =
      absl::StrCat("cluster ", cluster->ToJson(), "\n",
                   absl::StrFormat("%-30s %-22s %-8s %9s %9s %8s %11s %11s\n", "task", "address",
                                   "devices", "sessions", "steps", "steps/s", "sent", "received"));
  std::string peers, sent_peers;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (i > 0) json += ", ";
    absl::StrAppend(&json, "{\"task\": ", JsonQuote(r.task),
                    ", \"address\": ", JsonQuote(r.address));
    const auto& now = r.second.ok() ? r.second : r.first;
    if (!now.ok()) {
      all_ok = false;
      absl::StrAppend(&text, absl::StrFormat("%-30s %-22s unreachable: %s\n", r.task, r.address,
                                             StatusToLine(now.status())));
      absl::StrAppend(&json, ", \"error\": ", JsonQuote(StatusToLine(now.status())), "}");
      continue;
    }
    const distributed::TaskStats& s = now->stats();
    const double rate = r.first.ok() && r.second.ok()
                            ? (r.second->stats().steps() - r.first->stats().steps()) / seconds
                            : 0;
    int64_t received = 0;
    std::string received_json;
    for (const auto& p : s.received()) {
      received += p.bytes();
      absl::StrAppend(&received_json, received_json.empty() ? "" : ", ", JsonQuote(p.peer()), ": ",
                      p.bytes());
      absl::StrAppend(&peers, "  ", r.task, " <- ", p.peer(), "  ", HumanBytes(p.bytes()), "\n");
    }
    std::string sent_json;
    for (const auto& p : s.sent()) {
      absl::StrAppend(&sent_json, sent_json.empty() ? "" : ", ", JsonQuote(p.peer()), ": ",
                      p.bytes());
      absl::StrAppend(&sent_peers, "  ", r.task, " -> ", p.peer(), "  ", HumanBytes(p.bytes()),
                      "\n");
    }
    absl::StrAppend(
        &text, absl::StrFormat("%-30s %-22s %-8s %9d %9d %8.1f %11s %11s\n", r.task, r.address,
                               Devices(*now), s.worker_sessions() + s.master_sessions(), s.steps(),
                               rate, HumanBytes(s.sent_bytes()), HumanBytes(received)));
    std::string devices;
    for (const auto& d : now->device()) {
      absl::StrAppend(&devices, devices.empty() ? "" : ", ", JsonQuote(d.name()));
    }
    absl::StrAppend(
        &json, ", \"devices\": [", devices, "], \"worker_sessions\": ", s.worker_sessions(),
        ", \"master_sessions\": ", s.master_sessions(), ", \"steps\": ", s.steps(),
        ", \"steps_per_sec\": ", FormatDoubleShortest(rate), ", \"graph_runs\": ", s.graph_runs(),
        ", \"sent_bytes\": ", s.sent_bytes(), ", \"sent_bytes_by_peer\": {", sent_json,
        "}, \"received_bytes\": {", received_json, "}, \"tensor_bytes\": ", s.tensor_bytes(),
        ", \"uptime_ms\": ", s.uptime_ms(), ", \"error\": null}");
  }
  json += "]}";
  if (format == "json") {
    out << json << "\n";
  } else {
    out << text;
    if (!sent_peers.empty()) out << "tensor bytes sent, per peer:\n" << sent_peers;
    if (!peers.empty()) out << "tensor bytes received, per peer:\n" << peers;
  }
  return all_ok ? kExitOk : kExitFailure;
}

}  // namespace tools
}  // namespace graphrun
