// Checkpoint writes are atomic: a process saving 16 MiB checkpoints in a
// loop is killed (SIGKILL) at random moments, again and again. After every
// kill the newest checkpoint in the directory restores, whole and
// consistent (every element of w and the step agree with the checkpoint's
// step), and so does every checkpoint the state file lists; a half-written
// one is never visible.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "client/loop/saver.h"
#include "client/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace graphrun {
namespace client {
namespace {

constexpr int64_t kElements = int64_t{4} << 20;

std::string Helper() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/client/loop/saver_crash_helper";
}

int64_t LatestStep(const std::string& dir) {
  auto latest = Saver::LatestCheckpoint(dir);
  return latest.ok() ? Saver::StepOfPrefix(*latest) : -1;
}

TEST(SaverCrashTest, KilledMidSaveLeavesTheLastCheckpointWhole) {
  std::string base = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string dir = base + "/saver_crash_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  // The graph the helper saves, to restore into here.
  Scope root = Scope::NewRootScope();
  Variable w(root.WithOpName("w"), PartialShape({kElements}), DT_FLOAT);
  Variable step(root.WithOpName("step"), PartialShape({}), DT_INT64);
  auto saver = Saver::Create(root, {w, step});
  ASSERT_TRUE(saver.ok()) << saver.status();
  Output first = ops::Slice(root, w.Read(), {int64_t{0}}, {int64_t{1}});
  Output last = ops::Slice(root, w.Read(), {kElements - 1}, {int64_t{1}});
  Output sum = ops::Sum(root, w.Read(), {0});
  ASSERT_TRUE(root.ok()) << root.status();

  std::mt19937 rng(7);
  int64_t next = 1;
  int verified = 0;
  for (int round = 0; round < 6; ++round) {
    const std::string start = std::to_string(next);
    char* argv[] = {const_cast<char*>("saver_crash_helper"), dir.data(),
                    const_cast<char*>(start.c_str()), nullptr};
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, Helper().c_str(), nullptr, nullptr, argv, environ), 0);
    // Let it save at least once past the last round's, then kill it at a
    // random moment (most likely inside a save: that is most of its time).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (LatestStep(dir) < next && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GE(LatestStep(dir), next) << "the helper saved nothing in 120 s";
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 150));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));

    auto latest = Saver::LatestCheckpoint(dir);
    ASSERT_TRUE(latest.ok()) << latest.status();
    const int64_t s = Saver::StepOfPrefix(*latest);
    ASSERT_GE(s, next);
    ClientSession session(root);
    ASSERT_TRUE(saver->Restore(session, *latest).ok()) << *latest;
    auto r = session.Run({first, last, sum, step.Read()});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].base<float>()[0], static_cast<float>(s));
    EXPECT_EQ((*r)[1].base<float>()[0], static_cast<float>(s));
    EXPECT_EQ((*r)[2].scalar<float>(), static_cast<float>(s) * kElements);
    EXPECT_EQ((*r)[3].scalar<int64_t>(), s);
    ++verified;
    next = s + 1;
  }
  EXPECT_EQ(verified, 6);
  std::cout << "saver crash: 6 kills, last checkpoint step " << next - 1 << ", all whole\n";
}

}  // namespace
}  // namespace client
}  // namespace graphrun
