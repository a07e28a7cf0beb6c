#include "util/tls_credentials.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "util/file_read.h"

namespace graphrun {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& file, const char* what) {
  // PEM files of certificates and keys: a few KiB (1 MiB allows long chains).
  auto read = ReadFileCapped(file, 1 << 20);
  if (!read.ok()) {
    return absl::Status(read.status().code(),
                        absl::StrCat("the TLS ", what, " file: ", read.status().message()));
  }
  std::string pem = *std::move(read);
  if (!absl::StrContains(pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat("the TLS ", what, " file ", file, " holds no PEM block"));
  }
  return pem;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

absl::StatusOr<TlsCredentials> LoadTlsCredentials(const std::string& ca_file,
                                                  const std::string& cert_file,
                                                  const std::string& key_file) {
  TlsCredentials c;
  c.ca_file = ca_file;
  c.cert_file = cert_file;
  c.key_file = key_file;
  const char* source = "--tls_ca, --tls_cert and --tls_key";
  if (ca_file.empty() && cert_file.empty() && key_file.empty()) {
    c.ca_file = Env("GRAPHRUN_TLS_CA");
    c.cert_file = Env("GRAPHRUN_TLS_CERT");
    c.key_file = Env("GRAPHRUN_TLS_KEY");
    source = "GRAPHRUN_TLS_CA, GRAPHRUN_TLS_CERT and GRAPHRUN_TLS_KEY";
  }
  const int given = !c.ca_file.empty() + !c.cert_file.empty() + !c.key_file.empty();
  if (given == 0) return TlsCredentials();
  if (given != 3) {
    return absl::InvalidArgumentError(absl::StrCat("TLS needs all of ", source,
                                                   " (the cluster CA, this task's certificate "
                                                   "and its key; `graphrun tls init` makes them)"));
  }
  auto ca = ReadPem(c.ca_file, "CA");
  if (!ca.ok()) return ca.status();
  auto cert = ReadPem(c.cert_file, "certificate");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(c.key_file, "key");
  if (!key.ok()) return key.status();
  c.ca_pem = *std::move(ca);
  c.cert_pem = *std::move(cert);
  c.key_pem = *std::move(key);
  return c;
}

}  // namespace graphrun
