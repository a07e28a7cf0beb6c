// Measured traffic and timelines of a real distributed step: an in-process
// cluster (1 PS + 2 workers, gRPC on loopback), a [4,8] float variable on
// the PS read by both workers. The RunMetadata of one FULL_TRACE step must
// name, for every _Send/_Recv, its devices, original tensor and bytes;
// placeviz --run_metadata turns it into exact per-tensor edges (128 bytes
// ps -> each worker); `graphrun run --trace` over grpc:// gives one Chrome
// trace process per task.
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "placement/placement_report.h"
#include "runtime/session.h"
#include "tools/file_util.h"
#include "tools/placeviz.h"
#include "tools/run_command.h"
#include "util/json.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

// w: [4,8] float on ps:0 (initialized by w/Assign), read by y0 on worker 0
// and y1 on worker 1.
tensorflow::GraphDef Model() {
  std::string values;
  for (int i = 0; i < 32; ++i) absl::StrAppend(&values, " float_val: ", i);
  const std::string shape = "dim { size: 4 } dim { size: 8 }";
  return test::ParseGraph(absl::StrCat(
      "node { name: 'w/init' op: 'Const' device: '/job:ps/task:0'"
      " attr { key: 'dtype' value { type: DT_FLOAT } } attr { key: 'value' value { tensor {"
      " dtype: DT_FLOAT tensor_shape { ",
      shape, " } ", values,
      " } } } }\n"
      "node { name: 'w' op: 'VariableV2' device: '/job:ps/task:0'"
      " attr { key: 'dtype' value { type: DT_FLOAT } }"
      " attr { key: 'shape' value { shape { ",
      shape,
      " } } } }\n"
      "node { name: 'w/Assign' op: 'Assign' input: 'w' input: 'w/init'"
      " attr { key: 'T' value { type: DT_FLOAT } } }\n"
      "node { name: 'w/read' op: 'Identity' input: 'w' device: '/job:ps/task:0'"
      " attr { key: 'T' value { type: DT_FLOAT } } }\n"
      "node { name: 'y0' op: 'Mul' input: 'w/read' input: 'w/read'"
      " device: '/job:worker/task:0' attr { key: 'T' value { type: DT_FLOAT } } }\n"
      "node { name: 'y1' op: 'AddV2' input: 'w/read' input: 'w/read'"
      " device: '/job:worker/task:1' attr { key: 'T' value { type: DT_FLOAT } } }\n"));
}

class TrafficTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { distributed::RegisterGrpcSession(); }

  void SetUp() override {
    distributed::LocalClusterOptions o;
    o.jobs = {{"ps", 1}, {"worker", 2}};
    o.server.intra_op_threads = 1;
    o.server.inter_op_threads = 2;
    auto c = distributed::LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
    // Initialize w once; it lives on the PS for every later session.
    auto s = Connect();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->Create(Model()).ok());
    ASSERT_TRUE(s->Run({}, {}, {"w/Assign"}).ok());
    ASSERT_TRUE(s->Close().ok());
  }

  std::unique_ptr<Session> Connect() {
    SessionOptions so;
    so.target = cluster_->target("worker", 0);
    auto s = NewSession(so);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::unique_ptr<distributed::LocalCluster> cluster_;
};

// A `_noinline` function whose MatMul asks for the PS, called on worker 0:
// a call frame runs on its caller's task, so the body is inlined and its
// MatMul runs on the PS, fed from worker 0 and sending its product back
// (partitioned with _Send/_Recv as the rest of the graph).
TEST_F(TrafficTest, ACallWhoseBodyAsksForAnotherTaskRunsThere) {
  auto session = Connect();
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session
                  ->Create(test::ParseGraph(R"(
node { name: "x" op: "Const" device: "/job:worker/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } }
    float_val: 1 float_val: 2 float_val: 3 float_val: 4 } } } }
