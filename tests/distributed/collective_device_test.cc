// Collectives in device memory across tasks (the path NCCL takes between
// the GPUs of several workers), driven without GPUs: the members of real
// (in-process) gRPC tasks' RemoteCollectives hand their rounds to a device
// backend of the test's own whose communicators "span processes" by
// meeting in this test's memory. Like NCCL, it needs one communicator id
// for the group (made by rank 0's task, handed out by the leader) and
// every rank's calls in the same order; it fails a round whose ranks
// launched different collectives, as NCCL would hang. The members here
// start their instances in different orders on purpose.
#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/collective_remote.h"
#include "distributed/local_cluster.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/notification.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;

class WorldBackend : public DeviceCollectiveBackend {
 public:
  const std::string& name() const override { return name_; }
  void RunRound(std::vector<Member> members) override {
    for (Member& m : members) m.done(absl::InternalError("RunRound across processes"));
  }
  bool SpansProcesses() const override { return true; }
  absl::StatusOr<std::string> NewCommunicatorId() override {
    std::lock_guard<std::mutex> l(mu_);
    if (!make_ids_) return absl::UnavailableError("no bootstrap interface");
    return std::string("comm\x00\xff", 6) + std::to_string(++ids_);
  }

  void RunRanks(const Round& round, std::vector<Member> members) override {
    std::vector<std::function<void()>> done;
    {
      std::lock_guard<std::mutex> l(mu_);
      calls_.push_back(absl::StrJoin(round.ranks, ","));
      World& w = worlds_[round.communicator];
      if (w.queues.empty()) w.queues.resize(round.size);
      for (size_t i = 0; i < members.size(); ++i) {
        w.queues[round.ranks[i]].push_back({std::move(members[i]), round});
      }
      while (std::all_of(w.queues.begin(), w.queues.end(), [](auto& q) { return !q.empty(); })) {
        std::vector<Part> parts;
        for (auto& q : w.queues) {
          parts.push_back(std::move(q.front()));
          q.pop_front();
        }
        Compute(std::move(parts), &done);
      }
    }
    for (auto& d : done) d();
  }

  void set_make_ids(bool make) {
    std::lock_guard<std::mutex> l(mu_);
    make_ids_ = make;
  }
  int ids() {
    std::lock_guard<std::mutex> l(mu_);
    return ids_;
  }
  int communicators() {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int>(worlds_.size());
  }
  int mismatches() {
    std::lock_guard<std::mutex> l(mu_);
    return mismatches_;
  }
  // The ranks of each RunRanks call, counted.
  std::map<std::string, int> calls() {
    std::lock_guard<std::mutex> l(mu_);
    std::map<std::string, int> out;
    for (const std::string& c : calls_) ++out[c];
    return out;
  }

 private:
  struct Part {
    Member member;
    Round round;
  };
  struct World {
    std::vector<std::deque<Part>> queues;  // per rank, in launch order
  };

