// Malformed and hostile worker RPCs are rejected with a clear status and the
// server keeps serving: unknown handles, a bad GraphDef, a malformed
// rendezvous key, undecodable bytes, a request over the message limit, and
// malformed task addresses; the worker cache learns only unknown tasks.
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distributed/cluster_spec.h"
#include "distributed/local_cluster.h"
#include "distributed/protos/worker_service.grpc.pb.h"
#include "distributed/rpc/grpc_session.h"
#include "distributed/rpc/grpc_util.h"
#include "distributed/rpc/grpc_worker_client.h"
#include "distributed/worker.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kernels/framework/rendezvous.h"
#include "runtime/session.h"
#include "util/notification.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;

class BadRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions o;
    o.jobs = {{"worker", 1}};
    o.server.max_message_bytes = int64_t{16} << 20;  // a configured limit
    auto c = LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
    std::string target = cluster_->target("worker", 0);
    address_ = target.substr(std::string("grpc://").size());
    channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    stub_ = WorkerService::NewStub(channel_);
  }

  std::unique_ptr<grpc::ClientContext> Ctx() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx;
  }

  void ExpectStillServing() {
    GetStatusRequest req;
    GetStatusResponse resp;
    auto ctx = Ctx();
    grpc::Status s = stub_->GetStatus(ctx.get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<WorkerService::Stub> stub_;
};

TEST_F(BadRpcTest, UnknownSessionAndBadGraphAreRejected) {
  RegisterGraphRequest req;
  req.set_session_handle("no-such-session");
  RegisterGraphResponse resp;
  auto ctx = Ctx();
  grpc::Status s = stub_->RegisterGraph(ctx.get(), req, &resp);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.error_message(), HasSubstr("no-such-session"));

  CreateWorkerSessionRequest creq;
  creq.set_session_handle("s1");
  CreateWorkerSessionResponse cresp;
  auto cctx = Ctx();
  ASSERT_TRUE(stub_->CreateWorkerSession(cctx.get(), creq, &cresp).ok());
  req.set_session_handle("s1");
  auto* n = req.mutable_graph_def()->add_node();
  n->set_name("bad");
  n->set_op("NoSuchOp");
  auto ctx2 = Ctx();
  s = stub_->RegisterGraph(ctx2.get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("node 'bad'"));
  ExpectStillServing();
}

// A master's task addresses (CreateWorkerSession) teach a task the tasks
// its cluster does not name; malformed ones are refused, naming the entry.
TEST_F(BadRpcTest, MalformedTaskAddressesAreRejected) {
  for (const auto& [task, address] :
       std::vector<std::pair<std::string, std::string>>{{"nonsense", "a:1"},
                                                        {"/job:ps/replica:0/task:0", "noport"},
                                                        {"/job:ps/replica:0/task:0", "a:0"},
                                                        {"/job:ps/task:0", "a:1"}}) {
    CreateWorkerSessionRequest req;
    req.set_session_handle("s-" + task + address);
    (*req.mutable_task_addresses())[task] = address;
    CreateWorkerSessionResponse resp;
    auto ctx = Ctx();
    grpc::Status s = stub_->CreateWorkerSession(ctx.get(), req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << task << " " << address;
    EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("task address '", task, "' -> '", address,
                                                          "': expected a task name")));
  }
  ExpectStillServing();
}