node { name: "c" op: "mm" input: "x" device: "/job:worker/task:0" }
library {
  function {
    signature { name: "mm" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "sum" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "m" op: "MatMul" input: "a" input: "a" device: "/job:ps/task:0"
               attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "s" op: "AddV2" input: "m:product:0" input: "a"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "sum" value: "s:z:0" }
  }
}
)"))
                  .ok());
  tensorflow::RunOptions ro;
  ro.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
  tensorflow::RunMetadata md;
  auto r = session->Run(ro, {}, {"c:0"}, {}, &md);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(session->Close().ok());
  // x @ x + x.
  EXPECT_EQ((*r)[0].DebugString(), "Tensor<float, [2,2]: 8 12 18 26>");
  std::map<std::string, std::string> device_of;  // node -> device that ran it
  std::string labels;
  for (const auto& dev : md.step_stats().dev_stats()) {
    for (const auto& ns : dev.node_stats()) {
      device_of[ns.node_name()] = dev.device();
      absl::StrAppend(&labels, ns.timeline_label(), "\n");
    }
  }
  EXPECT_EQ(device_of["c/m"], "/job:ps/replica:0/task:0/device:CPU:0") << labels;
  EXPECT_EQ(device_of["c/s"], "/job:worker/replica:0/task:0/device:CPU:0") << labels;
  // No call frame ran.
  EXPECT_THAT(labels, ::testing::Not(HasSubstr("PartitionedCall"))) << labels;
}

