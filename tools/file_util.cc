#include "tools/file_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "graph/status.h"
#include "util/file_read.h"

namespace graphrun {
namespace tools {

absl::StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes) {
  return ReadFileCapped(path, max_bytes);
}

absl::Status WriteStringToFile(const std::string& path, absl::string_view data) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return FileErrnoStatus(errno, "open for writing", path);
  size_t n = data.empty() ? 0 : std::fwrite(data.data(), 1, data.size(), f);
  int err = errno;
  if (std::fclose(f) != 0 || n != data.size()) {
    return FileErrnoStatus(n != data.size() ? err : errno, "write", path);
  }
  return absl::OkStatus();
}

absl::Status CreateDirIfMissing(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(path, ": exists and is not a directory"));
  }
  if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
    return FileErrnoStatus(errno, "create directory", path);
  }
  return absl::OkStatus();
}

int FinishStdout(int exit_code, std::ostream& err) {
  std::cout.flush();
  const bool failed = std::cout.fail() || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!failed || exit_code != 0) return exit_code;
  const int e = errno;
  err << StatusToLine(absl::UnavailableError(
             absl::StrCat("cannot write the results to standard output: ", std::strerror(e))))
      << "\n";
  return 1;
}

void QuietProtobufLogs() { google::protobuf::SetLogHandler(nullptr); }

}  // namespace tools
}  // namespace graphrun