TEST(GrpcWorkerCacheTest, LearnsOnlyTasksItsClusterDoesNotName) {
  auto sparse = ParseTfConfig(R"({"sparseCluster": {"worker": {}, "ps": ["127.0.0.1:7001"]},
                                  "task": {"type": "ps", "index": 1}})");
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  GrpcWorkerCache cache(sparse->cluster, ChannelOptions());
  const std::string w1 = "/job:worker/replica:0/task:1", ps1 = "/job:ps/replica:0/task:1";
  absl::Status unknown = cache.GetWorker(w1).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.message()),
              HasSubstr("job 'worker' task 1 is not in this sparse cluster"));
  ASSERT_TRUE(cache.LearnAddresses({{w1, "127.0.0.1:7002"}, {ps1, "127.0.0.1:9"}}).ok());
  EXPECT_TRUE(cache.GetWorker(w1).ok());
  // The cluster's own address stays; learned tasks are not the cluster's.
  EXPECT_EQ(cache.Addresses(), (std::map<std::string, std::string>{{ps1, "127.0.0.1:7001"}}));
  EXPECT_EQ(cache.ListTasks(), std::vector<std::string>{ps1});
  std::map<std::string, std::string> many;
  for (size_t i = 0; i <= GrpcWorkerCache::kMaxLearnedTasks; ++i) {
    many[absl::StrCat("/job:worker/replica:0/task:", i + 2)] = "127.0.0.1:7003";
  }
  EXPECT_EQ(cache.LearnAddresses(many).code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(BadRpcTest, MalformedRendezvousKeyIsInvalidArgument) {
  RecvTensorRequest req;
  req.set_step_id(1);
  req.set_rendezvous_key("not;a;key");
  auto ctx = Ctx();
  auto reader = stub_->RecvTensor(ctx.get(), req);
  RecvTensorChunk chunk;
  while (reader->Read(&chunk)) {
  }
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  ExpectStillServing();
}

// RecvTensor calls for steps this task never runs leave nothing behind:
// one refused at once (a stale incarnation), one that waited until its
// caller gave up. A step this task's RunGraph took stays until cleaned up.
TEST_F(BadRpcTest, RecvTensorForAStepNeverRunLeavesNoRendezvous) {
  GrpcServer* server = cluster_->server("worker", 0);
  Worker* worker = server->worker();
  const std::string dev = "/job:worker/replica:0/task:0/device:CPU:0";
  auto device = server->device_mgr()->Lookup(dev);
  ASSERT_TRUE(device.ok()) << device.status();
  const uint64_t incarnation = (*device)->incarnation();
  auto recv = [&](int64_t step, uint64_t inc, CallOptions* opts) {
    RecvTensorRequest req;
    req.set_step_id(step);
    req.set_rendezvous_key(Rendezvous::CreateKey(dev, inc, dev, "edge_1_x", {0, 0}));
    RecvTensorResult result;
    std::promise<absl::Status> p;
    worker->RecvTensorAsync(opts, req, &result, [&p](const absl::Status& s) { p.set_value(s); });
    if (opts != nullptr) {
      EXPECT_EQ(worker->num_rendezvous(), 1u);  // waiting
      opts->StartCancel();
    }
    auto f = p.get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  };
  absl::Status s = recv(1001, incarnation + 1, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_EQ(worker->num_rendezvous(), 0u);
  CallOptions opts;
  s = recv(1002, incarnation, &opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(worker->num_rendezvous(), 0u);
  ExpectStillServing();
}

TEST_F(BadRpcTest, UndecodableBytesAreRejected) {
  grpc::GenericStub generic(channel_);
  grpc::CompletionQueue cq;
  std::string garbage = "\xff\xff\xff\xff\x0f garbage that is not a protobuf";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = generic.PrepareUnaryCall(&ctx, "/graphrun.distributed.WorkerService/RegisterGraph",
                                       request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_FALSE(status.ok());
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  ExpectStillServing();
}

TEST_F(BadRpcTest, OversizedRequestIsRejected) {
  RegisterGraphRequest req;
  req.set_session_handle("s1");
  // A 32 MiB constant: above the configured 16 MiB message limit.
  auto* n = req.mutable_graph_def()->add_node();
  n->set_name("huge");
  n->set_op("Const");
  (*n->mutable_attr())["value"].mutable_tensor()->set_tensor_content(
      std::string(size_t{32} << 20, 'x'));
  RegisterGraphResponse resp;
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto big_channel = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  auto big_stub = WorkerService::NewStub(big_channel);
  auto ctx = Ctx();
  grpc::Status s = big_stub->RegisterGraph(ctx.get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  ExpectStillServing();
}

// A step asking for more memory than the task has: the client gets
// ResourceExhausted naming the node and the bytes (not "Unknown: Unexpected
// error in RPC handling"), and the task keeps serving.
TEST_F(BadRpcTest, HugeAllocationIsResourceExhaustedAndTheTaskServesOn) {
  RegisterGrpcSession();
  tensorflow::GraphDef def;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"(
node { name: "dims" op: "Placeholder" attr { key: "dtype" value { type: DT_INT64 } } }
node { name: "v" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 2 } } } }
node { name: "f" op: "Fill" input: "dims" input: "v" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "index_type" value { type: DT_INT64 } } })",
                                                            &def));
  SessionOptions so;
  so.target = cluster_->target("worker", 0);
  auto session = NewSession(so);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Create(def).ok());
  auto huge = (*session)->Run(
      {{"dims", Tensor::FromVector<int64_t>({1000000, 1000000}, TensorShape({2}))}}, {"f"}, {});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_THAT(std::string(huge.status().message()),
              HasSubstr("node 'f' (op Fill): output 0: cannot allocate a float tensor of shape "
                        "[1000000,1000000]: 4000000000000 bytes"));
  auto small =
      (*session)->Run({{"dims", Tensor::FromVector<int64_t>({2, 3}, TensorShape({2}))}}, {"f"}, {});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ((*small)[0].shape(), TensorShape({2, 3}));
  EXPECT_EQ((*small)[0].base<float>()[5], 2.f);
  ExpectStillServing();
}