  // One round, every rank's part (rank order); the results' callbacks into
  // `done`. REQUIRES: mu_.
  void Compute(std::vector<Part> parts, std::vector<std::function<void()>>* done) {
    const CollectiveArgs& a0 = *parts[0].member.args;
    // A broadcast's sender and receivers run one collective.
    auto kind = [](CollectiveType t) {
      return t == CollectiveType::kBroadcastRecv ? CollectiveType::kBroadcastSend : t;
    };
    std::string mismatch;
    for (size_t r = 1; r < parts.size(); ++r) {
      const CollectiveArgs& a = *parts[r].member.args;
      if (a.instance_key != a0.instance_key || kind(a.type) != kind(a0.type) ||
          a.dtype != a0.dtype) {
        mismatch = absl::StrCat("rank ", r, " launched instance ", a.instance_key,
                                " where rank 0 launched ", a0.instance_key);
      }
    }
    absl::StatusOr<Tensor> result;
    if (!mismatch.empty()) {
      ++mismatches_;
      result = absl::InternalError(mismatch);
    } else if (a0.type == CollectiveType::kReduce) {
      Tensor sum(DT_FLOAT, parts[0].member.input->shape());
      for (int64_t i = 0; i < sum.NumElements(); ++i) {
        float s = 0;
        for (const Part& p : parts) s += p.member.input->base<float>()[i];
        sum.base<float>()[i] = a0.final_op == CollectiveFinal::kDiv ? s / parts.size() : s;
      }
      result = sum;
    } else if (a0.type == CollectiveType::kGather) {
      std::vector<float> all;
      int64_t rows = 0;
      for (size_t r = 0; r < parts.size(); ++r) {
        const Tensor& in = *parts[r].member.input;
        if (parts[0].round.rows[r] != in.dim_size(0)) {
          result = absl::InternalError(
              absl::StrCat("round says rank ", r, " has ", parts[0].round.rows[r], " rows"));
        }
        rows += in.dim_size(0);
        all.insert(all.end(), in.base<float>(), in.base<float>() + in.NumElements());
      }
      if (result.status().code() != absl::StatusCode::kInternal) {
        TensorShape shape = parts[0].member.input->shape();
        shape.set_dim(0, rows);
        result = Tensor::FromVector<float>(all, shape);
      }
    } else {
      result = parts[parts[0].round.sender].member.input->DeepCopy();
    }
    for (Part& p : parts) {
      done->push_back([d = std::move(p.member.done), result] { d(result); });
    }
  }

  const std::string name_ = "fake_nccl";
  std::mutex mu_;
  bool make_ids_ = true;
  int ids_ = 0;
  int mismatches_ = 0;
  std::map<std::string, World> worlds_;
  std::vector<std::string> calls_;
};

std::string Device(int task, int ordinal) {
  return absl::StrCat("/job:worker/replica:0/task:", task, "/device:TEST_ACCEL:", ordinal);
}

class CollectiveDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions o;
    o.jobs = {{"worker", 3}};
    o.server.intra_op_threads = 1;
    o.server.inter_op_threads = 2;
    auto c = LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
  }
  void TearDown() override {
    if (cluster_ != nullptr) cluster_->StopAll();
  }

  // Starts one member's part; its result lands in *out.
  void Start(const std::string& device, CollectiveArgs args, const Tensor& input,
             absl::StatusOr<Tensor>* out, Notification* done) {
    const int task = device[std::string("/job:worker/replica:0/task:").size()] - '0';
    args.device = device;
    args.node = absl::StrCat("c", args.instance_key);
    args.backend = &backend_;
    cluster_->server("worker", task)
        ->collectives()
        ->Run(args, input, nullptr, [out, done](absl::StatusOr<Tensor> r) {
          *out = std::move(r);
          done->Notify();
        });
  }

  // The group of the tests: two members on task 0, one on each other
  // task; ranks follow the device names.
  const std::vector<std::string> members_ = {Device(0, 0), Device(0, 1), Device(1, 0),
                                             Device(2, 0)};
  WorldBackend backend_;
  std::unique_ptr<LocalCluster> cluster_;
};

CollectiveArgs Reduce(int instance) {
  CollectiveArgs a;
  a.type = CollectiveType::kReduce;
  a.group_size = 4;
  a.group_key = 3;
  a.instance_key = instance;
  a.final_op = CollectiveFinal::kDiv;
  a.dtype = DT_FLOAT;
  a.timeout_seconds = 60;
  return a;
}

// Member m's input for instance i in run r: 5 floats, exact in binary.
Tensor Input(int m, int i, int r) {
  std::vector<float> v;
  for (int j = 0; j < 5; ++j) v.push_back(100 * m + 10 * i + r + 0.5f * j);
  return Tensor::FromVector<float>(v, TensorShape({5}));
}

