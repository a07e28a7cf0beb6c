#include "tools/trace.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "util/json.h"

namespace graphrun {
namespace tools {
namespace {

tensorflow::StepStats Stats(const std::string& text) {
  tensorflow::StepStats s;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &s));
  return s;
}

TEST(TraceTest, DevicesThreadsAndCompleteEvents) {
  auto stats = Stats(R"pb(
    dev_stats {
      device: "/job:localhost/replica:0/task:0/device:CPU:0"
      thread_names { key: 7 value: "inter_op_1" }
      thread_names { key: 3 value: "inter_op_0" }
      node_stats {
        node_name: "MatMul"
        timeline_label: "MatMul = MatMul(x, W)"
        all_start_micros: 1000
        all_end_rel_micros: 42
        thread_id: 3
        output {
          slot: 0
          tensor_description {
            dtype: DT_FLOAT
            shape {
              dim { size: 2 }
              dim { size: 2 }
            }
          }
        }
      }
      node_stats { node_name: "x" all_start_nanos: 1000500 all_end_rel_nanos: 1250 thread_id: 7 }
    }
    dev_stats {
      device: "/job:localhost/replica:0/task:0/device:CPU:1"
      node_stats { node_name: "add" all_start_micros: 1050 all_end_rel_micros: 2 }
    }
  )pb");
  tensorflow::GraphDef graph;
  auto* x = graph.add_node();
  x->set_name("x");
  x->set_op("Placeholder");
  // One process (one task), a thread row per (device, thread).
  EXPECT_EQ(StepStatsToChromeTrace(stats, &graph),
            "{\"traceEvents\": [\n"
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
            "{\"name\": \"/job:localhost/task:0\"}},\n"
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 0, "
            "\"args\": {\"name\": \"CPU:0 inter_op_0\"}},\n"
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 1, "
            "\"args\": {\"name\": \"CPU:0 inter_op_1\"}},\n"
            "{\"name\": \"MatMul\", \"cat\": \"Op\", \"ph\": \"X\", \"pid\": 0, "
            "\"tid\": 0, \"ts\": 1000, \"dur\": 42, \"args\": {\"op\": \"MatMul\", "
            "\"device\": \"/job:localhost/replica:0/task:0/device:CPU:0\", "
            "\"outputs\": [\"float[2,2]\"]}},\n"
            "{\"name\": \"x\", \"cat\": \"Op\", \"ph\": \"X\", \"pid\": 0, "
            "\"tid\": 1, \"ts\": 1000.5, \"dur\": 1.25, \"args\": {\"op\": "
            "\"Placeholder\", \"device\": \"/job:localhost/replica:0/task:0/device:CPU:0\", "
            "\"outputs\": []}},\n"
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 2, "
            "\"args\": {\"name\": \"CPU:1 thread 0\"}},\n"
            "{\"name\": \"add\", \"cat\": \"Op\", \"ph\": \"X\", \"pid\": 0, "
            "\"tid\": 2, \"ts\": 1050, \"dur\": 2, \"args\": {\"op\": \"\", "
            "\"device\": \"/job:localhost/replica:0/task:0/device:CPU:1\", "
            "\"outputs\": []}}\n"
            "]}\n");
}

TEST(TraceTest, OneProcessPerTaskAcrossDevicesOfATask) {
  auto stats = Stats(R"pb(
    dev_stats {
      device: "/job:ps/replica:0/task:0/device:CPU:0"
      node_stats {
        node_name: "s"
        timeline_label: "s = _Send(e from /job:ps/replica:0/task:0/device:CPU:0 to /job:worker/replica:0/task:1/device:CPU:0; src_tensor=w:0; bytes=4)"
        thread_id: 5
      }
    }
    dev_stats {
      device: "/job:worker/replica:0/task:1/device:CPU:0"
      node_stats { node_name: "a" thread_id: 5 }
    }
    dev_stats {
      device: "/job:worker/replica:0/task:1/device:GPU:0"
      node_stats { node_name: "b" thread_id: 5 }
    }
  )pb");
  auto json = ParseJson(StepStatsToChromeTrace(stats));
  ASSERT_TRUE(json.ok()) << json.status();
  std::map<std::string, std::string> process;          // pid -> name
  std::set<std::pair<std::string, std::string>> rows;  // (pid, tid) of X events
  std::string label;
  for (const JsonValue& e : json->Find("traceEvents")->items()) {
    const std::string pid = e.Find("pid")->number_text();
    if (e.Find("name")->string_value() == "process_name") {
      process[pid] = e.Find("args")->Find("name")->string_value();
    } else if (e.Find("ph")->string_value() == "X") {
      rows.insert({pid, e.Find("tid")->number_text()});
      if (const JsonValue* l = e.Find("args")->Find("label")) label = l->string_value();
    }
  }
  EXPECT_EQ(process, (std::map<std::string, std::string>{{"0", "/job:ps/task:0"},
                                                         {"1", "/job:worker/task:1"}}));
  EXPECT_EQ(rows,
            (std::set<std::pair<std::string, std::string>>{{"0", "0"}, {"1", "0"}, {"1", "1"}}));
  EXPECT_NE(label.find("bytes=4"), std::string::npos);
}

TEST(TraceTest, IsValidJsonAndRepeatedDevicesShareAPid) {
  auto stats = Stats(R"pb(
    dev_stats {
      device: "d\"0"
      node_stats { node_name: "a" }
    }
    dev_stats {
      device: "d\"0"
      node_stats { node_name: "b" }
    }
  )pb");
  std::string trace = StepStatsToChromeTrace(stats);
  auto json = ParseJson(trace);
  ASSERT_TRUE(json.ok()) << json.status() << trace;
  const JsonValue* events = json->Find("traceEvents");
  ASSERT_NE(events, nullptr);
  ASSERT_EQ(events->items().size(), 4u);  // process, thread, a, b
  EXPECT_EQ(events->items()[3].Find("pid")->number_text(), "0");
  EXPECT_EQ(events->items()[0].Find("args")->Find("name")->string_value(), "d\"0");
}

// Two steps of one transfer merged: two arrows, each from a send to the
// receive of the same step (time order), on the right processes.
TEST(TraceTest, FlowArrowsFromEachSendToItsRecv) {
  const std::string send_label =
      "s = _Send(e from /job:ps/replica:0/task:0/device:CPU:0 to "
      "/job:worker/replica:0/task:1/device:CPU:0; src_tensor=w:0; bytes=4)";
  const std::string recv_label =
      "r = _Recv(e from /job:ps/replica:0/task:0/device:CPU:0 to "
      "/job:worker/replica:0/task:1/device:CPU:0; src_tensor=w:0; bytes=4)";
  tensorflow::StepStats stats;
  auto add = [](tensorflow::DeviceStepStats* dev, const std::string& name, int64_t start,
                int64_t dur, const std::string& label) {
    auto* ns = dev->add_node_stats();
    ns->set_node_name(name);
    ns->set_all_start_micros(start);
    ns->set_all_end_rel_micros(dur);
    ns->set_timeline_label(label);
  };
  auto* ps = stats.add_dev_stats();
  ps->set_device("/job:ps/replica:0/task:0/device:CPU:0");
  add(ps, "s", 100, 5, send_label);
  add(ps, "s", 300, 5, send_label);
  auto* worker = stats.add_dev_stats();
  worker->set_device("/job:worker/replica:0/task:1/device:CPU:0");
  add(worker, "r", 310, 20, recv_label);
  add(worker, "r", 90, 30, recv_label);
  auto json = ParseJson(StepStatsToChromeTrace(stats));
  ASSERT_TRUE(json.ok()) << json.status();
  std::map<std::string, std::pair<std::string, std::string>> starts, ends;  // id -> (pid, ts)
  for (const JsonValue& e : json->Find("traceEvents")->items()) {
    const std::string ph = e.Find("ph")->string_value();
    if (ph != "s" && ph != "f") continue;
    EXPECT_EQ(e.Find("cat")->string_value(), "transfer");
    EXPECT_EQ(e.Find("name")->string_value(), "e");
    auto& into = ph == "s" ? starts : ends;
    into[e.Find("id")->number_text()] = {e.Find("pid")->number_text(), e.Find("ts")->number_text()};
    if (ph == "f") {
      EXPECT_EQ(e.Find("bp")->string_value(), "e");
    }
  }
  EXPECT_EQ(starts, (std::map<std::string, std::pair<std::string, std::string>>{
                        {"0", {"0", "100"}}, {"1", {"0", "300"}}}));
  EXPECT_EQ(ends, (std::map<std::string, std::pair<std::string, std::string>>{
                      {"0", {"1", "120"}}, {"1", {"1", "330"}}}));
}

TEST(TraceTest, EmptyStats) {
  EXPECT_EQ(StepStatsToChromeTrace(tensorflow::StepStats()), "{\"traceEvents\": [\n\n]}\n");
  EXPECT_TRUE(ParseJson(StepStatsToChromeTrace(tensorflow::StepStats())).ok());
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
