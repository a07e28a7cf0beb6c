// Tokens are read from regular files of bounded size and must be printable
// ASCII (gRPC metadata); the errors never show the token.
#include "util/auth_token.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(AuthTokenTest, ReadsAPrintableToken) {
  auto t = LoadAuthToken(Write("good", "  s3cret-token with space \n"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "s3cret-token with space");
  setenv("GRAPHRUN_AUTH_TOKEN", " from-env\n", 1);
  auto e = LoadAuthToken("");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(*e, "from-env");
  unsetenv("GRAPHRUN_AUTH_TOKEN");
  EXPECT_EQ(*LoadAuthToken(""), "");
}

TEST(AuthTokenTest, RefusesWhatGrpcCannotCarry) {
  // UTF-8, a tab inside, binary: gRPC aborted the process on such metadata
  // (and printed the token in its log line).
  for (const std::string& bad :
       {std::string("geheim-schl\xc3\xbcssel"), std::string("a\tb"), std::string("x\x01y", 3)}) {
    auto t = LoadAuthToken(Write("bad", bad));
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("not printable ASCII"));
    EXPECT_THAT(std::string(t.status().message()), Not(HasSubstr("geheim")));
  }
  setenv("GRAPHRUN_AUTH_TOKEN", "geheim-schl\xc3\xbcssel", 1);
  auto e = LoadAuthToken("");
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("GRAPHRUN_AUTH_TOKEN"));
  unsetenv("GRAPHRUN_AUTH_TOKEN");

  auto long_token = LoadAuthToken(Write("long", std::string(5000, 'a')));
  EXPECT_EQ(long_token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(long_token.status().message()), HasSubstr("longer than 4096 bytes"));
  auto huge = LoadAuthToken(Write("huge", std::string(1 << 20, 'a')));
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("holds 1048576 bytes"));
}

TEST(AuthTokenTest, RefusesFilesThatAreNotRegular) {
  // /dev/zero never ends; a FIFO with no writer would block; a directory.
  const std::string fifo = std::string(std::getenv("TEST_TMPDIR")) + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& f :
       {std::string("/dev/zero"), fifo, std::string(getenv("TEST_TMPDIR"))}) {
    auto t = LoadAuthToken(f);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << f;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("is not a regular file")) << f;
  }
  EXPECT_EQ(LoadAuthToken("/no/such/token").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace graphrun
