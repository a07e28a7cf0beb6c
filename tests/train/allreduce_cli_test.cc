// `graphrun train` with the all-reduce distributions on TEST_ACCEL devices
// and with several replicas per worker, through the built binary (Fashion-
// MNIST, 30 steps each). Left out of the sanitizer run as the other
// training tests are: each trains several models.
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cli_testlib.h"

namespace graphrun {
namespace tools {
namespace {

using ::testing::HasSubstr;

// MirroredStrategy over two TEST_ACCEL devices through `graphrun train`:
// the replicas' all-reduce stages their data through the host, and the
// run learns. Without the devices: an error naming the type.
TEST(AllReduceCliTest, TestAccelMirroredTraining) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "no dataset-fashion-mnist";
  }
  const std::vector<std::string> train = {"train",
                                          "--distribution=mirrored",
                                          "--num_replicas=2",
                                          "--replica_device_type=TEST_ACCEL",
                                          "--steps=30",
                                          "--batch_size=64",
                                          "--checkpoint_dir=" + TempPath("mirrored_accel")};
  setenv("GRAPHRUN_TEST_ACCEL_DEVICES", "2", 1);
  Result r = Graphrun(train);
  unsetenv("GRAPHRUN_TEST_ACCEL_DEVICES");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string all = r.out + r.err;
  EXPECT_THAT(all, HasSubstr("mirrored over 2 replicas (one process, TEST_ACCEL devices 0..1)"));
  EXPECT_THAT(all, HasSubstr("all-reduce: 6 gradients in 1 pack (1.0 MiB) over 2 replicas, shared "
                             "memory (TEST_ACCEL through the host)"));
  EXPECT_THAT(all, HasSubstr("\"global_step\": 30,"));
  EXPECT_THAT(all, HasSubstr("\"replicas\": 2,"));

  std::vector<std::string> cpu_only = train;
  cpu_only.back() += "_none";
  Result none = Graphrun(cpu_only);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("InvalidArgument: device count asks for 2 TEST_ACCEL device(s), "
                                  "but this build has no TEST_ACCEL device type"));
}

// MultiWorkerMirroredStrategy with each worker's replica on its
// TEST_ACCEL device, through `graphrun train` (one process per worker, the
// device type inherited through the environment): the ring all-reduce
// between the processes stages each replica's data through its host, and
// the run learns.
TEST(AllReduceCliTest, TestAccelMultiWorkerTraining) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "no dataset-fashion-mnist";
  }
  const std::vector<std::string> train = {"train",
                                          "--distribution=multi_worker_mirrored",
                                          "--workers=2",
                                          "--replica_device_type=TEST_ACCEL",
                                          "--steps=30",
                                          "--batch_size=64",
                                          "--checkpoint_dir=" + TempPath("multi_worker_accel")};
  setenv("GRAPHRUN_TEST_ACCEL_DEVICES", "1", 1);
  Result r = Graphrun(train);
  unsetenv("GRAPHRUN_TEST_ACCEL_DEVICES");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string all = r.out + r.err;
  EXPECT_THAT(all, HasSubstr("all-reduce: 6 gradients in 1 pack (1.0 MiB) over 2 replicas, ring "
                             "(TEST_ACCEL through the host)"));
  EXPECT_THAT(all, HasSubstr("\"global_step\": 30,"));
  EXPECT_THAT(all, HasSubstr("\"replicas\": 2,"));
  // The same run on the workers' CPUs: the same losses (the accelerator
  // computes as the CPU does, and its data meets the other's exactly).
  std::vector<std::string> cpu = train;
  cpu[3] = "--replica_device_type=CPU";
  cpu.back() += "_cpu";
  Result c = Graphrun(cpu);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto loss = [](const std::string& out) {
    std::smatch m;
    return std::regex_search(out, m, std::regex(R"re("last_loss": ([0-9.e-]+))re")) ? m[1].str()
                                                                                    : "none";
  };
  EXPECT_NE(loss(r.out), "none") << r.out;
  EXPECT_EQ(loss(r.out), loss(c.out));
}

