// TLS material of a cluster (docs/security.md): the cluster CA that signs
// every task's certificate, and this process's own certificate and key.
// Given as --tls_ca, --tls_cert and --tls_key (else the GRAPHRUN_TLS_CA,
// GRAPHRUN_TLS_CERT and GRAPHRUN_TLS_KEY environment variables): all three
// or none. With them, every gRPC connection and every data channel is
// mutual TLS.
#ifndef GRAPHRUN_UTIL_TLS_CREDENTIALS_H_
#define GRAPHRUN_UTIL_TLS_CREDENTIALS_H_

#include <string>

#include "absl/status/statusor.h"

namespace graphrun {

struct TlsCredentials {
  // PEM text.
  std::string ca_pem, cert_pem, key_pem;
  // Where they came from (for messages and for handing to child tasks).
  std::string ca_file, cert_file, key_file;
  bool enabled() const { return !cert_pem.empty(); }
};

// Reads the three files; when all three names are empty, the files the
// environment variables name; when those are unset too, no TLS (an empty
// TlsCredentials). InvalidArgument when only some are given, NotFound
// naming a file that cannot be read, InvalidArgument when a file holds no
// PEM block.
absl::StatusOr<TlsCredentials> LoadTlsCredentials(const std::string& ca_file,
                                                  const std::string& cert_file,
                                                  const std::string& key_file);

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_TLS_CREDENTIALS_H_
