// graphrun: the command-line front end. Each subcommand is one row of
// kSubcommands; `graphrun help` lists them. Exit codes: 0 success, 1
// failure, 2 usage error (docs/cli.md).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "distributed/rpc/grpc_session.h"
#include "graph/memory_budget.h"
#include "graph/status.h"
#include "tools/cluster_command.h"
#include "tools/file_util.h"
#include "tools/flags.h"
#include "tools/run_args.h"
#include "tools/run_command.h"
#include "tools/server_command.h"
#include "tools/show_command.h"
#include "tools/status_command.h"
#include "tools/tls_command.h"
#include "tools/train_command.h"

namespace graphrun {
namespace tools {
namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  // Runs with the arguments after the subcommand name; returns the exit code.
  int (*run)(absl::Span<const std::string> args, std::ostream& out, std::ostream& err);
  std::string (*usage)();
};

const Subcommand kSubcommands[] = {
    {"run", "run one step of a GraphDef and print the fetched tensors", RunCommand, RunUsage},
    {"server", "run one task of a cluster (gRPC master + worker) until SIGTERM", ServerCommand,
     ServerUsage},
    {"cluster", "start a local cluster, print its ClusterSpec, run until SIGINT", ClusterCommand,
     ClusterUsage},
    {"train", "train a model of the zoo (mlp, cnn) locally or on a local PS cluster", TrainCommand,
     TrainUsage},
    {"show", "a SavedModel's tag sets and signatures (inputs, outputs, dtypes, shapes)",
     ShowCommand, ShowUsage},
    {"status", "a running cluster's tasks, sessions, steps/s and bytes per peer", StatusCommand,
     StatusUsage},
    {"tls", "make a cluster CA and host certificates (tls init DIR --hosts=...)", TlsCommand,
     TlsUsage},
};

std::string MainUsage() {
  std::string out =
      "usage: graphrun SUBCOMMAND [args]\n"
      "       graphrun help [SUBCOMMAND]\n\n"
      "every subcommand also takes --memory_limit=SIZE (all tensors of the process; default 80%\n"
      "of physical memory) and --max_allocation_bytes=SIZE (one tensor; default half the\n"
      "limit): SIZE is bytes, 512M, 8G or a percentage of physical memory\n\n"
      "subcommands:\n";
  for (const Subcommand& c : kSubcommands) {
    absl::StrAppend(&out, "  ", c.name, std::string(10 - std::string(c.name).size(), ' '),
                    c.summary, "\n");
  }
  return out;
}

const Subcommand* FindSubcommand(const std::string& name) {
  for (const Subcommand& c : kSubcommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

int UsageError(const std::string& msg) {
  std::cerr << StatusToLine(absl::InvalidArgumentError(msg)) << "\n";
  return kExitUsage;
}

// The memory flags every subcommand takes (graph/memory_budget.h):
// --memory_limit and --max_allocation_bytes, removed from `args`. Given,
// they are also exported (GRAPHRUN_MEMORY_LIMIT,
// GRAPHRUN_MAX_ALLOCATION_BYTES) so that task processes a command starts
// have the same budget; absent, those variables are read.
absl::Status ApplyMemoryFlags(std::vector<std::string>* args) {
  struct Limit {
    const char* flag;
    const char* env;
    int64_t value = 0;
  } limits[] = {{"memory_limit", "GRAPHRUN_MEMORY_LIMIT"},
                {"max_allocation_bytes", "GRAPHRUN_MAX_ALLOCATION_BYTES"}};
  for (Limit& l : limits) {
    std::string text;
    bool given = false;
    const std::string eq = absl::StrCat("--", l.flag, "=");
    const std::string bare = absl::StrCat("--", l.flag);
    for (size_t i = 0; i < args->size();) {
      std::string& a = (*args)[i];
      if (absl::StartsWith(a, eq)) {
        text = a.substr(eq.size());
        given = true;
        args->erase(args->begin() + i);
      } else if (a == bare) {
        if (i + 1 >= args->size()) {
          return absl::InvalidArgumentError(absl::StrCat(bare, ": missing value"));
        }
        text = (*args)[i + 1];
        given = true;
        args->erase(args->begin() + i, args->begin() + i + 2);
      } else {
        ++i;
      }
    }
    if (!given) {
      const char* env = std::getenv(l.env);
      if (env == nullptr || *env == '\0') continue;
      text = env;
    }
    GR_ASSIGN_OR_RETURN(l.value, ParseMemorySize(text, l.flag));
    if (given) setenv(l.env, text.c_str(), 1);
  }
  SetMemoryLimits(limits[0].value, limits[1].value);
  return absl::OkStatus();
}

int Main(std::vector<std::string> args) {
  if (absl::Status s = ApplyMemoryFlags(&args); !s.ok())
    return UsageError(std::string(s.message()));
  if (args.empty()) {
    return UsageError("missing subcommand; run 'graphrun help' for usage");
  }
  const std::string& cmd = args[0];
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    if (args.size() == 1) {
      std::cout << MainUsage();
      return kExitOk;
    }
    const Subcommand* sub = FindSubcommand(args[1]);
    if (sub == nullptr) {
      return UsageError(absl::StrCat("unknown subcommand '", args[1], "'"));
    }
    std::cout << sub->usage();
    return kExitOk;
  }
  const Subcommand* sub = FindSubcommand(cmd);
  if (sub == nullptr) {
    return UsageError(
        absl::StrCat("unknown subcommand '", cmd, "'; run 'graphrun help' for usage"));
  }
  // Every subcommand's --help (or -h) before a "--": its usage, exit 0.
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << sub->usage();
      return kExitOk;
    }
  }
  return sub->run(absl::MakeConstSpan(args).subspan(1), std::cout, std::cerr);
}

}  // namespace
}  // namespace tools
}  // namespace graphrun

int main(int argc, char** argv) {
  // NCCL's ranks connect when they join a communicator, not at their first
  // collective (kernels/gpu/nccl_backend.cc says why). Set here, before
  // any thread runs, so that the backend's own setenv (which keeps this)
  // changes nothing another thread's getenv could be reading. The user's
  // setting wins.
  setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
  // "grpc://host:port" session targets.
  graphrun::distributed::RegisterGrpcSession();
  graphrun::tools::QuietProtobufLogs();
  return graphrun::tools::FinishStdout(
      graphrun::tools::Main(std::vector<std::string>(argv + 1, argv + argc)), std::cerr);
}
