// Whole-file reads and writes for the CLI tools. Errors name the path.
#ifndef GRAPHRUN_TOOLS_FILE_UTIL_H_
#define GRAPHRUN_TOOLS_FILE_UTIL_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace graphrun {
namespace tools {

// The largest file a protobuf parser takes (2 GiB - 1).
inline constexpr uint64_t kMaxProtoFileBytes = (uint64_t{1} << 31) - 1;

// NotFound if the file does not exist, PermissionDenied if it may not be
// read, Internal for other I/O errors; ResourceExhausted naming the path
// when it holds more than `max_bytes` (a pipe or a device such as
// /dev/zero is read no further).
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             uint64_t max_bytes = kMaxProtoFileBytes);

// Creates or truncates `path`. NotFound (missing directory),
// PermissionDenied or Internal, with the path and strerror text.
absl::Status WriteStringToFile(const std::string& path, absl::string_view data);

// Creates directory `path` (one level) unless it already exists as a
// directory.
absl::Status CreateDirIfMissing(const std::string& path);

// A tool's exit: flushes standard output; when that failed (a full disk, a
// closed pipe) an exit code of 0 becomes 1, with the error on `err`.
int FinishStdout(int exit_code, std::ostream& err);

// libprotobuf's own log lines (invalid UTF-8 in a string field, ...) are
// dropped: a tool's error is the one `Code: message` line it prints.
void QuietProtobufLogs();

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_FILE_UTIL_H_
