#include "util/file_read.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace graphrun {
absl::Status FileErrnoStatus(int err, absl::string_view what, const std::string& path) {
  std::string msg = absl::StrCat(path, ": cannot ", what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case EISDIR:  // a directory where a file belongs: the caller's to fix
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<std::string> ReadFileCapped(const std::string& path, uint64_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return FileErrnoStatus(errno, "open", path);
  auto too_big = [&](const std::string& size) {
    std::fclose(f);
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": ", size, " more than the ", max_bytes, " bytes it may hold"));
  };
  struct stat st;
  if (::fstat(fileno(f), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      std::fclose(f);
      return FileErrnoStatus(EISDIR, "read", path);
    }
    if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
      return too_big(absl::StrCat(st.st_size, " bytes are"));
    }
  }
  std::string out;
  char buf[1 << 16];
  size_t n;
  try {
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
      if (out.size() + n > max_bytes) return too_big("it holds");
      out.append(buf, n);
    }
  } catch (const std::bad_alloc&) {
    std::fclose(f);
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": out of memory after reading ", out.size(), " bytes"));
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return FileErrnoStatus(err, "read", path);
  return out;
}

}  // namespace graphrun
