#include "tools/credential_flags.h"

#include "graph/status.h"
#include "util/auth_token.h"

namespace graphrun {
namespace tools {

void AddCredentialFlags(FlagSet& f) {
  f.String("auth_token_file", "FILE",
           "the cluster token: every call carries it, servers check it (else "
           "GRAPHRUN_AUTH_TOKEN)")
      .String("tls_ca", "FILE", "mutual TLS: the cluster CA (else GRAPHRUN_TLS_CA)")
      .String("tls_cert", "FILE", "mutual TLS: this host's certificate (else GRAPHRUN_TLS_CERT)")
      .String("tls_key", "FILE", "mutual TLS: its key (else GRAPHRUN_TLS_KEY)");
}

CredentialArgs GetCredentialArgs(const ParsedFlags& flags) {
  CredentialArgs a;
  a.auth_token_file = flags.GetString("auth_token_file");
  a.tls_ca = flags.GetString("tls_ca");
  a.tls_cert = flags.GetString("tls_cert");
  a.tls_key = flags.GetString("tls_key");
  return a;
}

std::vector<std::string> CredentialArgs::ToFlags() const {
  std::vector<std::string> f;
  if (!auth_token_file.empty()) f.push_back("--auth_token_file=" + auth_token_file);
  if (!tls_ca.empty()) f.push_back("--tls_ca=" + tls_ca);
  if (!tls_cert.empty()) f.push_back("--tls_cert=" + tls_cert);
  if (!tls_key.empty()) f.push_back("--tls_key=" + tls_key);
  return f;
}

absl::StatusOr<Credentials> LoadCredentials(const CredentialArgs& args) {
  Credentials c;
  GR_ASSIGN_OR_RETURN(c.auth_token, LoadAuthToken(args.auth_token_file));
  GR_ASSIGN_OR_RETURN(c.tls, LoadTlsCredentials(args.tls_ca, args.tls_cert, args.tls_key));
  return c;
}

}  // namespace tools
}  // namespace graphrun
