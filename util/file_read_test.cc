// ReadFileCapped: files the user names are read with a bound.
#include "util/file_read.h"

#include <stdlib.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

TEST(FileReadTest, ReadsWithinTheBoundAndRefusesBeyondIt) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/f";
  std::ofstream(path, std::ios::binary) << std::string(1000, 'x');
  auto whole = ReadFileCapped(path, 1000);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, std::string(1000, 'x'));
  auto over = ReadFileCapped(path, 999);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(), path + ": 1000 bytes are more than the 999 bytes it may hold");
}

// A device that never ends is read no further than the bound.
TEST(FileReadTest, EndlessDevicesStopAtTheBound) {
  auto zero = ReadFileCapped("/dev/zero", 1 << 20);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(zero.status().message(), "/dev/zero: it holds more than the 1048576 bytes it may hold");
}

TEST(FileReadTest, MissingFilesAndDirectories) {
  auto missing = ReadFileCapped("/no/such/file", 10);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/no/such/file: cannot open"));
  auto dir = ReadFileCapped(std::getenv("TEST_TMPDIR"), 10);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition) << dir.status();
}

}  // namespace
}  // namespace graphrun