// Sessions, concurrent steps and graph sizes have limits (ServerOptions
// .limits; `graphrun server --max_sessions ...`): over one is
// ResourceExhausted naming the task and the flag, and the task serves on.
TEST(ServingLimitsTest, SessionsStepsAndGraphSizeAreBounded) {
  RegisterGrpcSession();
  LocalClusterOptions o;
  o.jobs = {{"worker", 1}};
  o.server.limits.max_sessions = 2;
  o.server.limits.max_concurrent_steps = 1;
  o.server.limits.max_graph_nodes = 4;
  auto cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  tensorflow::GraphDef blocking;  // a dequeue from a queue nobody fills
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"(
node { name: "q" op: "FIFOQueueV2" attr { key: "component_types" value { list { type: DT_FLOAT } } } }
node { name: "d" op: "QueueDequeueV2" input: "q"
  attr { key: "component_types" value { list { type: DT_FLOAT } } } })",
                                                            &blocking));
  SessionOptions so;
  so.target = (*cluster)->target("worker", 0);
  auto a = NewSession(so);
  auto b = NewSession(so);
  auto c = NewSession(so);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_TRUE((*a)->Create(blocking).ok());
  ASSERT_TRUE((*b)->Create(blocking).ok());
  absl::Status third = (*c)->Create(blocking);
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted) << third;
  EXPECT_THAT(std::string(third.message()),
              HasSubstr("2 sessions are open, the most it allows (--max_sessions)"));

  tensorflow::GraphDef big = blocking;
  for (int i = 0; i < 3; ++i) {
    auto* n = big.add_node();
    n->set_name(absl::StrCat("c", i));
    n->set_op("NoOp");
  }
  ASSERT_TRUE((*b)->Close().ok());
  auto d = NewSession(so);
  ASSERT_TRUE(d.ok());
  absl::Status too_big = (*d)->Create(big);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted) << too_big;
  EXPECT_THAT(std::string(too_big.message()),
              HasSubstr("a graph of 5 nodes is over the limit of 4 (--max_graph_nodes)"));

  // One step at a time: while a's dequeue waits, another step is refused.
  auto e = NewSession(so);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE((*e)->Create(blocking).ok());
  auto start_blocked = [&] {
    return std::async(std::launch::async, [&] { return (*a)->Run({}, {"d"}, {}).status(); });
  };
  std::future<absl::Status> blocked = start_blocked();
  absl::Status refused;
  // Until a's step is running: bounded, and generous, because a loaded CI
  // machine took over the 2 s this loop once allowed to start it. A probe
  // that gets in first refuses a's step instead (the worker counts RunGraph
  // calls too): then a's step is started again.
  for (int i = 0; i < 3000; ++i) {
    if (blocked.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      absl::Status lost = blocked.get();
      ASSERT_EQ(lost.code(), absl::StatusCode::kResourceExhausted) << lost;
      blocked = start_blocked();
    }
    refused = (*e)->Run({}, {}, {"q"}).status();
    if (!refused.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("1 steps are running, the most it allows at once "
                        "(--max_concurrent_steps)"));
  ASSERT_TRUE((*a)->Close().ok());  // cancels the dequeue
  EXPECT_FALSE(blocked.get().ok());
  EXPECT_TRUE((*e)->Run({}, {}, {"q"}).ok());
}

