// `graphrun tls init DIR --hosts=H1,H2,...`: a cluster CA and per-host
// certificates (util/tls_certs.h, docs/security.md).
#ifndef GRAPHRUN_TOOLS_TLS_COMMAND_H_
#define GRAPHRUN_TOOLS_TLS_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/types/span.h"

namespace graphrun {
namespace tools {

// Prints the files written to `out`, one per line. Exit 2 for usage
// errors, 1 when OpenSSL or the file system fails.
int TlsCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err);
std::string TlsUsage();

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_TLS_COMMAND_H_
