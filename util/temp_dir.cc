#include "util/temp_dir.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace graphrun {

std::string TempRoot() {
  const char* env = std::getenv("TMPDIR");
  std::string root = env != nullptr ? env : "";
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root.empty() || root[0] != '/') return "/tmp";
  return root;
}

absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix) {
  const std::string pattern = absl::StrCat(TempRoot(), "/", prefix, "XXXXXX");
  std::string path = pattern;
  if (mkdtemp(path.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a temporary directory ", pattern, ": ", std::strerror(errno)));
  }
  return path;
}

absl::StatusOr<std::string> MakeTempFile(absl::string_view prefix) {
  const std::string pattern = absl::StrCat(TempRoot(), "/", prefix, "XXXXXX");
  std::string path = pattern;
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create a temporary file ", pattern, ": ", std::strerror(errno)));
  }
  close(fd);
  return path;
}

}  // namespace graphrun