// A client cycling through step signatures: the session keeps at most
// max_plans_per_session plans, evicting the least recently used, and the
// evicted signatures still run (planned again).
TEST(ServingLimitsTest, PlanCacheIsBounded) {
  RegisterGrpcSession();
  LocalClusterOptions o;
  o.jobs = {{"worker", 1}};
  o.server.limits.max_plans_per_session = 3;
  auto cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  tensorflow::GraphDef def;
  for (int i = 0; i < 6; ++i) {
    auto* n = def.add_node();
    n->set_name(absl::StrCat("c", i));
    n->set_op("Const");
    (*n->mutable_attr())["dtype"].set_type(tensorflow::DT_INT32);
    auto* t = (*n->mutable_attr())["value"].mutable_tensor();
    t->set_dtype(tensorflow::DT_INT32);
    t->add_int_val(i);
  }
  SessionOptions so;
  so.target = (*cluster)->target("worker", 0);
  auto s = NewSession(so);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Create(def).ok());
  Master* master = (*cluster)->server("worker", 0)->master();
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 6; ++i) {
      auto r = (*s)->Run({}, {absl::StrCat("c", i)}, {});
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ((*r)[0].scalar<int32_t>(), i);
      EXPECT_LE(master->num_plans(), 3u);
    }
  }
  EXPECT_EQ(master->num_plans(), 3u);
}

// Signatures that a joined cache key would confuse: after a step with no
// feeds, a step feeding the empty name (or "a" and "b" after "a,b") is its
// own signature and gets its own error, not the cached plan's types (the
// master once indexed that plan's feed types out of range, an abort).
TEST(ServingLimitsTest, SignaturesAreKeyedExactly) {
  RegisterGrpcSession();
  LocalClusterOptions o;
  o.jobs = {{"worker", 1}};
  auto cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  tensorflow::GraphDef def;
  auto* n = def.add_node();
  n->set_name("c");
  n->set_op("Const");
  (*n->mutable_attr())["dtype"].set_type(tensorflow::DT_INT32);
  auto* t = (*n->mutable_attr())["value"].mutable_tensor();
  t->set_dtype(tensorflow::DT_INT32);
  t->add_int_val(7);
  SessionOptions so;
  so.target = (*cluster)->target("worker", 0);
  auto s = NewSession(so);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Create(def).ok());
  auto r = (*s)->Run({}, {"c"}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<int32_t>(), 7);
  r = (*s)->Run({{"", Tensor::Scalar<int32_t>(1)}}, {"c"}, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("feed ''"));
  r = (*s)->Run({}, {"c"}, {});  // the first signature still runs
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<int32_t>(), 7);
}

