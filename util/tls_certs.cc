#include "util/tls_certs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "util/openssl_errors.h"

namespace graphrun {
namespace {

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

bool IsIp(const std::string& h) {
  unsigned char buf[16];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

absl::Status CheckHost(const std::string& h) {
  if (h.empty() || h.size() > 253) {
    return absl::InvalidArgumentError(absl::StrCat("tls init: bad host name '", h, "'"));
  }
  if (IsIp(h)) return absl::OkStatus();
  for (char c : h) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls init: host '", h, "' is neither an IP address nor a DNS name"));
    }
  }
  return absl::OkStatus();
}

// Writes `contents` to `path` with `mode`, replacing any file there.
absl::Status WriteFile(const std::string& path, const std::string& contents, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  fchmod(fd, mode);
  size_t off = 0;
  while (off < contents.size()) {
    ssize_t w = write(fd, contents.data() + off, contents.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
    }
    off += static_cast<size_t>(w);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

template <typename F>
std::string ToPem(F write) {
  std::unique_ptr<BIO, decltype(&BIO_free)> b(BIO_new(BIO_s_mem()), &BIO_free);
  write(b.get());
  char* data = nullptr;
  long n = BIO_get_mem_data(b.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr || X509_add_ext(cert, ext, -1) != 1) {
    if (ext != nullptr) X509_EXTENSION_free(ext);
    return absl::InternalError(
        absl::StrCat("tls init: extension ", OBJ_nid2sn(nid), "=", value, ": ", OpenSslErrors()));
  }
  X509_EXTENSION_free(ext);
  return absl::OkStatus();
}

// A certificate for `cn` with `key`, signed by issuer/issuer_key (itself
// when issuer is null), with the extensions given.
absl::StatusOr<Cert> MakeCert(const std::string& cn, EVP_PKEY* key, X509* issuer,
                              EVP_PKEY* issuer_key, int days,
                              const std::vector<std::pair<int, std::string>>& exts) {
  Cert x(X509_new(), &X509_free);
  X509_set_version(x.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), static_cast<long>(days) * 86400);
  X509_set_pubkey(x.get(), key);
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("graphrun cluster"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : x.get();
  X509_set_issuer_name(x.get(), X509_get_subject_name(signer));
  for (const auto& [nid, value] : exts) {
    absl::Status s = AddExt(x.get(), signer, nid, value);
    if (!s.ok()) return s;
  }
  if (X509_sign(x.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return absl::InternalError(absl::StrCat("tls init: signing ", cn, ": ", OpenSslErrors()));
  }
  return x;
}

absl::StatusOr<Key> NewKey() {
  EVP_PKEY* k = EVP_EC_gen("P-256");
  if (k == nullptr) return absl::InternalError(absl::StrCat("tls init: key: ", OpenSslErrors()));
  return Key(k, &EVP_PKEY_free);
}

std::string KeyPem(EVP_PKEY* k) {
  return ToPem(
      [k](BIO* b) { PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr); });
}
std::string CertPem(X509* x) {
  return ToPem([x](BIO* b) { PEM_write_bio_X509(b, x); });
}

bool Exists(const std::string& p) { return access(p.c_str(), F_OK) == 0; }

}  // namespace

absl::Status MakeClusterCertificates(const std::string& dir, const std::vector<std::string>& hosts,
                                     int days) {
  if (hosts.empty()) return absl::InvalidArgumentError("tls init: give --hosts=H1,H2,...");
  if (days < 1 || days > 36500) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls init: --days=", days, " is not in 1..36500"));
  }
  for (const std::string& h : hosts) {
    absl::Status s = CheckHost(h);
    if (!s.ok()) return s;
  }
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::NotFoundError(
        absl::StrCat("tls init: cannot make ", dir, ": ", std::strerror(errno)));
  }
  const std::string ca_crt = dir + "/ca.crt", ca_key = dir + "/ca.key";
  Key ca_k(nullptr, &EVP_PKEY_free);
  Cert ca(nullptr, &X509_free);
  if (Exists(ca_crt) && Exists(ca_key)) {
    // Grow an existing cluster: its CA signs.
    std::unique_ptr<FILE, decltype(&fclose)> fk(fopen(ca_key.c_str(), "r"), &fclose);
    std::unique_ptr<FILE, decltype(&fclose)> fc(fopen(ca_crt.c_str(), "r"), &fclose);
    if (fk == nullptr || fc == nullptr) {
      return absl::NotFoundError(absl::StrCat("tls init: cannot read ", ca_crt, " or ", ca_key));
    }
    ca_k.reset(PEM_read_PrivateKey(fk.get(), nullptr, nullptr, nullptr));
    ca.reset(PEM_read_X509(fc.get(), nullptr, nullptr, nullptr));
    if (ca_k == nullptr || ca == nullptr || X509_check_private_key(ca.get(), ca_k.get()) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls init: ", ca_crt, " and ", ca_key,
                       " are not a certificate and its key: ", OpenSslErrors()));
    }
  } else {
    auto k = NewKey();
    if (!k.ok()) return k.status();
    ca_k = *std::move(k);
    auto c = MakeCert("graphrun cluster CA", ca_k.get(), nullptr, nullptr, days,
                      {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                       {NID_key_usage, "critical,keyCertSign,cRLSign"},
                       {NID_subject_key_identifier, "hash"}});
    if (!c.ok()) return c.status();
    ca = *std::move(c);
    absl::Status s = WriteFile(ca_key, KeyPem(ca_k.get()), 0600);
    if (!s.ok()) return s;
    if (!(s = WriteFile(ca_crt, CertPem(ca.get()), 0644)).ok()) return s;
  }
  for (const std::string& h : hosts) {
    auto k = NewKey();
    if (!k.ok()) return k.status();
    const std::string san = absl::StrCat(IsIp(h) ? "IP:" : "DNS:", h);
    auto c = MakeCert(h, k->get(), ca.get(), ca_k.get(), days,
                      {{NID_basic_constraints, "critical,CA:FALSE"},
                       {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                       {NID_ext_key_usage, "serverAuth,clientAuth"},
                       {NID_subject_key_identifier, "hash"},
                       {NID_authority_key_identifier, "keyid:always"},
                       {NID_subject_alt_name, san}});
    if (!c.ok()) return c.status();
    absl::Status s = WriteFile(dir + "/" + h + ".key", KeyPem(k->get()), 0600);
    if (!s.ok()) return s;
    if (!(s = WriteFile(dir + "/" + h + ".crt", CertPem(c->get()), 0644)).ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace graphrun
