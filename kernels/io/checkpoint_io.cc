// File access of the checkpoint bundle format (declared in
// checkpoint_internal.h): atomic writes via tempstate files, whole-file
// reads, paths and directories.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "graph/memory_budget.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_internal.h"

namespace graphrun {
namespace checkpoint {

// ---------------------------------------------------------------------------
// Files. Every OS call of the format goes through these helpers.

absl::Status IoError(absl::string_view what, const std::string& path, int err) {
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

std::string Dirname(absl::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (dir.empty() || absl::StartsWith(name, "/")) return std::string(name);
  return absl::StrCat(absl::StripSuffix(dir, "/"), "/", name);
}

absl::Status RecursivelyCreateDir(const std::string& dir) {
  if (dir.empty() || dir == "." || dir == "/") return absl::OkStatus();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a directory"));
  }
  GR_RETURN_IF_ERROR(RecursivelyCreateDir(Dirname(dir)));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return IoError("cannot create directory", dir, errno);
  }
  return absl::OkStatus();
}

std::string TempFilename(const std::string& path) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^
                                          (static_cast<uint64_t>(::getpid()) << 32));
  return absl::StrCat(path, kTempMarker, absl::Hex(rng(), absl::kZeroPad16));
}

absl::Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot write", path, errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& dir) {
  ScopedFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY));
  if (fd.get() < 0) return IoError("cannot open directory", dir, errno);
  if (::fsync(fd.get()) != 0 && errno != EINVAL) {
    return IoError("cannot fsync directory", dir, errno);
  }
  return absl::OkStatus();
}

// fsync + close `fd` (written at `tmp`), then renames tmp over `path`.
// Removes `tmp` on failure.
absl::Status CommitTempFile(int fd, const std::string& tmp, const std::string& path) {
  absl::Status s;
  if (::fsync(fd) != 0) s = IoError("cannot fsync", tmp, errno);
  if (::close(fd) != 0 && s.ok()) s = IoError("cannot close", tmp, errno);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = IoError(absl::StrCat("cannot rename ", tmp, " to"), path, errno);
  }
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

// Writes `contents` to `path` so that readers see the old file or the new
// one, never a part: tempstate file, fsync, rename, fsync the directory.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  std::string tmp = TempFilename(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create", tmp, errno);
  absl::Status s = WriteAll(fd, contents.data(), contents.size(), tmp);
  if (!s.ok()) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  GR_RETURN_IF_ERROR(CommitTempFile(fd, tmp, path));
  return FsyncDir(Dirname(path));
}

absl::Status CheckRegularFile(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoError("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint file ", path, " is not a regular file"));
  }
  const int64_t cap = GetMemoryLimits().max_allocation_bytes;
  if (st.st_size > cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "checkpoint file ", path, " holds ", HumanBytes(st.st_size),
        ", over the per-allocation cap of ", HumanBytes(cap), " (--max_allocation_bytes)"));
  }
  return absl::OkStatus();
}

// NotFound when `path` does not exist.
absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  // Non-blocking: a FIFO in a checkpoint's place must not hang the step.
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return IoError("cannot open", path, errno);
  GR_RETURN_IF_ERROR(CheckRegularFile(fd.get(), path));
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t r = ::read(fd.get(), buf, sizeof(buf));
    if (r < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot read", path, errno);
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace checkpoint
}  // namespace graphrun