// A cluster with a token: calls without it (or with another) get
// Unauthenticated and learn nothing else (no task name); the tasks' own
// calls to each other carry it, so steps across tasks run.
TEST(AuthTokenTest, CallsWithoutTheTokenAreRefused) {
  RegisterGrpcSession();
  LocalClusterOptions o;
  o.jobs = {{"ps", 1}, {"worker", 1}};
  o.server.auth_token = "s3cret-token";
  auto cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string target = (*cluster)->target("ps", 0);
  const std::string address = target.substr(std::string("grpc://").size());
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = WorkerService::NewStub(channel);
  for (const char* token : {"", "wrong", "s3cret-tokeN"}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (*token) ctx.AddMetadata(kAuthMetadataKey, token);
    GetStatusRequest req;
    GetStatusResponse resp;
    grpc::Status s = stub->GetStatus(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << token;
    EXPECT_EQ(s.error_message().find("/job:"), std::string::npos) << s.error_message();
    EXPECT_EQ(resp.device_size(), 0);
    EXPECT_EQ(resp.task(), "");
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ctx.AddMetadata(kAuthMetadataKey, "s3cret-token");
    GetStatusRequest req;
    GetStatusResponse resp;
    EXPECT_TRUE(stub->GetStatus(&ctx, req, &resp).ok());
  }
  // A step on the worker that reads a variable on the PS: the worker's
  // calls to the PS carry the token.
  tensorflow::GraphDef def;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"(
node { name: "c" op: "Const" device: "/job:ps/task:0" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } }
    float_val: 2 } } } }
