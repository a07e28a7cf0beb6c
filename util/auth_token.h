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

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_AUTH_TOKEN_H_
