#include "tools/placement_flags.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "distributed/cluster_spec.h"
#include "graph/status.h"
#include "placement/placement_pass.h"
#include "tools/file_util.h"
#include "util/json.h"

namespace graphrun {
namespace tools {

FlagSet& AddPlacementFlags(FlagSet& f) {
  return f.String("ps_tasks", "N", "place variables on N PS tasks (/job:ps/task:k)")
      .String("cluster", "JSON|@FILE", "TensorFlow ClusterSpec {\"ps\": [...], \"worker\": [...]}")
      .String("strategy", "NAME", "PS strategy: round_robin (default), greedy_bytes, balanced")
      .String("batch_size", "N", "unknown dimensions count N in bytes/step (default 1)");
}

absl::StatusOr<std::map<std::string, int>> ParseClusterJson(absl::string_view text) {
  GR_ASSIGN_OR_RETURN(JsonValue root, ParseJson(text));
  const JsonValue* jobs = &root;
  if (root.is_object() && root.Find("cluster") != nullptr) jobs = root.Find("cluster");
  if (!jobs->is_object()) {
    return absl::InvalidArgumentError("cluster: expected an object of job name -> tasks");
  }
  std::map<std::string, int> out;
  // Checked as a server would check them: addresses are host:port, no job
  // or index is given twice, the chief has one name.
  auto address = [&](const std::string& job, const JsonValue& a) -> absl::Status {
    int port = 0;
    if (!a.is_string() || !distributed::ParseHostPort(a.string_value(), &port)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster: job '", job, "': ",
          a.is_string() ? "'" + OneLine(a.string_value()) + "'" : "a value", " is not host:port"));
    }
    return absl::OkStatus();
  };
  for (const auto& [job, tasks] : jobs->members()) {
    if (job.empty()) return absl::InvalidArgumentError("cluster: empty job name");
    if (out.count(job) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("cluster: job '", job, "' given twice"));
    }
    int n = 0;
    if (tasks.is_array()) {
      n = static_cast<int>(tasks.items().size());
      for (const JsonValue& a : tasks.items()) GR_RETURN_IF_ERROR(address(job, a));
    } else if (tasks.is_object()) {
      std::set<int> seen;
      for (const auto& [index, addr] : tasks.members()) {
        int i = 0;
        if (!absl::SimpleAtoi(index, &i) || i < 0 || i > 1 << 20 || absl::StrCat(i) != index ||
            !seen.insert(i).second) {
          return absl::InvalidArgumentError(
              absl::StrCat("cluster: job '", job, "': bad task index '", OneLine(index), "'"));
        }
        GR_RETURN_IF_ERROR(address(job, addr));
        n = std::max(n, i + 1);
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster: job '", job, "': expected a list of addresses"));
    }
    out[job] = n;
  }
  if (out.count("chief") > 0 && out.count("master") > 0) {
    return absl::InvalidArgumentError(
        "cluster: both a 'chief' and a 'master' job (master is the chief)");
  }
  return out;
}

absl::StatusOr<PlacementFlags> ParsePlacementFlags(const ParsedFlags& flags) {
  PlacementFlags out;
  GR_ASSIGN_OR_RETURN(int64_t ps, flags.GetInt("ps_tasks", 0, 0, 1 << 16));
  out.ps_tasks = static_cast<int>(ps);
  GR_ASSIGN_OR_RETURN(out.batch_size, flags.GetInt("batch_size", 1, 1, int64_t{1} << 32));
  if (flags.Has("cluster")) {
    if (flags.Has("ps_tasks")) {
      return absl::InvalidArgumentError("--cluster and --ps_tasks are exclusive");
    }
    std::string text = flags.GetString("cluster");
    if (!text.empty() && text[0] == '@') {
      GR_ASSIGN_OR_RETURN(text, ReadFileToString(text.substr(1), /*max_bytes=*/64 << 20));
    }
    auto cluster = ParseClusterJson(text);
    if (!cluster.ok()) return AnnotateStatus(cluster.status(), "--cluster: ");
    out.cluster = std::move(*cluster);
    if (out.cluster.empty()) return absl::InvalidArgumentError("--cluster: no jobs");
  }
  if (flags.Has("strategy")) {
    out.strategy = flags.GetString("strategy");
    if (!out.enabled()) {
      return absl::InvalidArgumentError("--strategy needs --ps_tasks or --cluster");
    }
  }
  return out;
}

absl::StatusOr<placement::PlacementReport> ApplyPlacementFlags(
    tensorflow::GraphDef* graph, const PlacementFlags& flags,
    const std::vector<std::string>& fetches, const OpRegistry* registry) {
  placement::PlacementPolicyOptions options;
  options.ps_tasks = flags.ps_tasks;
  options.cluster = flags.cluster;
  options.strategy = flags.strategy;
  options.batch_size = flags.batch_size;
  options.op_registry = registry;
  GR_ASSIGN_OR_RETURN(placement::PlacementPolicyResult result,
                      placement::ApplyPlacementPolicy(graph, options));
  if (result.num_ps_tasks == 0) {
    return absl::InvalidArgumentError(
        "--cluster has no 'ps' job: nothing to place on parameter servers");
  }
  placement::ReportOptions report;
  report.strategy = flags.strategy;
  report.ps_job = placement::PsJob(options);
  report.worker_job = placement::WorkerJob(options);
  report.num_ps_tasks = result.num_ps_tasks;
  report.num_worker_tasks = result.num_worker_tasks;
  report.batch_size = flags.batch_size;
  report.fetches = fetches;
  report.op_registry = registry;
  return placement::BuildPlacementReport(*graph, report);
}

}  // namespace tools
}  // namespace graphrun