// 24 all-reduces per step, four steps; every member starts a step's 24
// in its own shuffled order, all at once (launching in arrival order
// instead of the leader's, this failed 6 runs of 6). One communicator id
// for the group (rank 0's), task 0's two members launched together, every
// rank's rounds in the same order (no mismatch), and each result the mean.
TEST_F(CollectiveDeviceTest, RoundsLaunchInTheLeadersOrderOnEveryTask) {
  constexpr int kInstances = 24, kRuns = 4;
  for (int r = 0; r < kRuns; ++r) {
    std::vector<absl::StatusOr<Tensor>> out(members_.size() * kInstances,
                                            absl::UnknownError("not run"));
    std::vector<std::unique_ptr<Notification>> done;
    for (size_t k = 0; k < out.size(); ++k) done.push_back(std::make_unique<Notification>());
    std::vector<std::thread> threads;
    for (int m = 0; m < static_cast<int>(members_.size()); ++m) {
      threads.emplace_back([&, m] {
        std::vector<int> order(kInstances);
        for (int i = 0; i < kInstances; ++i) order[i] = i;
        std::mt19937 gen(97 * m + r);
        std::shuffle(order.begin(), order.end(), gen);
        for (int i : order) {
          const size_t k = m * kInstances + i;
          Start(members_[m], Reduce(10 + i), Input(m, i, r), &out[k], done[k].get());
          std::this_thread::sleep_for(std::chrono::milliseconds(gen() % 3));
        }
      });
    }
    for (auto& t : threads) t.join();
    for (size_t k = 0; k < out.size(); ++k) {
      ASSERT_TRUE(done[k]->WaitForNotificationWithTimeout(absl::Seconds(60)))
          << "member part " << k;
    }
    for (int m = 0; m < static_cast<int>(members_.size()); ++m) {
      for (int i = 0; i < kInstances; ++i) {
        const absl::StatusOr<Tensor>& got = out[m * kInstances + i];
        ASSERT_TRUE(got.ok()) << members_[m] << " instance " << i << ": " << got.status();
        for (int j = 0; j < 5; ++j) {
          // The mean over members 0..3 of 100 m + 10 i + r + j/2.
          EXPECT_EQ(got->base<float>()[j], 150 + 10 * i + r + 0.5f * j)
              << members_[m] << " instance " << i << " run " << r;
        }
      }
    }
  }
  EXPECT_EQ(backend_.mismatches(), 0);
  EXPECT_EQ(backend_.ids(), 1);
  EXPECT_EQ(backend_.communicators(), 1);
  const std::map<std::string, int> expected = {
      {"0,1", kInstances * kRuns}, {"2", kInstances * kRuns}, {"3", kInstances * kRuns}};
  EXPECT_EQ(backend_.calls(), expected);
}

