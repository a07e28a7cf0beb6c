// Temporary directories and files go under $TMPDIR when it is absolute.
#include "util/temp_dir.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <string>

#include "gtest/gtest.h"

namespace graphrun {
namespace {

TEST(TempDirTest, HonoursAnAbsoluteTmpdir) {
  const std::string root = std::string(std::getenv("TEST_TMPDIR")) + "/scratch";
  ASSERT_EQ(mkdir(root.c_str(), 0700), 0);
  setenv("TMPDIR", (root + "//").c_str(), 1);
  EXPECT_EQ(TempRoot(), root);
  auto dir = MakeTempDir("graphrun_x_");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->rfind(root + "/graphrun_x_", 0), 0u) << *dir;
  EXPECT_EQ(dir->size(), root.size() + 1 + 11 + 6);
  struct stat st;
  ASSERT_EQ(stat(dir->c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto file = MakeTempFile("graphrun_f_");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(stat(file->c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 0);

  // Unset, empty or relative: /tmp.
  for (const char* v : {"", "relative/dir"}) {
    setenv("TMPDIR", v, 1);
    EXPECT_EQ(TempRoot(), "/tmp") << v;
  }
  unsetenv("TMPDIR");
  EXPECT_EQ(TempRoot(), "/tmp");

  // A root that does not exist: Internal naming the path.
  setenv("TMPDIR", (root + "/missing").c_str(), 1);
  auto none = MakeTempDir("graphrun_x_");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(none.status().message().find(root + "/missing/graphrun_x_XXXXXX"), std::string::npos)
      << none.status();
  unsetenv("TMPDIR");
}

}  // namespace
}  // namespace graphrun
