// FileAccessPolicy: paths under the allowed directories pass; "..", links
// out of them, look-alike prefixes and everything under an empty policy
// are PermissionDenied naming the path.
#include "kernels/framework/file_access.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

class FileAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/file_access";
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ + "/ok/sub");
    std::filesystem::create_directories(root_ + "/okay");
    std::filesystem::create_directories(root_ + "/secret");
    std::filesystem::create_symlink(root_ + "/secret", root_ + "/ok/link_out");
    auto p = FileAccessPolicy::Confined({root_ + "/ok/"});
    ASSERT_TRUE(p.ok()) << p.status();
    policy_ = *p;
  }
  std::string root_;
  std::shared_ptr<const FileAccessPolicy> policy_;
};

TEST_F(FileAccessTest, UnderTheAllowedDirectoryPasses) {
  EXPECT_TRUE(policy_->Check(root_ + "/ok").ok());
  EXPECT_TRUE(policy_->Check(root_ + "/ok/model.ckpt-100").ok());
  EXPECT_TRUE(policy_->Check(root_ + "/ok/sub/../model.ckpt").ok());
  EXPECT_TRUE(policy_->Check(root_ + "/ok/new_dir/part-0").ok());  // not there yet
}

TEST_F(FileAccessTest, EscapesArePermissionDenied) {
  for (const std::string& p :
       {root_ + "/secret/x", root_ + "/ok/../secret/x", root_ + "/ok/link_out/x", root_ + "/okay/x",
        std::string("/etc/passwd"), std::string("")}) {
    absl::Status s = policy_->Check(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << p;
    EXPECT_THAT(std::string(s.message()), HasSubstr("'" + p + "'"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("--allowed_dirs"));
  }
}

TEST_F(FileAccessTest, RelativePathsResolveAgainstTheWorkingDirectory) {
  const std::string cwd = std::filesystem::current_path().string();
  ASSERT_EQ(chdir((root_ + "/ok").c_str()), 0);
  EXPECT_TRUE(policy_->Check("model.ckpt").ok());
  EXPECT_EQ(policy_->Check("../secret/x").code(), absl::StatusCode::kPermissionDenied);
  ASSERT_EQ(chdir(cwd.c_str()), 0);
}

TEST(FileAccessPolicyTest, NoDirectoriesMeansNoFile) {
  auto p = FileAccessPolicy::Confined({});
  ASSERT_TRUE(p.ok());
  absl::Status s = (*p)->Check("/tmp/x");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("touches no file"));
  EXPECT_EQ(FileAccessPolicy::Confined({""}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace graphrun
