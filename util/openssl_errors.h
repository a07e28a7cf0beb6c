// The calling thread's OpenSSL error queue as one line ("a; b"), cleared;
// "no detail" when empty. Shared by the TLS stream and `graphrun tls init`.
#ifndef GRAPHRUN_UTIL_OPENSSL_ERRORS_H_
#define GRAPHRUN_UTIL_OPENSSL_ERRORS_H_

#include <string>

namespace graphrun {

std::string OpenSslErrors();

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_OPENSSL_ERRORS_H_
