// The cluster token (docs/distributed.md "Across hosts"): what
// --auth_token_file names, else GRAPHRUN_AUTH_TOKEN.
#ifndef GRAPHRUN_UTIL_AUTH_TOKEN_H_
#define GRAPHRUN_UTIL_AUTH_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"

namespace graphrun {

// The file's contents (surrounding whitespace removed) when `file` is not
// empty, else the GRAPHRUN_AUTH_TOKEN environment variable's, else "".
// NotFound or InvalidArgument (an empty file) naming the file.
absl::StatusOr<std::string> LoadAuthToken(const std::string& file);

// OK for a token gRPC metadata can carry: printable ASCII, at most 4096
// bytes. Else InvalidArgument naming `from` (a file, a variable), never
// the token.
absl::Status CheckAuthToken(const std::string& token, const std::string& from);

// A fresh token for one run of a local cluster: 32 random bytes (the
// kernel's getrandom), as 64 hex digits.
std::string NewRandomToken();

// Writes `token` to a new file `path` readable by the user only (0600).
// AlreadyExists or Internal naming the path.
absl::Status WriteTokenFile(const std::string& path, const std::string& token);

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_AUTH_TOKEN_H_
