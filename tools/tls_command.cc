#include "tools/tls_command.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "graph/status.h"
#include "tools/flags.h"
#include "util/tls_certs.h"

namespace graphrun {
namespace tools {
namespace {

const FlagSet& TlsFlagSet() {
  static const FlagSet* const kFlags = [] {
    auto* f = new FlagSet();
    f->String("hosts", "H1,H2,...",
              "hosts to make certificates for: IP addresses or DNS names, as the cluster "
              "spec names them (required)")
        .String("days", "N", "validity in days (default 365)");
    return f;
  }();
  return *kFlags;
}

}  // namespace

std::string TlsUsage() {
  return absl::StrCat(
      "usage: graphrun tls init DIR --hosts=H1,H2,... [--days=N]\n\n"
      "Makes a cluster CA (DIR/ca.crt, DIR/ca.key) and for each host a certificate\n"
      "naming it (DIR/HOST.crt, DIR/HOST.key), for --tls_ca, --tls_cert and --tls_key.\n"
      "Keys are written readable by the user only. When DIR already holds ca.crt and\n"
      "ca.key, they sign the new certificates.\n\nflags:\n",
      TlsFlagSet().Usage());
}

int TlsCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  auto usage = [&](const std::string& msg) {
    err << StatusToLine(absl::InvalidArgumentError(msg)) << "\n";
    return kExitUsage;
  };
  auto flags = TlsFlagSet().Parse(args);
  if (!flags.ok()) {
    err << StatusToLine(flags.status()) << "\n";
    return kExitUsage;
  }
  const auto& pos = flags->positional();
  if (pos.size() != 2 || pos[0] != "init")
    return usage("tls: usage: graphrun tls init DIR --hosts=H1,H2,...");
  if (!flags->Has("hosts")) return usage("tls init: give --hosts=H1,H2,...");
  std::vector<std::string> hosts =
      absl::StrSplit(flags->GetString("hosts"), ',', absl::SkipWhitespace());
  auto days = flags->GetInt("days", 365, 1, 36500);
  if (!days.ok()) {
    err << StatusToLine(days.status()) << "\n";
    return kExitUsage;
  }
  absl::Status s = MakeClusterCertificates(pos[1], hosts, static_cast<int>(*days));
  if (!s.ok()) {
    err << StatusToLine(s) << "\n";
    return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  out << pos[1] << "/ca.crt\n";
  for (const std::string& h : hosts) out << pos[1] << "/" << h << ".crt\n";
  return kExitOk;
}

}  // namespace tools
}  // namespace graphrun
