#include "distributed/rpc/bind_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/match.h"

namespace graphrun {
namespace distributed {
namespace {

// "host" of "host:port" ("[::1]:2222" -> "::1").
std::string HostOf(const std::string& address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return close == std::string::npos ? address : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

bool SameAddress(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  return false;
}

bool IsLocalHost(const std::string& host) {
  if (host.empty()) return false;
  if (IsLoopbackHost(host)) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  ifaddrs* ifs = nullptr;
  bool local = false;
  if (getifaddrs(&ifs) == 0) {
    for (addrinfo* r = res; r != nullptr && !local; r = r->ai_next) {
      for (ifaddrs* i = ifs; i != nullptr && !local; i = i->ifa_next) {
        local = SameAddress(r->ai_addr, i->ifa_addr);
      }
    }
    freeifaddrs(ifs);
  }
  freeaddrinfo(res);
  return local;
}

std::string ChooseBindHost(const std::string& address, const std::string& explicit_bind) {
  if (!explicit_bind.empty()) return explicit_bind;
  const std::string host = HostOf(address);
  return IsLocalHost(host) ? host : "0.0.0.0";
}

}  // namespace distributed
}  // namespace graphrun