// Over gRPC too: a body node that asks for a task the cluster lacks is an
// error naming its function, and a function given at Create stays callable
// from a graph added by Extend (TensorFlow keeps a session's library);
// redefining it differently is refused, naming it.
TEST_F(TrafficTest, ErrorsNameTheFunctionAndExtendKeepsTheLibrary) {
  auto session = Connect();
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session
                  ->Create(test::ParseGraph(R"(
node { name: "x" op: "Const" device: "/job:worker/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 3 } } } }
node { name: "far" op: "lost" input: "x" }
library {
  function {
    signature { name: "lost" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "y" type: DT_FLOAT } }
    node_def { name: "n" op: "Neg" input: "a" device: "/job:ps/task:5"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "n:y:0" }
  }
  function {
    signature { name: "twice" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "y" type: DT_FLOAT } }
    node_def { name: "s" op: "AddV2" input: "a" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "s:z:0" }
  }
}
)"))
                  .ok());
  auto r = session->Run({}, {"far"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(),
              HasSubstr("node 'far/n' of function 'lost' (called by 'far') (op Neg)"));
  EXPECT_THAT(r.status().message(), HasSubstr("/job:ps/task:5"));

  absl::Status extended = session->Extend(test::ParseGraph(R"(
node { name: "near" op: "twice" input: "x" device: "/job:worker/task:1" })"));
  ASSERT_TRUE(extended.ok()) << extended;
  r = session->Run({}, {"near"}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].DebugString(), "Tensor<float, []: 6>");

  extended = session->Extend(test::ParseGraph(R"(
library { function {
  signature { name: "twice" input_arg { name: "a" type: DT_FLOAT }
              output_arg { name: "y" type: DT_FLOAT } }
  ret { key: "y" value: "a" }
} })"));
  EXPECT_EQ(extended.code(), absl::StatusCode::kInvalidArgument) << extended;
  EXPECT_THAT(extended.message(), HasSubstr("function 'twice' is already defined, differently"));
  ASSERT_TRUE(session->Close().ok());
}

TEST_F(TrafficTest, RunMetadataNamesEveryTransferAndPlacevizShowsExactBytes) {
  auto session = Connect();
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Create(Model()).ok());
  tensorflow::RunOptions ro;
  ro.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
  ro.set_output_partition_graphs(true);
  tensorflow::RunMetadata md;
  auto r = session->Run(ro, {}, {"y0", "y1"}, {}, &md);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(session->Close().ok());

  // Every _Send/_Recv in the step stats says what crossed, where, how big:
  // w/read to each worker, and the fetch y1 from worker 1 to worker 0 (the
  // client's task, where the master collects fetches).
  int recvs = 0, sends = 0;
  for (const auto& dev : md.step_stats().dev_stats()) {
    for (const auto& ns : dev.node_stats()) {
      auto rec = placement::ParseTransferLabel(ns.timeline_label());
      if (absl::IsNotFound(rec.status())) continue;
      ASSERT_TRUE(rec.ok()) << rec.status() << ns.timeline_label();
      (rec->is_recv ? recvs : sends)++;
      EXPECT_EQ(rec->bytes, 128) << ns.timeline_label();
      EXPECT_EQ(dev.device(), rec->is_recv ? rec->recv_device : rec->send_device);
      if (rec->src_tensor == "w/read:0") {
        EXPECT_EQ(rec->send_device, "/job:ps/replica:0/task:0/device:CPU:0");
        EXPECT_THAT(rec->recv_device, HasSubstr("/job:worker/replica:0/task:"));
      } else {
        EXPECT_EQ(rec->src_tensor, "y1:0") << ns.timeline_label();
        EXPECT_EQ(rec->send_device, "/job:worker/replica:0/task:1/device:CPU:0");
        EXPECT_EQ(rec->recv_device, "/job:worker/replica:0/task:0/device:CPU:0");
      }
    }
  }
  EXPECT_EQ(recvs, 3);
  EXPECT_EQ(sends, 3);

  const std::string path = TempPath("step.pb");
  std::string bytes;
  ASSERT_TRUE(md.SerializeToString(&bytes));
  ASSERT_TRUE(tools::WriteStringToFile(path, bytes).ok());
  std::ostringstream out, err;
  ASSERT_EQ(tools::PlacevizMain({"--run_metadata=" + path, "--format=json"}, out, err), 0)
      << err.str();
  auto json = ParseJson(out.str());
  ASSERT_TRUE(json.ok()) << json.status() << out.str();
  EXPECT_TRUE(json->Find("measured")->bool_value());
  std::map<std::string, std::string> edges;  // "src -> dst tensor" -> bytes
  for (const JsonValue& e : json->Find("edges")->items()) {
    edges[absl::StrCat(e.Find("src_task")->string_value(), " -> ",
                       e.Find("dst_task")->string_value(), " ", e.Find("tensor")->string_value())] =
        e.Find("bytes_per_step")->number_text();
  }
  EXPECT_EQ(edges, (std::map<std::string, std::string>{
                       {"/job:ps/task:0 -> /job:worker/task:0 w/read:0", "128"},
                       {"/job:ps/task:0 -> /job:worker/task:1 w/read:0", "128"},
                       {"/job:worker/task:1 -> /job:worker/task:0 y1:0", "128"}}))
      << out.str();
  std::map<std::string, const JsonValue*> tasks;
  for (const JsonValue& t : json->Find("tasks")->items()) {
    tasks[t.Find("task")->string_value()] = &t;
  }
  ASSERT_EQ(tasks.size(), 3u) << out.str();
  const JsonValue* ps = tasks["/job:ps/task:0"];
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(ps->Find("bytes")->number_text(), "128");  // w, from the partition graphs
  EXPECT_EQ(ps->Find("send_bytes_per_step")->number_text(), "256");
  ASSERT_EQ(ps->Find("variables")->items().size(), 1u);
  EXPECT_EQ(ps->Find("variables")->items()[0].Find("name")->string_value(), "w");
  EXPECT_EQ(tasks["/job:worker/task:1"]->Find("recv_bytes_per_step")->number_text(), "128");

  // The other formats render the same measured view.
  for (const char* format : {"text", "dot", "html"}) {
    std::ostringstream o, e;
    ASSERT_EQ(
        tools::PlacevizMain({"--run_metadata=" + path, std::string("--format=") + format}, o, e), 0)
        << format << ": " << e.str();
    EXPECT_THAT(o.str(), HasSubstr("w/read:0")) << format;
    EXPECT_THAT(o.str(), HasSubstr("128 B")) << format;
  }
}

