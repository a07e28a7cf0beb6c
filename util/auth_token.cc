#include "util/auth_token.h"

#include <cstdlib>
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

}  // namespace graphrun