// The leader's side, key by key: device runs are numbered in the order
// their verdicts come, per group, and carry rank 0's id (another rank's is
// ignored); host runs take no number; a rank 0 without an id is refused.
TEST_F(CollectiveDeviceTest, TheLeaderNumbersDeviceRunsAndHandsOutRankZerosId) {
  RemoteCollectives* rc = cluster_->server("worker", 0)->collectives();
  const std::string dev0 = Device(0, 0), dev1 = Device(1, 0);
  std::deque<CallOptions> opts;
  std::deque<RecvTensorResult> outs;
  std::deque<absl::Status> got;
  auto serve = [&](const std::string& key) {
    opts.emplace_back();
    outs.emplace_back();
    got.emplace_back(absl::UnknownError("no answer"));
    rc->Serve(key, &opts.back(), &outs.back(),
              [s = &got.back()](const absl::Status& st) { *s = st; });
  };
  auto text = [&](size_t k) {
    return std::string(outs[k].tensor.raw_data(), outs[k].tensor.TotalBytes());
  };
  serve("collective;join;3;2;" + dev0);
  serve("collective;join;3;2;" + dev1);
  ASSERT_TRUE(got[1].ok()) << got[1];
  // Instance 8's verdict comes first, then instance 7's, then a host run.
  serve("collective;inst;3;7;0;2;" + dev0 + ";a;0;id:0aff;float[4] via fake_nccl");
  serve("collective;inst;3;8;0;2;" + dev1 + ";a;0;id:1234;float[4] via fake_nccl");
  serve("collective;inst;3;8;0;2;" + dev0 + ";a;0;id:0aff;float[4] via fake_nccl");
  serve("collective;inst;3;7;0;2;" + dev1 + ";a;0;;float[4] via fake_nccl");
  serve("collective;inst;3;9;0;2;" + dev0 + ";a;0;;float[4]");
  serve("collective;inst;3;9;0;2;" + dev1 + ";a;0;;float[4]");
  for (size_t k = 2; k < 8; ++k) ASSERT_TRUE(got[k].ok()) << k << ": " << got[k];
  EXPECT_EQ(text(3), "ok#0#0aff");  // instance 8, rank 0's id
  EXPECT_EQ(text(4), "ok#0#0aff");
  EXPECT_EQ(text(2), "ok#1#0aff");  // instance 7
  EXPECT_EQ(text(5), "ok#1#0aff");
  EXPECT_EQ(text(6), "ok");  // host members: no number
  // Gather rows and a broadcast's sender come before the number.
  serve("collective;inst;3;10;0;2;" + dev0 + ";g;2;id:0aff;float[3] via fake_nccl");
  serve("collective;inst;3;10;0;2;" + dev1 + ";g;5;;float[3] via fake_nccl");
  serve("collective;inst;3;11;0;2;" + dev0 + ";r;0;id:0aff;float[3] via fake_nccl");
  serve("collective;inst;3;11;0;2;" + dev1 + ";s;0;;float[3] via fake_nccl");
  for (size_t k = 8; k < 12; ++k) ASSERT_TRUE(got[k].ok()) << k << ": " << got[k];
  EXPECT_EQ(text(8), "rows;2,5#2#0aff");
  EXPECT_EQ(text(10), "src;1#3#0aff");
  // Rank 0 without an id.
  serve("collective;inst;3;12;0;2;" + dev1 + ";a;0;id:77;float[4] via fake_nccl");
  serve("collective;inst;3;12;0;2;" + dev0 + ";a;0;;float[4] via fake_nccl");
  EXPECT_EQ(got[12].code(), absl::StatusCode::kInvalidArgument) << got[12];
  EXPECT_THAT(std::string(got[12].message()),
              HasSubstr("instance 12 of group 3: rank 0 (" + dev0 + ") gave no communicator id"));
}

// Gather (members of different rows) and broadcast (rank 2 sends) through
// the backend: the leader's rows and sender reach every task's round.
TEST_F(CollectiveDeviceTest, GatherAndBroadcastCarryRowsAndSender) {
  std::vector<absl::StatusOr<Tensor>> gathered(4, absl::UnknownError("not run")),
      broadcast(4, absl::UnknownError("not run"));
  std::vector<Notification> gd(4), bd(4);
  for (int m = 0; m < 4; ++m) {
    CollectiveArgs g = Reduce(20);
    g.type = CollectiveType::kGather;
    // Member m gives m + 1 rows of two, every value 10 m + row.
    std::vector<float> rows;
    for (int row = 0; row <= m; ++row) rows.insert(rows.end(), 2, 10.f * m + row);
    Start(members_[m], g, Tensor::FromVector<float>(rows, TensorShape({m + 1, 2})), &gathered[m],
          &gd[m]);
    CollectiveArgs b = Reduce(21);
    b.type = m == 2 ? CollectiveType::kBroadcastSend : CollectiveType::kBroadcastRecv;
    b.shape = TensorShape({3});
    Start(members_[m], b,
          m == 2 ? Tensor::FromVector<float>({7, 8, 9}, TensorShape({3})) : Tensor(), &broadcast[m],
          &bd[m]);
  }
  const std::vector<float> all = {0,  0,  10, 10, 11, 11, 20, 20, 21, 21,
                                  22, 22, 30, 30, 31, 31, 32, 32, 33, 33};
  for (int m = 0; m < 4; ++m) {
    ASSERT_TRUE(gd[m].WaitForNotificationWithTimeout(absl::Seconds(60)));
    ASSERT_TRUE(bd[m].WaitForNotificationWithTimeout(absl::Seconds(60)));
    ASSERT_TRUE(gathered[m].ok()) << members_[m] << ": " << gathered[m].status();
    EXPECT_EQ(gathered[m]->shape(), TensorShape({10, 2}));
    EXPECT_EQ(std::vector<float>(gathered[m]->base<float>(), gathered[m]->base<float>() + 20), all);
    ASSERT_TRUE(broadcast[m].ok()) << members_[m] << ": " << broadcast[m].status();
    EXPECT_EQ(std::vector<float>(broadcast[m]->base<float>(), broadcast[m]->base<float>() + 3),
              (std::vector<float>{7, 8, 9}));
  }
  EXPECT_EQ(backend_.mismatches(), 0);
}

