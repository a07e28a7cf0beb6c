// The credential flags every command that starts a server or talks to one
// takes (server, cluster, train, run --target): --auth_token_file,
// --tls_ca, --tls_cert, --tls_key (docs/security.md).
#ifndef GRAPHRUN_TOOLS_CREDENTIAL_FLAGS_H_
#define GRAPHRUN_TOOLS_CREDENTIAL_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/flags.h"
#include "util/tls_credentials.h"

namespace graphrun {
namespace tools {

struct CredentialArgs {
  std::string auth_token_file;            // "": GRAPHRUN_AUTH_TOKEN
  std::string tls_ca, tls_cert, tls_key;  // "": GRAPHRUN_TLS_*
  // The flags again, for a child process (file names only: no secret
  // appears on a command line).
  std::vector<std::string> ToFlags() const;
};

void AddCredentialFlags(FlagSet& f);
CredentialArgs GetCredentialArgs(const ParsedFlags& flags);

struct Credentials {
  std::string auth_token;
  TlsCredentials tls;
};
// Reads the token and TLS files (or the environment). NotFound or
// InvalidArgument naming the file or the missing flag.
absl::StatusOr<Credentials> LoadCredentials(const CredentialArgs& args);

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_CREDENTIAL_FLAGS_H_
