#include "distributed/rpc/local_master.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;

// Nothing listens on port 1: a call that reaches this target went through
// LocalMaster, and one that goes through gRPC fails with Unavailable.
constexpr char kTarget[] = "grpc://127.0.0.1:1";

// Answers CreateSession and RunStep (each fetch: the float 2); RunStep
// waits for cancellation when `block_runs`.
class FakeMaster : public MasterInterface {
 public:
  std::atomic<int> runs{0};
  bool block_runs = false;

  void CreateSessionAsync(const CreateSessionRequest&, CreateSessionResponse* response,
                          StatusCallback done) override {
    response->set_session_handle("fake");
    done(absl::OkStatus());
  }
  void ExtendSessionAsync(const ExtendSessionRequest&, ExtendSessionResponse*,
                          StatusCallback done) override {
    done(absl::UnimplementedError("extend"));
  }
  void RunStepAsync(CallOptions* opts, const RunStepRequest& request, RunStepResponse* response,
                    StatusCallback done) override {
    ++runs;
    if (block_runs) {
      opts->SetCancelCallback([done] { done(absl::CancelledError("step cancelled")); });
      return;
    }
    for (const auto& f : request.fetch()) {
      auto* t = response->add_tensor();
      t->set_name(f);
      Tensor::Scalar<float>(2.0f).AsProtoTensorContent(t->mutable_tensor());
    }
    done(absl::OkStatus());
  }
  void CloseSessionAsync(const CloseSessionRequest&, CloseSessionResponse*,
                         StatusCallback done) override {
    done(absl::OkStatus());
  }
  void ListDevicesAsync(const ListDevicesRequest&, ListDevicesResponse*,
                        StatusCallback done) override {
    done(absl::OkStatus());
  }
  void ResetAsync(const ResetRequest&, ResetResponse*, StatusCallback done) override {
    done(absl::OkStatus());
  }
};

std::unique_ptr<GrpcSession> NewGrpcSession() {
  SessionOptions so;
  so.target = kTarget;
  auto s = GrpcSession::Create(so);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

TEST(LocalMasterTest, SessionCallsTheRegisteredMasterWithoutGrpc) {
  FakeMaster master;
  LocalMaster::Register(kTarget, &master);
  auto s = NewGrpcSession();
  ASSERT_TRUE(s->Create(tensorflow::GraphDef()).ok());
  auto r = s->Run({}, {"x"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].scalar<float>(), 2.0f);
  EXPECT_EQ(master.runs.load(), 1);
  // Errors are named as over gRPC.
  absl::Status st = s->Extend(tensorflow::GraphDef());
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(st.message()), HasSubstr("master at 127.0.0.1:1"));
  LocalMaster::Unregister(kTarget, &master, 0);
  // Unregistered: the same session now goes through gRPC, to nobody.
  auto gone = s->Run({}, {"x"});
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kUnavailable) << gone.status();
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr("127.0.0.1:1"));
  EXPECT_EQ(master.runs.load(), 1);
}

TEST(LocalMasterTest, UnregisterCancelsCallsStillRunningAfterTheGrace) {
  FakeMaster master;
  master.block_runs = true;
  LocalMaster::Register(kTarget, &master);
  auto s = NewGrpcSession();
  ASSERT_TRUE(s->Create(tensorflow::GraphDef()).ok());
  auto run = std::async(std::launch::async, [&] { return s->Run({}, {"x"}).status(); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (master.runs.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(master.runs.load(), 1);
  auto start = std::chrono::steady_clock::now();
  LocalMaster::Unregister(kTarget, &master, 100);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  // Unregister returned: the master is done with the call.
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  absl::Status st = run.get();
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("master at 127.0.0.1:1"));
}

TEST(LocalMasterTest, RegistrationsReplaceAndOnlyTheirOwnerUnregisters) {
  FakeMaster first, second;
  LocalMaster::Register(kTarget, &first);
  LocalMaster::Register(kTarget, &second);      // a server restarted on the port
  LocalMaster::Unregister(kTarget, &first, 0);  // the old one stopping late
  auto s = NewGrpcSession();
  ASSERT_TRUE(s->Create(tensorflow::GraphDef()).ok());
  ASSERT_TRUE(s->Run({}, {"x"}).ok());
  EXPECT_EQ(first.runs.load(), 0);
  EXPECT_EQ(second.runs.load(), 1);
  LocalMaster::Unregister(kTarget, &second, 0);
  EXPECT_FALSE(LocalMaster::Call(kTarget, [](MasterInterface*, CallOptions*) {}));
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
