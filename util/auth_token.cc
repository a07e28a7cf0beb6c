#include "util/auth_token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace graphrun {

absl::StatusOr<std::string> LoadAuthToken(const std::string& file) {
  if (!file.empty()) {
    std::ifstream f(file, std::ios::binary);
    if (!f) return absl::NotFoundError(absl::StrCat("cannot read the token file ", file));
    std::stringstream ss;
    ss << f.rdbuf();
    std::string token(absl::StripAsciiWhitespace(ss.str()));
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the token file ", file, " is empty"));
    }
    return token;
  }
  const char* env = std::getenv("GRAPHRUN_AUTH_TOKEN");
  return env == nullptr ? std::string() : std::string(absl::StripAsciiWhitespace(env));
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