node { name: "m" op: "Mul" input: "c" input: "c" device: "/job:worker/task:0"
  attr { key: "T" value { type: DT_FLOAT } } })",
                                                            &def));
  SessionOptions so;
  so.target = (*cluster)->target("worker", 0);
  auto session = NewSession(so);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Create(def).ok());
  auto r = (*session)->Run({}, {"m"}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].base<float>()[2], 4.f);
  // A peer with another token is refused.
  ChannelOptions wrong;
  wrong.auth_token = "not-it";
  GrpcWorkerCache cache((*cluster)->cluster_spec(), wrong);
  auto worker = cache.GetWorker("/job:ps/replica:0/task:0");
  ASSERT_TRUE(worker.ok());
  absl::Status got = absl::UnknownError("no answer");
  Notification done;
  GetStatusRequest req;
  GetStatusResponse resp;
  (*worker)->GetStatusAsync(req, &resp, [&](const absl::Status& s) {
    got = s;
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(got.code(), absl::StatusCode::kUnauthenticated) << got;
}

// Function libraries count against the limits once inlined: a 2-node graph
// whose call inlines 7 nodes is over --max_graph_nodes=4, a session's
// graph grown past it by Extend is refused, and calls nested deeper than
// --max_function_depth are InvalidArgument naming the function.
TEST(ServingLimitsTest, InlinedFunctionsAndExtendsCountAgainstTheLimits) {
  RegisterGrpcSession();
  LocalClusterOptions o;
  o.jobs = {{"worker", 1}};
  o.server.limits.max_graph_nodes = 4;
  o.server.limits.max_function_depth = 2;
  auto cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  SessionOptions so;
  so.target = (*cluster)->target("worker", 0);
  auto identity = [](const std::string& name, const std::string& in) {
    return absl::StrCat("node_def { name: '", name, "' op: 'Identity' input: '", in,
                        "' attr { key: 'T' value { type: DT_FLOAT } } }");
  };
  auto function = [](const std::string& name, const std::string& body, const std::string& ret) {
    return absl::StrCat("function { signature { name: '", name,
                        "' input_arg { name: 'x' type: DT_FLOAT } output_arg { name: 'y' type: "
                        "DT_FLOAT } } ",
                        body, " ret { key: 'y' value: '", ret, "' } }");
  };
  const std::string konst =
      "node { name: 'p' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } } attr { key: "
      "'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }";
  auto parse = [](const std::string& text) {
    tensorflow::GraphDef g;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &g)) << text;
    return g;
  };

  // Six Identity nodes behind one call.
  std::string body;
  for (int i = 0; i < 6; ++i)
    body += identity(absl::StrCat("i", i), i == 0 ? "x" : absl::StrCat("i", i - 1, ":output:0"));
  tensorflow::GraphDef wide =
      parse(absl::StrCat(konst, " node { name: 'call' op: 'six' input: 'p' } library { ",
                         function("six", body, "i5:output:0"), " }"));
  ASSERT_EQ(wide.node_size(), 2);
  auto a = NewSession(so);
  ASSERT_TRUE(a.ok());
  absl::Status st = (*a)->Create(wide);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("inlining function calls makes more than 4 nodes"));

  // Three extensions of two nodes each: each is small, the graph is not.
  auto b = NewSession(so);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->Create(parse(konst + " node { name: 'q' op: 'NoOp' }")).ok());
  absl::Status ext =
      (*b)->Extend(parse("node { name: 'r' op: 'NoOp' } node { name: 's' op: 'NoOp' }"));
  ASSERT_TRUE(ext.ok()) << ext;
  ext = (*b)->Extend(parse("node { name: 't' op: 'NoOp' }"));
  EXPECT_EQ(ext.code(), absl::StatusCode::kResourceExhausted) << ext;
  EXPECT_THAT(std::string(ext.message()),
              HasSubstr("a graph of 5 nodes is over the limit of 4 (--max_graph_nodes)"));
  // The refused extension left the session as it was.
  auto ran = (*b)->Run({}, {"p"}, {"s"});
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ((*ran)[0].scalar<float>(), 1.0f);

  // f1 -> f2 -> f3: three levels, the limit is two.
  tensorflow::GraphDef deep =
      parse(absl::StrCat(konst, " node { name: 'call' op: 'f1' input: 'p' } library { ",
                         function("f1", "node_def { name: 'c' op: 'f2' input: 'x' }", "c:y:0"), " ",
                         function("f2", "node_def { name: 'c' op: 'f3' input: 'x' }", "c:y:0"), " ",
                         function("f3", identity("i", "x"), "i:output:0"), " }"));
  auto c = NewSession(so);
  ASSERT_TRUE(c.ok());
  st = (*c)->Create(deep);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("function 'f3': calls nest deeper than 2"));

  // The same limits hold for call frames (`_noinline`), whose bodies the
  // worker instantiates when it builds its executors: frames f1 -> f2 ->
  // f3 make bodies of 3 nodes each (_Arg, the node, _Retval), over 4 nodes
  // by f2; a frame of six Identity nodes is over it by itself.
  const std::string noinline = "attr { key: '_noinline' value { b: true } } ";
  tensorflow::GraphDef deep_frames = parse(absl::StrCat(
      konst, " node { name: 'call' op: 'f1' input: 'p' } library { ",
      function("f1", noinline + "node_def { name: 'c' op: 'f2' input: 'x' }", "c:y:0"), " ",
      function("f2", noinline + "node_def { name: 'c' op: 'f3' input: 'x' }", "c:y:0"), " ",
      function("f3", noinline + identity("i", "x"), "i:output:0"), " }"));
  auto run = [&](const SessionOptions& options, const tensorflow::GraphDef& g) {
    auto session = NewSession(options);
    EXPECT_TRUE(session.ok());
    if (!session.ok()) return session.status();
    absl::Status s = (*session)->Create(g);
    if (s.ok()) s = (*session)->Run({}, {"call"}, {}).status();
    return s;
  };
  st = run(so, deep_frames);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("call-frame bodies make more than 4 nodes (instantiating function 'f2'; "
                        "--max_graph_nodes)"));
  st = run(so, parse(absl::StrCat(konst, " node { name: 'call' op: 'six' input: 'p' } library { ",
                                  function("six", noinline + body, "i5:output:0"), " }")));
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("inlining function calls makes more than 4 nodes (at node 'six/i4'"));
  // With room for the nodes, three frames nested are over a depth of two.
  LocalClusterOptions roomy = o;
  roomy.server.limits.max_graph_nodes = 1000;
  auto cluster2 = LocalCluster::Start(roomy);
  ASSERT_TRUE(cluster2.ok()) << cluster2.status();
  SessionOptions so2;
  so2.target = (*cluster2)->target("worker", 0);
  st = run(so2, deep_frames);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("call frames nest deeper than 2 (instantiating function 'f3'; "
                        "--max_function_depth)"));
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
