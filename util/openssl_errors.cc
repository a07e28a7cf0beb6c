#include "util/openssl_errors.h"

#include <openssl/err.h>

namespace graphrun {

std::string OpenSslErrors() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail" : out;
}

}  // namespace graphrun