// A member in host memory among device members: the leader refuses the
// instance for every member, naming the two kinds.
TEST_F(CollectiveDeviceTest, AHostMemberAmongDeviceMembersIsInvalidArgument) {
  std::vector<absl::StatusOr<Tensor>> out(4, absl::UnknownError("not run"));
  std::vector<Notification> done(4);
  for (int m = 0; m < 4; ++m) {
    if (m == 3) {
      CollectiveArgs a = Reduce(30);
      a.device = members_[m];
      a.node = "host";
      cluster_->server("worker", 2)
          ->collectives()
          ->Run(a, Input(m, 0, 0), nullptr, [&out, &done](absl::StatusOr<Tensor> r) {
            out[3] = std::move(r);
            done[3].Notify();
          });
    } else {
      Start(members_[m], Reduce(30), Input(m, 0, 0), &out[m], &done[m]);
    }
  }
  for (int m = 0; m < 4; ++m) {
    ASSERT_TRUE(done[m].WaitForNotificationWithTimeout(absl::Seconds(60)));
    EXPECT_EQ(out[m].status().code(), absl::StatusCode::kInvalidArgument) << out[m].status();
  }
  // Every member hears the leader's verdict, which names the host member
  // or a device member against it, and the device members' transport.
  EXPECT_THAT(out[0].status().message(), HasSubstr("instance 30 of group 3"));
  EXPECT_THAT(out[0].status().message(), HasSubstr("via fake_nccl"));
  EXPECT_THAT(out[0].status().message(), HasSubstr(members_[3]));
  EXPECT_EQ(backend_.calls().size(), 0u);
}

// Rank 0's task cannot make the communicator: every member fails with its
// reason, naming rank 0's device; nobody waits.
TEST_F(CollectiveDeviceTest, ACommunicatorRankZeroCannotMakeFailsEveryMember) {
  backend_.set_make_ids(false);
  std::vector<absl::StatusOr<Tensor>> out(4, absl::UnknownError("not run"));
  std::vector<Notification> done(4);
  for (int m = 0; m < 4; ++m) Start(members_[m], Reduce(40), Input(m, 0, 0), &out[m], &done[m]);
  for (int m = 0; m < 4; ++m) {
    ASSERT_TRUE(done[m].WaitForNotificationWithTimeout(absl::Seconds(60))) << members_[m];
    EXPECT_EQ(out[m].status().code(), absl::StatusCode::kInternal) << out[m].status();
    EXPECT_THAT(out[m].status().message(),
                HasSubstr(absl::StrCat("rank 0 (", members_[0],
                                       ") could not make a communicator: UNAVAILABLE: no "
                                       "bootstrap interface")));
  }
  EXPECT_EQ(backend_.calls().size(), 0u);
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
