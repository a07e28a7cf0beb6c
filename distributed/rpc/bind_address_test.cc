// Which host a task binds (bind_address.h), and a server's refusal to
// listen beyond loopback without credentials (grpc_server.cc): run on every
// machine, with the wildcard address and loopback only (no other host is
// ever contacted).
#include "distributed/rpc/bind_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "distributed/rpc/grpc_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;

// An IPv4 address of this machine other than loopback, or "".
std::string NonLoopbackAddress() {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return "";
  std::string found;
  for (ifaddrs* i = ifs; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) == nullptr) continue;
    if (!IsLoopbackHost(text)) found = text;
  }
  freeifaddrs(ifs);
  return found;
}

TEST(BindAddressTest, LoopbackAndLocalHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
    EXPECT_TRUE(IsLocalHost(h)) << h;
  }
  // 192.0.2.0/24 is reserved for documentation: no machine owns it.
  for (const char* h : {"192.0.2.1", "0.0.0.0", "10.231.0.11x", ""}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
  EXPECT_FALSE(IsLocalHost("192.0.2.1"));
  EXPECT_FALSE(IsLocalHost(""));
  const std::string mine = NonLoopbackAddress();
  if (mine.empty()) {
    std::cout << "[ SKIPPED part ] this machine has no non-loopback IPv4 address\n";
  } else {
    EXPECT_TRUE(IsLocalHost(mine)) << mine;
    EXPECT_EQ(ChooseBindHost(mine + ":2222", ""), mine);
  }
}

TEST(BindAddressTest, ChoosesTheEntrysHostTheWildcardOrTheExplicitOne) {
  EXPECT_EQ(ChooseBindHost("127.0.0.1:2222", ""), "127.0.0.1");
  EXPECT_EQ(ChooseBindHost("localhost:2222", ""), "localhost");
  EXPECT_EQ(ChooseBindHost("[::1]:2222", ""), "::1");
  // Not this machine's (a Service name or NAT address would be the same).
  EXPECT_EQ(ChooseBindHost("192.0.2.1:2222", ""), "0.0.0.0");
  // An explicit --bind wins either way.
  EXPECT_EQ(ChooseBindHost("192.0.2.1:2222", "127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(ChooseBindHost("127.0.0.1:2222", "0.0.0.0"), "0.0.0.0");
}

// A server told to bind the wildcard address without TLS or a token does
// not start (FailedPrecondition saying how to give them); with a token, or
// --insecure (which warns on stderr), it does.
// Task 0 of a one-task "worker" job whose cluster entry is `address`, on
// any free port.
ServerOptions OneWorker(const std::string& address) {
  ServerOptions so;
  so.cluster.AddTask("worker", address);
  so.job = "worker";
  so.task = 0;
  so.port = 0;
  return so;
}

TEST(BindAddressTest, BeyondLoopbackNeedsCredentialsOrInsecure) {
  auto options = [] {
    ServerOptions so = OneWorker("127.0.0.1:2222");
    so.bind_host = "0.0.0.0";
    return so;
  };
  {
    auto s = GrpcServer::Create(options());
    ASSERT_TRUE(s.ok()) << s.status();
    absl::Status st = (*s)->Start();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(std::string(st.message()),
                HasSubstr("task /job:worker/replica:0/task:0 would listen on 0.0.0.0"));
    EXPECT_THAT(std::string(st.message()), HasSubstr("--insecure"));
    EXPECT_THAT(std::string(st.message()), HasSubstr("--tls_ca"));
  }
  {
    ServerOptions so = options();
    so.auth_token = "bind-test-token";
    auto s = GrpcServer::Create(so);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::Status st = (*s)->Start();
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_GT((*s)->bound_port(), 0);
    (*s)->Stop();
  }
  {
    ServerOptions so = options();
    so.insecure = true;
    auto s = GrpcServer::Create(so);
    ASSERT_TRUE(s.ok()) << s.status();
    std::stringstream err;
    std::streambuf* old = std::cerr.rdbuf(err.rdbuf());
    absl::Status st = (*s)->Start();
    std::cerr.rdbuf(old);
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_THAT(err.str(), HasSubstr("listens on 0.0.0.0 without credentials (--insecure)"));
    (*s)->Stop();
  }
}

// Every option Create refuses is an error, never a crash of the half-made
// server's destructor (--max_message_mb=1 under the default 4 MiB receive
// chunk was a SIGSEGV).
TEST(BindAddressTest, RefusedOptionsAreErrors) {
  auto options = [] { return OneWorker("127.0.0.1:0"); };
  std::vector<std::pair<std::string, ServerOptions>> cases;
  cases.emplace_back("--job is required", options());
  cases.back().second.job = "";
  cases.emplace_back("is not in the cluster", options());
  cases.back().second.task = 3;
  cases.emplace_back("bad port", options());
  cases.back().second.port = 70000;
  cases.emplace_back("recv_chunk_bytes must be in", options());
  cases.back().second.max_message_bytes = 1 << 20;
  cases.emplace_back("thread counts", options());
  cases.back().second.inter_op_threads = -1;
  cases.emplace_back("max_sessions", options());
  cases.back().second.limits.max_sessions = 0;
  cases.emplace_back("heartbeat_interval_ms", options());
  cases.back().second.heartbeat_misses = 0;
  for (const auto& [needle, so] : cases) {
    auto s = GrpcServer::Create(so);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << needle;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(needle));
  }
}

// A port another server holds: the error says so, in one line (gRPC's own
// log lines of the failure are kept out of stderr).
TEST(BindAddressTest, PortInUseSaysWhy) {
  ServerOptions so = OneWorker("127.0.0.1:0");
  auto first = GrpcServer::Create(so);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->Start().ok());
  so.port = (*first)->bound_port();
  auto second = GrpcServer::Create(so);
  ASSERT_TRUE(second.ok()) << second.status();
  absl::Status st = (*second)->Start();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_EQ(st.message(), absl::StrCat("task /job:worker/replica:0/task:0: cannot listen on "
                                       "127.0.0.1:",
                                       so.port, ": Address already in use"));
  (*first)->Stop();
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
