// Which address a task listens on. A task advertises the address its
// cluster entry names; it binds that host when the host is an address of
// this machine (127.0.0.1, a namespace's 10.231.0.11, a hostname that
// resolves to one of them), and the wildcard address otherwise (a
// Kubernetes Service name, a NAT address: the name reaches the machine,
// the machine does not own it). An explicit bind host always wins.
#ifndef GRAPHRUN_DISTRIBUTED_RPC_BIND_ADDRESS_H_
#define GRAPHRUN_DISTRIBUTED_RPC_BIND_ADDRESS_H_

#include <string>

namespace graphrun {
namespace distributed {

// True when `host` (an IP or a name) resolves to an address assigned to an
// interface of this machine (loopback included).
bool IsLocalHost(const std::string& host);
// True for loopback hosts: 127.0.0.0/8, ::1, "localhost".
bool IsLoopbackHost(const std::string& host);
// The host to listen on for a task whose cluster entry is `address`
// ("host:port"): `explicit_bind` when not empty, else the entry's host if
// it is local, else "0.0.0.0".
std::string ChooseBindHost(const std::string& address, const std::string& explicit_bind);

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_BIND_ADDRESS_H_