// Several replicas per worker (TensorFlow's strategy takes every GPU of a
// worker): 2 workers x 2 replicas split each worker's batch between its
// devices, and every replica's gradients meet in one group of 4. The mean
// over the same rows as 2 workers x 1 replica: the same losses, to float
// rounding. On TEST_ACCEL devices, 2 per worker by default (one replica
// per device of the type), the same bytes as on the workers' CPUs.
TEST(AllReduceCliTest, MultiWorkerReplicasPerWorker) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "no dataset-fashion-mnist";
  }
  auto run = [](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"train",           "--distribution=multi_worker_mirrored",
                                     "--workers=2",     "--steps=30",
                                     "--batch_size=64", "--checkpoint_dir=" + TempPath(name)};
    args.insert(args.end(), extra.begin(), extra.end());
    return Graphrun(args);
  };
  auto number = [](const std::string& out, const std::string& key) {
    std::smatch m;
    return std::regex_search(out, m, std::regex("\"" + key + "\": ([0-9.e-]+)")) ? m[1].str()
                                                                                 : "none";
  };
  Result two = run("mw_per_worker_2", {"--num_replicas=2"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const std::string all = two.out + two.err;
  EXPECT_THAT(all, HasSubstr("2 workers (one process each, 2 CPU replicas each)"));
  EXPECT_THAT(all, HasSubstr("multi_worker_mirrored: /job:worker/replica:0/task:0 builds 2 CPU "
                             "replicas of 4 (2 workers)"));
  EXPECT_THAT(all, HasSubstr("all-reduce: 6 gradients in 1 pack (1.0 MiB) over 4 replicas, ring"));
  EXPECT_EQ(number(two.out, "replicas"), "4");
  EXPECT_EQ(number(two.out, "workers"), "2");
  EXPECT_EQ(number(two.out, "global_step"), "30");
  Result one = run("mw_per_worker_1", {});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(number(one.out, "replicas"), "2");
  ASSERT_NE(number(two.out, "last_loss"), "none") << two.out;
  ASSERT_NE(number(one.out, "last_loss"), "none") << one.out;
  EXPECT_NEAR(std::stod(number(two.out, "last_loss")), std::stod(number(one.out, "last_loss")),
              1e-5);
  EXPECT_NEAR(std::stod(number(two.out, "test_accuracy")),
              std::stod(number(one.out, "test_accuracy")), 1e-3);
  setenv("GRAPHRUN_TEST_ACCEL_DEVICES", "2", 1);
  Result accel = run("mw_per_worker_accel", {"--replica_device_type=TEST_ACCEL"});
  unsetenv("GRAPHRUN_TEST_ACCEL_DEVICES");
  ASSERT_EQ(accel.exit_code, 0) << accel.err;
  EXPECT_EQ(number(accel.out, "replicas"), "4");
  EXPECT_EQ(number(accel.out, "last_loss"), number(two.out, "last_loss"));
  // More replicas than the worker has devices: soft placement would put
  // two on one device and the group would never fill. Refused at once.
  setenv("GRAPHRUN_TEST_ACCEL_DEVICES", "1", 1);
  Result over = run("mw_per_worker_over", {"--replica_device_type=TEST_ACCEL", "--num_replicas=2"});
  unsetenv("GRAPHRUN_TEST_ACCEL_DEVICES");
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_THAT(over.err, HasSubstr("InvalidArgument: --num_replicas=2: task "
                                  "/job:worker/replica:0/task:0 has 1 TEST_ACCEL device(s); "
                                  "multi_worker_mirrored puts one replica on each"));
}

// The embedded cluster gives each multi_worker_mirrored worker GPUs of its
// own, as a TF_CONFIG user sets each worker's CUDA_VISIBLE_DEVICES (NCCL
// takes one GPU per rank): the host's GPUs, or CUDA_VISIBLE_DEVICES's,
// split evenly. Without GPUs here the replicas run on the CPUs (soft
// placement), so the run still trains; the split itself is what the
// launcher reports and hands its workers.
TEST(AllReduceCliTest, EmbeddedWorkersGetGpusOfTheirOwn) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "no dataset-fashion-mnist";
  }
  auto run = [](const std::string& visible, const std::string& name,
                std::vector<std::string> extra) {
    std::vector<std::string> args = {"train",
                                     "--distribution=multi_worker_mirrored",
                                     "--workers=2",
                                     "--replica_device_type=GPU",
                                     "--steps=10",
                                     "--batch_size=64",
                                     "--checkpoint_dir=" + TempPath(name)};
    args.insert(args.end(), extra.begin(), extra.end());
    setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
    Result r = Graphrun(args);
    unsetenv("CUDA_VISIBLE_DEVICES");
    return r;
  };
  Result two = run("0,1", "gpu_split_two", {});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_THAT(two.out + two.err,
              HasSubstr("multi_worker_mirrored: 2 GPU(s) for 2 workers: worker 0 "
                        "CUDA_VISIBLE_DEVICES=0, worker 1 CUDA_VISIBLE_DEVICES=1\n"));
  EXPECT_THAT(two.out, HasSubstr("\"global_step\": 10,"));
  // Two each of four named GPUs, in CUDA_VISIBLE_DEVICES's order; with no
  // GPU behind the names, the first worker's two replicas are refused.
  Result four = run("7, 3,5,1", "gpu_split_four", {"--num_replicas=2"});
  EXPECT_THAT(four.out + four.err,
              HasSubstr("multi_worker_mirrored: 4 GPU(s) for 2 workers: worker 0 "
                        "CUDA_VISIBLE_DEVICES=7,3, worker 1 CUDA_VISIBLE_DEVICES=5,1\n"));
  EXPECT_EQ(four.exit_code, 1);
  EXPECT_THAT(four.err, HasSubstr("InvalidArgument: --num_replicas=2: task "
                                  "/job:worker/replica:0/task:0 has 0 GPU device(s)"));
  // More GPUs asked for than the host has: refused before any task starts.
  Result over = run("0,1,2", "gpu_split_over", {"--num_replicas=2"});
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_THAT(over.err, HasSubstr("InvalidArgument: --num_replicas=2: 2 workers x 2 GPUs each, "
                                  "but this host has 3 (0,1,2)"));
  // Fewer GPUs than workers: no split, and the launcher says so.
  Result one = run("0", "gpu_split_one", {"--steps=2"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out + one.err,
              HasSubstr("multi_worker_mirrored: 1 GPU(s) for 2 workers: each worker sees every "
                        "GPU"));
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
