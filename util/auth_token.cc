#include "util/auth_token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace graphrun {

namespace {

// Tokens travel as gRPC metadata, which takes printable ASCII only (gRPC
// aborts the process on any other byte), and within its 8 KiB of headers.
constexpr size_t kMaxTokenBytes = 4096;

}  // namespace

absl::Status CheckAuthToken(const std::string& token, const std::string& from) {
  if (token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token in ", from, " is longer than ", kMaxTokenBytes, " bytes"));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the token in ", from, " holds a byte that is not printable ASCII (at offset ", i,
          "): tokens go out as gRPC metadata; make one with `openssl rand -hex 32`"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LoadAuthToken(const std::string& file) {
  if (!file.empty()) {
    // Not a FIFO or a device that never ends, nor a directory.
    const int fd = open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      return absl::NotFoundError(
          absl::StrCat("cannot read the token file ", file, ": ", std::strerror(errno)));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat("the token file ", file, " is not a regular file"));
    }
    if (st.st_size > static_cast<off_t>(2 * kMaxTokenBytes)) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat("the token file ", file, " holds ", st.st_size,
                                                     " bytes; a token is at most ",
                                                     kMaxTokenBytes));
    }
    std::string bytes(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    close(fd);
    bytes.resize(got);
    std::string token(absl::StripAsciiWhitespace(bytes));
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the token file ", file, " is empty"));
    }
    if (absl::Status s = CheckAuthToken(token, absl::StrCat("the file ", file)); !s.ok()) return s;
    return token;
  }
  const char* env = std::getenv("GRAPHRUN_AUTH_TOKEN");
  if (env == nullptr) return std::string();
  std::string token(absl::StripAsciiWhitespace(env));
  if (absl::Status s = CheckAuthToken(token, "GRAPHRUN_AUTH_TOKEN"); !s.ok()) return s;
  return token;
}

std::string NewRandomToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::abort();  // no kernel randomness: nothing safe to do
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

absl::Status WriteTokenFile(const std::string& path, const std::string& token) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST)
      return absl::AlreadyExistsError(absl::StrCat("token file ", path, " exists"));
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  std::string line = token + "\n";
  bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace graphrun
