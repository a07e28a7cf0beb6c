// Reads a whole file the user named, bounded: a file larger than the
// caller allows, a pipe or a device that never ends (/dev/zero) is an
// error naming the path, never an exhausted memory or an abort.
#ifndef GRAPHRUN_UTIL_FILE_READ_H_
#define GRAPHRUN_UTIL_FILE_READ_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace graphrun {

// NotFound (no such file), PermissionDenied, FailedPrecondition (a
// directory), Internal (other I/O errors), each "PATH: cannot open: why";
// ResourceExhausted when the file holds more than `max_bytes` (a regular
// file's size is checked before reading; anything else is read no
// further) or memory runs out.
absl::StatusOr<std::string> ReadFileCapped(const std::string& path, uint64_t max_bytes);

// "PATH: cannot WHAT: strerror" as NotFound (ENOENT, ENOTDIR),
// PermissionDenied (EACCES, EPERM, EROFS), FailedPrecondition (EISDIR) or
// Internal.
absl::Status FileErrnoStatus(int err, absl::string_view what, const std::string& path);

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_FILE_READ_H_
