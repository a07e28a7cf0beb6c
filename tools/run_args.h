// The arguments of `graphrun run`, parsed and checked but not executed:
// everything here is a usage error (exit 2) when wrong. Executing a
// RunRequest (run_command.h) needs a Session; parsing does not, so it is
// tested on its own.
#ifndef GRAPHRUN_TOOLS_RUN_ARGS_H_
#define GRAPHRUN_TOOLS_RUN_ARGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tools/credential_flags.h"
#include "tools/flags.h"
#include "tools/placement_flags.h"

namespace graphrun {
namespace tools {

enum class OutputFormat { kText, kJson };

struct RunRequest {
  std::string graph_path;
  // Canonical "name:index", in command-line order, duplicates removed.
  std::vector<std::string> fetches;
  std::vector<std::string> targets;  // node names
  // (canonical "name:index", value text: JSON, or "@path.npy").
  std::vector<std::pair<std::string, std::string>> feeds;
  std::map<std::string, int32_t> device_count;  // --devices CPU=2
  bool soft_placement = false;
  std::vector<std::string> device_filters;  // ConfigProto.device_filters
  bool log_device_placement = false;
  int32_t inter_op_threads = 0;  // 0: the session's default
  int32_t intra_op_threads = 0;
  int64_t timeout_ms = 0;  // 0: no deadline
  OutputFormat format = OutputFormat::kText;
  std::string save_npy_dir;       // "" = off
  std::string trace_path;         // "" = off
  std::string run_metadata_path;  // "" = off
  std::string target;
  // grpc:// targets: the cluster token and TLS files.
  CredentialArgs credentials;
  // --ps_tasks/--cluster/--strategy/--batch_size: place the graph on PS and
  // worker tasks, each mapped onto one local CPU device (docs/cli.md).
  PlacementFlags placement;
  std::string placement_report_path;  // "" = off; JSON report
  // GRAPH is a SavedModel directory: the signature whose input and output
  // keys --feed and --fetch name ("" = feed and fetch tensor names), and
  // the MetaGraphDef's tags.
  std::string signature;
  std::vector<std::string> tags;
};

// The flags `graphrun run` accepts (for parsing and for usage text).
const FlagSet& RunFlagSet();

// "usage: graphrun run GRAPH ..." plus the flag table.
std::string RunUsage();

// Parses the arguments after "run". InvalidArgument (a usage error) for
// unknown flags, missing values, not exactly one GRAPH, neither --fetch nor
// --target_node, a --feed without '=', malformed tensor names, bad
// --devices/--format or out-of-range numbers.
absl::StatusOr<RunRequest> ParseRunArgs(absl::Span<const std::string> args);

// "name" -> "name:0"; "name:3" stays. InvalidArgument for "", "^name",
// "name:x".
absl::StatusOr<std::string> CanonicalTensorName(absl::string_view name);

// The --save_npy file name of a canonical tensor name: "a/b:1" ->
// "a__b_1.npy".
std::string NpyFileName(absl::string_view canonical_name);

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_RUN_ARGS_H_