TEST_F(TrafficTest, RunCommandTraceHasOneProcessPerTask) {
  const std::string graph_path = TempPath("model.pbtxt");
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(Model(), &text));
  ASSERT_TRUE(tools::WriteStringToFile(graph_path, text).ok());
  tools::RunRequest req;
  req.graph_path = graph_path;
  req.fetches = {"y0:0", "y1:0"};
  req.target = cluster_->target("worker", 0);
  req.trace_path = TempPath("trace.json");
  req.run_metadata_path = TempPath("step.pbtxt");
  req.timeout_ms = 60000;
  std::ostringstream out;
  absl::Status s = tools::ExecuteRun(req, out);
  ASSERT_TRUE(s.ok()) << s;

  auto trace_text = tools::ReadFileToString(req.trace_path);
  ASSERT_TRUE(trace_text.ok());
  auto trace = ParseJson(*trace_text);
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::map<std::string, std::string> process;        // pid -> task
  std::map<std::string, std::set<std::string>> ops;  // task pid -> node names
  std::set<std::string> transfer_labels;
  for (const JsonValue& e : trace->Find("traceEvents")->items()) {
    const std::string pid = e.Find("pid")->number_text();
    if (e.Find("name")->string_value() == "process_name") {
      EXPECT_EQ(process.count(pid), 0u) << "two process rows with pid " << pid;
      process[pid] = e.Find("args")->Find("name")->string_value();
    } else if (e.Find("ph")->string_value() == "X") {
      ops[pid].insert(e.Find("name")->string_value());
      if (const JsonValue* l = e.Find("args")->Find("label")) {
        transfer_labels.insert(l->string_value());
      }
    }
  }
  std::set<std::string> task_names;
  for (const auto& [pid, task] : process) task_names.insert(task);
  EXPECT_EQ(task_names,
            (std::set<std::string>{"/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"}));
  for (const auto& [pid, task] : process) {
    EXPECT_FALSE(ops[pid].empty()) << task << " has no events";
    const std::string expected = task == "/job:worker/task:0"   ? "y0"
                                 : task == "/job:worker/task:1" ? "y1"
                                                                : "w/read";
    EXPECT_TRUE(ops[pid].count(expected)) << task;
  }
  EXPECT_EQ(transfer_labels.size(), 6u);  // w/read twice and y1, send + recv each
  for (const std::string& l : transfer_labels) EXPECT_THAT(l, HasSubstr("bytes=128"));

  // And the .pbtxt RunMetadata reads back in placeviz.
  std::ostringstream o, e;
  ASSERT_EQ(tools::PlacevizMain({"--run_metadata=" + req.run_metadata_path}, o, e), 0) << e.str();
  EXPECT_THAT(o.str(), HasSubstr("/job:worker/task:1"));
}

// A multi-device local run: one task, so the trace has one process with a
// thread row per device, and the measured view falls back to devices.
TEST(LocalTrafficTest, MultiDeviceLocalRun) {
  tensorflow::GraphDef g = test::ParseGraph(R"pb(
    node {
      name: "x"
      op: "Const"
      device: "/device:CPU:0"
      attr {
        key: "dtype"
        value { type: DT_FLOAT }
      }
      attr {
        key: "value"
        value {
          tensor {
            dtype: DT_FLOAT
            tensor_shape { dim { size: 3 } }
            float_val: 1
            float_val: 2
            float_val: 3
          }
        }
      }
    }
    node {
      name: "y"
      op: "Identity"
      input: "x"
      device: "/device:CPU:1"
      attr {
        key: "T"
        value { type: DT_FLOAT }
      }
    }
  )pb");
  const std::string graph_path = TempPath("local.pbtxt");
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(g, &text));
  ASSERT_TRUE(tools::WriteStringToFile(graph_path, text).ok());
  tools::RunRequest req;
  req.graph_path = graph_path;
  req.fetches = {"y:0"};
  req.device_count = {{"CPU", 2}};
  req.trace_path = TempPath("local_trace.json");
  req.run_metadata_path = TempPath("local_step.pb");
  std::ostringstream out;
  absl::Status s = tools::ExecuteRun(req, out);
  ASSERT_TRUE(s.ok()) << s;
  auto trace = ParseJson(*tools::ReadFileToString(req.trace_path));
  ASSERT_TRUE(trace.ok());
  int processes = 0;
  std::set<std::string> threads;
  for (const JsonValue& e : trace->Find("traceEvents")->items()) {
    const std::string name = e.Find("name")->string_value();
    if (name == "process_name") ++processes;
    if (name == "thread_name")
      threads.insert(e.Find("args")->Find("name")->string_value().substr(0, 5));
  }
  EXPECT_EQ(processes, 1);
  EXPECT_EQ(threads, (std::set<std::string>{"CPU:0", "CPU:1"}));

  std::ostringstream o, e;
  ASSERT_EQ(tools::PlacevizMain({"--run_metadata=" + req.run_metadata_path, "--format=json"}, o, e),
            0)
      << e.str();
  EXPECT_THAT(o.str(), HasSubstr("\"tensor\": \"x:0\", \"bytes_per_step\": 12"));
}

}  // namespace
}  // namespace graphrun
