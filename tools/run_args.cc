#include "tools/run_args.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "graph/node_def_util.h"
#include "graph/status.h"

namespace graphrun {
namespace tools {

const FlagSet& RunFlagSet() {
  static const FlagSet* const kFlags = [] {
    auto* f = new FlagSet();
    f->Repeated("fetch", "NAME[:i]", "tensor to fetch and print")
        .Repeated("target_node", "NAME", "node to run for its effects only")
        .Repeated("feed", "NAME[:i]=JSON|NAME[:i]=@FILE.npy",
                  "value for a tensor (usually a Placeholder)")
        .String("devices", "TYPE=N[,TYPE=N]", "devices per type, e.g. CPU=2")
        .Bool("soft_placement",
              "place nodes on another device when the requested one cannot run them")
        .Bool("log_device_placement", "print each node's device to stderr")
        .String("inter_op_threads", "N", "threads running independent nodes (0: default)")
        .String("intra_op_threads", "N", "threads inside one kernel (0: default)")
        .String("timeout_ms", "N", "step deadline in milliseconds (0: none)")
        .String("format", "text|json", "output format (default text)")
        .String("save_npy", "DIR", "also write each fetch to DIR/<name>_<i>.npy")
        .String("trace", "FILE", "write a Chrome trace (chrome://tracing) of the step")
        .String("run_metadata", "FILE", "write RunMetadata (.pbtxt: text, else binary)")
        .String("target", "TARGET", "session target: '' (local) or grpc://host:port")
        .Repeated("device_filters", "/job:J[/task:T]",
                  "grpc:// targets: the session uses (and needs) only these tasks' devices")
        .String("signature", "KEY",
                "GRAPH is a SavedModel directory: feed and fetch this signature's input and "
                "output keys (no --fetch: every output)")
        .String("tag_set", "TAG[,TAG]", "the SavedModel's MetaGraphDef to load (default serve)")
        .String("placement_report", "FILE",
                "with --ps_tasks/--cluster: write the placement report (JSON)");
    AddPlacementFlags(*f);
    AddCredentialFlags(*f);
    return f;
  }();
  return *kFlags;
}

std::string RunUsage() {
  return absl::StrCat(
      "usage: graphrun run GRAPH(.pb|.pbtxt) --fetch NAME[:i]... [flags]\n"
      "       graphrun run SAVED_MODEL_DIR --signature=KEY [--feed KEY=...] [--fetch KEY]...\n\n"
      "Runs one step of a TensorFlow GraphDef (or of a SavedModel's signature) and\n"
      "prints the fetched tensors.\n\n"
      "flags:\n",
      RunFlagSet().Usage());
}

absl::StatusOr<std::string> CanonicalTensorName(absl::string_view name) {
  GR_ASSIGN_OR_RETURN(TensorId id, ParseTensorName(name));
  if (id.IsControl() || id.node.find(':') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a tensor name (want NAME or NAME:INDEX)"));
  }
  return absl::StrCat(id.node, ":", id.index);
}

std::string NpyFileName(absl::string_view canonical_name) {
  std::string out = absl::StrReplaceAll(canonical_name, {{"/", "__"}});
  size_t colon = out.rfind(':');
  if (colon != std::string::npos) out[colon] = '_';
  // Signature keys may hold any byte: what a file name should not (a NUL,
  // a newline, a second ':') becomes its hex code, and a name that would
  // be hidden or empty gets a leading '_'.
  std::string safe;
  for (char c : out) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') {
      safe.push_back(c);
    } else {
      absl::StrAppend(&safe, "%", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    }
  }
  if (safe.empty() || safe[0] == '.') safe.insert(0, "_");
  return safe + ".npy";
}

namespace {

absl::StatusOr<std::map<std::string, int32_t>> ParseDevices(absl::string_view spec) {
  std::map<std::string, int32_t> out;
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, '=');
    std::pair<absl::string_view, absl::string_view> kv;
    if (parts.size() == 2) kv = {parts[0], parts[1]};
    auto all_of = [](absl::string_view s, auto pred) {
      return !s.empty() && std::all_of(s.begin(), s.end(), pred);
    };
    int32_t n = 0;
    if (parts.size() != 2 ||
        !all_of(kv.first, [](char c) { return absl::ascii_isalnum(c) || c == '_'; }) ||
        !all_of(kv.second, [](char c) { return absl::ascii_isdigit(c); }) ||
        !absl::SimpleAtoi(kv.second, &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--devices: expected TYPE=N[,TYPE=N], got '", spec, "'"));
    }
    // The session's own limits, said here as a usage error.
    constexpr int32_t kMaxDevices = 1024;
    if (n > kMaxDevices || (kv.first == "CPU" && n == 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--devices: ", item, ": the count of ", kv.first, " devices must be in [",
                       kv.first == "CPU" ? 1 : 0, ", ", kMaxDevices, "]"));
    }
    if (!out.emplace(std::string(kv.first), n).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--devices: ", kv.first, " is given twice in '", spec, "'"));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<RunRequest> ParseRunArgs(absl::Span<const std::string> args) {
  GR_ASSIGN_OR_RETURN(ParsedFlags flags, RunFlagSet().Parse(args));
  RunRequest req;
  const auto& pos = flags.positional();
  if (pos.empty()) return absl::InvalidArgumentError("run: missing GRAPH file");
  if (pos.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("run: expected one GRAPH file, got extra argument '", pos[1], "'"));
  }
  req.graph_path = pos[0];

  req.signature = flags.GetString("signature", "");
  if (flags.Has("signature") && req.signature.empty()) {
    return absl::InvalidArgumentError("--signature: empty signature key");
  }
  for (absl::string_view t :
       absl::StrSplit(flags.GetString("tag_set", "serve"), ',', absl::SkipEmpty())) {
    req.tags.emplace_back(t);
  }
  // With --signature, feeds and fetches are the signature's keys, as given.
  auto canonical = [&](absl::string_view n) -> absl::StatusOr<std::string> {
    if (!req.signature.empty()) {
      if (n.empty()) return absl::InvalidArgumentError("empty signature key");
      return std::string(n);
    }
    return CanonicalTensorName(n);
  };
  for (const std::string& f : flags.GetAll("fetch")) {
    auto name = canonical(f);
    if (!name.ok()) return AnnotateStatus(name.status(), "--fetch: ");
    if (std::find(req.fetches.begin(), req.fetches.end(), *name) == req.fetches.end()) {
      req.fetches.push_back(*name);
    }
  }
  for (const std::string& t : flags.GetAll("target_node")) {
    if (t.empty() || t[0] == '^' || t.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--target_node: '", t, "' is not a node name"));
    }
    req.targets.push_back(t);
  }
  if (req.fetches.empty() && req.targets.empty() && req.signature.empty()) {
    return absl::InvalidArgumentError("run: nothing to do: give --fetch or --target_node");
  }
  for (const std::string& f : flags.GetAll("feed")) {
    size_t eq = f.find('=');
    if (eq == std::string::npos || f.substr(eq + 1) == "@" || eq + 1 == f.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--feed: expected NAME=JSON or NAME=@FILE.npy, got '", f, "'"));
    }
    auto name = canonical(f.substr(0, eq));
    if (!name.ok()) return AnnotateStatus(name.status(), "--feed: ");
    for (const auto& prev : req.feeds) {
      if (prev.first == *name) {
        return absl::InvalidArgumentError(absl::StrCat("--feed: '", *name, "' is fed twice"));
      }
    }
    req.feeds.emplace_back(*name, f.substr(eq + 1));
  }

  if (flags.Has("devices")) {
    GR_ASSIGN_OR_RETURN(req.device_count, ParseDevices(flags.GetString("devices")));
  }
  req.soft_placement = flags.GetBool("soft_placement");
  req.device_filters = flags.GetAll("device_filters");
  req.log_device_placement = flags.GetBool("log_device_placement");
  constexpr int64_t kMaxThreads = 4096;
  GR_ASSIGN_OR_RETURN(req.inter_op_threads, flags.GetInt("inter_op_threads", 0, 0, kMaxThreads));
  GR_ASSIGN_OR_RETURN(req.intra_op_threads, flags.GetInt("intra_op_threads", 0, 0, kMaxThreads));
  GR_ASSIGN_OR_RETURN(req.timeout_ms,
                      flags.GetInt("timeout_ms", 0, 0, std::numeric_limits<int64_t>::max()));
  const std::string format = flags.GetString("format", "text");
  if (format == "text") {
    req.format = OutputFormat::kText;
  } else if (format == "json") {
    req.format = OutputFormat::kJson;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--format: expected text or json, got '", format, "'"));
  }
  req.save_npy_dir = flags.GetString("save_npy");
  if (!req.save_npy_dir.empty()) {
    // Names that map to one file (a/b and a__b) would overwrite each other.
    std::map<std::string, std::string> files;
    for (const std::string& f : req.fetches) {
      auto [it, fresh] = files.emplace(NpyFileName(f), f);
      if (!fresh) {
        return absl::InvalidArgumentError(absl::StrCat("--save_npy: fetches '", it->second,
                                                       "' and '", f, "' would both be written to ",
                                                       it->first));
      }
    }
  }
  req.trace_path = flags.GetString("trace");
  req.run_metadata_path = flags.GetString("run_metadata");
  req.target = flags.GetString("target");
  req.credentials = GetCredentialArgs(flags);
  GR_ASSIGN_OR_RETURN(req.placement, ParsePlacementFlags(flags));
  // Flags that would otherwise be silently ignored.
  if (flags.Has("batch_size") && !req.placement.enabled()) {
    return absl::InvalidArgumentError(
        "--batch_size needs --ps_tasks or --cluster (it sizes the placement's traffic estimate)");
  }
  if (!req.device_filters.empty() && req.target.empty()) {
    return absl::InvalidArgumentError(
        "--device_filters needs --target (it filters a cluster's devices; a local session has "
        "no others)");
  }
  // A local run maps every task (the PS tasks and a worker) onto a CPU
  // device of its own, and a session has at most 1024.
  if (req.target.empty() && req.placement.ps_tasks > 1023) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ps_tasks: ", req.placement.ps_tasks,
                     " PS tasks do not fit a local run (at most 1023, each on a CPU device of "
                     "its own; give --target to run on a cluster)"));
  }
  req.placement_report_path = flags.GetString("placement_report");
  if (!req.placement_report_path.empty() && !req.placement.enabled()) {
    return absl::InvalidArgumentError("--placement_report needs --ps_tasks or --cluster");
  }
  return req;
}

}  // namespace tools
}  // namespace graphrun
