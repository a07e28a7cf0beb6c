// `graphrun tls init`: a cluster CA and one certificate per host, made with
// OpenSSL (docs/security.md).
//
//   DIR/ca.crt             the cluster CA (give it to every task: --tls_ca)
//   DIR/ca.key             its key (0600; kept so hosts can be added later)
//   DIR/<host>.crt, .key   a host's certificate and key (0600): --tls_cert,
//                          --tls_key of every task on that host, and of
//                          clients there
//
// Keys are ECDSA P-256. A host certificate names its host as a
// subjectAltName (IP for an address, DNS otherwise), which peers verify,
// and is good for both ends of a connection (serverAuth and clientAuth).
// When DIR already holds ca.crt and ca.key, they sign the new hosts'
// certificates, so a cluster can grow.
#ifndef GRAPHRUN_UTIL_TLS_CERTS_H_
#define GRAPHRUN_UTIL_TLS_CERTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace graphrun {

// InvalidArgument naming a bad host name or `days`; Internal/NotFound with
// OpenSSL's or the file system's reason.
absl::Status MakeClusterCertificates(const std::string& dir, const std::vector<std::string>& hosts,
                                     int days);

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_TLS_CERTS_H_
