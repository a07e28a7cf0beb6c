#include "tools/placeviz.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "graph/ops/all_ops.h"
#include "gtest/gtest.h"
#include "placement/model_testlib.h"
#include "tools/file_util.h"
#include "util/json.h"

namespace graphrun {
namespace tools {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

// Writes `def` as text; also into the test's undeclared outputs, for the
// screenshot script and docs.
std::string WriteModel(const std::string& name, const tensorflow::GraphDef& def) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(def, &text);
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteStringToFile(path, text).ok());
  if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    (void)WriteStringToFile(std::string(dir) + "/" + name, text);
  }
  return path;
}

struct Result {
  int code;
  std::string out, err;
};

Result Placeviz(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = PlacevizMain(args, out, err);
  return {code, out.str(), err.str()};
}

const JsonValue* FindTask(const JsonValue& report, const std::string& task) {
  for (const JsonValue& t : report.Find("tasks")->items()) {
    if (t.Find("task")->string_value() == task) return &t;
  }
  return nullptr;
}

TEST(PlacevizTest, JsonSchemaAndValues) {
  const std::string model =
      WriteModel("embedding_small.pbtxt", placement::testing::EmbeddingModel(1000, 16));
  Result r = Placeviz({model, "--ps_tasks=2", "--strategy=round_robin", "--format=json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto json = ParseJson(r.out);
  ASSERT_TRUE(json.ok()) << json.status() << r.out;
  EXPECT_EQ(json->Find("strategy")->string_value(), "round_robin");
  EXPECT_EQ(json->Find("batch_size")->number_text(), "1");
  ASSERT_EQ(json->Find("tasks")->items().size(), 3u);
  // Creation order: embedding (task 0), dense1/kernel (1), dense1/bias (0),
  // logits/kernel (1), logits/bias (0).
  const JsonValue* ps0 = FindTask(*json, "/job:ps/task:0");
  ASSERT_NE(ps0, nullptr);
  const JsonValue& emb = ps0->Find("variables")->items()[0];
  EXPECT_EQ(emb.Find("name")->string_value(), "embedding");
  EXPECT_EQ(emb.Find("shape")->Serialize(), "[1000, 16]");
  EXPECT_EQ(emb.Find("dtype")->string_value(), "DT_FLOAT");
  EXPECT_EQ(emb.Find("bytes")->number_text(), "64000");
  // embedding 64000 + dense1/bias 512 + logits/bias 40.
  EXPECT_EQ(ps0->Find("bytes")->number_text(), "64552");
  const JsonValue* ps1 = FindTask(*json, "/job:ps/task:1");
  // dense1/kernel 128x128 + logits/kernel 128x10.
  EXPECT_EQ(ps1->Find("bytes")->number_text(), "70656");
  ASSERT_NE(FindTask(*json, "/job:worker/task:0"), nullptr);
  EXPECT_EQ(FindTask(*json, "/job:worker/task:0")->Find("bytes")->number_text(), "0");
  EXPECT_THAT(json->Find("imbalance")->number_text(), HasSubstr("1.04"));
  // embedding/read runs on the worker: the whole table crosses each step.
  bool found = false;
  for (const JsonValue& e : json->Find("edges")->items()) {
    if (e.Find("tensor")->string_value() == "embedding:0" &&
        e.Find("dst_task")->string_value() == "/job:worker/task:0") {
      found = true;
      EXPECT_EQ(e.Find("src_task")->string_value(), "/job:ps/task:0");
      EXPECT_EQ(e.Find("bytes_per_step")->number_text(), "64000");
    }
  }
  EXPECT_TRUE(found) << r.out;
}

TEST(PlacevizTest, BalancedShowsShardsAndBatchSize) {
  const std::string model = WriteModel("embedding.pbtxt", placement::testing::EmbeddingModel());
  Result r = Placeviz({model, "--ps_tasks=3", "--strategy=balanced", "--format=json",
                       "--batch_size=32", "--fetch=logits/BiasAdd"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto json = ParseJson(r.out);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->Find("batch_size")->number_text(), "32");
  EXPECT_LE(std::stod(json->Find("imbalance")->number_text()), 1.10);
  int shards = 0;
  for (const JsonValue& t : json->Find("tasks")->items()) {
    for (const JsonValue& v : t.Find("variables")->items()) {
      shards += v.Find("name")->string_value().rfind("embedding/part_", 0) == 0;
    }
  }
  EXPECT_EQ(shards, 3);
  // Gathered rows only: 32 examples x 8 ids x 64 floats per shard.
  for (const JsonValue& e : json->Find("edges")->items()) {
    const std::string& tensor = e.Find("tensor")->string_value();
    if (tensor.find("embedding_lookup/part_") == 0 &&
        tensor.find("/gather:0") != std::string::npos) {
      EXPECT_EQ(e.Find("bytes_per_step")->number_text(), "65536") << e.Serialize();
    }
  }
}

TEST(PlacevizTest, TextAndCompare) {
  const std::string model = WriteModel("cifar.pbtxt", placement::testing::CifarModel());
  // CIFAR needs Conv2D: when graph/ops lacks it the file does not import.
  auto conv = DefaultOpRegistry().LookUp("Conv2D");
  const std::string m =
      conv ? model : WriteModel("embedding.pbtxt", placement::testing::EmbeddingModel());
  Result text = Placeviz({m, "--ps_tasks=4"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("imbalance (max/mean bytes over PS tasks)"));
  EXPECT_THAT(text.out, HasSubstr("/job:ps/task:3"));
  Result cmp = Placeviz({m, "--ps_tasks=4", "--compare=round_robin,greedy_bytes,balanced"});
  ASSERT_EQ(cmp.code, 0) << cmp.err;
  EXPECT_THAT(cmp.out, HasSubstr("round_robin"));
  EXPECT_THAT(cmp.out, HasSubstr("balanced"));
  EXPECT_THAT(cmp.out, HasSubstr("imbalance (max/mean)"));
  std::cout << cmp.out;
  Result none = Placeviz({m, "--ps_tasks=4", "--compare=,"});
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(none.err, "InvalidArgument: --compare: expected strategies S1,S2,..., got ','\n");
}

TEST(PlacevizTest, DotParsesAndHtmlIsSelfContained) {
  const std::string model = WriteModel("embedding.pbtxt", placement::testing::EmbeddingModel());
  Result dot = Placeviz({model, "--ps_tasks=3", "--strategy=balanced", "--format=dot"});
  ASSERT_EQ(dot.code, 0) << dot.err;
  EXPECT_THAT(dot.out, HasSubstr("subgraph cluster_0"));
  if (access("/usr/bin/dot", X_OK) != 0) GTEST_SKIP() << "graphviz not installed";
  auto svg = DotToSvg(dot.out);
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_THAT(*svg, HasSubstr("<svg"));
  const std::string html_path = TempPath("placement.html");
  Result html = Placeviz({model, "--ps_tasks=3", "--strategy=balanced", "--format=html",
                          "--out=" + html_path, "--fetch=logits/BiasAdd"});
  ASSERT_EQ(html.code, 0) << html.err;
  auto page = ReadFileToString(html_path);
  ASSERT_TRUE(page.ok());
  EXPECT_THAT(*page, HasSubstr("<svg"));
  EXPECT_THAT(*page, HasSubstr("embedding/part_2"));
  EXPECT_THAT(*page, HasSubstr("</html>"));
  EXPECT_EQ(page->find("<script"), std::string::npos);
  if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    (void)WriteStringToFile(std::string(dir) + "/placement.html", *page);
  }
}

TEST(PlacevizTest, Errors) {
  const std::string model =
      WriteModel("embedding_small.pbtxt", placement::testing::EmbeddingModel(100, 4));
  EXPECT_EQ(Placeviz({model}).code, 2);
  EXPECT_EQ(Placeviz({model, "--ps_tasks=2", "--format=png"}).code, 2);
  EXPECT_EQ(Placeviz({model, "--ps_tasks=2", "--cluster={\"ps\": [\"a\"]}"}).code, 2);
  Result unknown = Placeviz({model, "--ps_tasks=2", "--strategy=nope"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("NotFound: unknown PS strategy 'nope'"));
  Result md = Placeviz({model, "--run_metadata=x.pb"});
  EXPECT_EQ(md.code, 2);
  EXPECT_THAT(md.err, HasSubstr("takes no GRAPH"));
  Result missing = Placeviz({"--run_metadata=" + TempPath("missing.pb")});
  EXPECT_EQ(missing.code, 1);
  const std::string empty = TempPath("empty.pbtxt");
  ASSERT_TRUE(WriteStringToFile(empty, "").ok());
  Result no_stats = Placeviz({"--run_metadata=" + empty});
  EXPECT_EQ(no_stats.code, 1);
  EXPECT_THAT(no_stats.err, HasSubstr("no step stats"));
  Result cluster = Placeviz(
      {model, "--cluster={\"ps\": [\"a:1\", \"b:1\"], \"worker\": [\"c:1\"]}", "--format=json"});
  ASSERT_EQ(cluster.code, 0) << cluster.err;
  EXPECT_THAT(cluster.out, HasSubstr("/job:ps/task:1"));
  Result nops = Placeviz({model, "--cluster={\"worker\": [\"c:1\"]}"});
  EXPECT_EQ(nops.code, 1);
  EXPECT_THAT(nops.err, HasSubstr("no 'ps' job"));
  Result json_compare =
      Placeviz({model, "--ps_tasks=2", "--compare=round_robin,balanced", "--format=json"});
  EXPECT_EQ(json_compare.code, 2);
  EXPECT_THAT(json_compare.err, HasSubstr("--format=json is not available with it"));
  // A fetch past the node's outputs (it was reported as output 0).
  Result past = Placeviz({model, "--ps_tasks=2", "--fetch=logits/BiasAdd:5"});
  EXPECT_EQ(past.code, 1);
  EXPECT_THAT(past.err, HasSubstr("fetch 'logits/BiasAdd:5': node 'logits/BiasAdd' has 1 output"));
  // A bare name of a node without outputs is a target: fine.
  EXPECT_EQ(Placeviz({model, "--ps_tasks=2", "--fetch=init"}).code, 0);
  EXPECT_EQ(Placeviz({model, "--ps_tasks=2", "--fetch=init:0"}).code, 1);
  // Checked as servers check clusters (these were counted as tasks).
  for (const auto& [json, why] : std::vector<std::pair<std::string, std::string>>{
           {R"({"ps": ["not an address", 5, null]})", "'not an address' is not host:port"},
           {R"({"ps": ["a:1", 5]})", "a value is not host:port"},
           {R"({"ps": ["a:1"], "ps": ["b:1", "c:1"]})", "job 'ps' given twice"},
           {R"({"ps": {"-0": "a:1"}})", "bad task index '-0'"},
           {R"({"ps": {"0": "a:1", "00": "b:1"}})", "bad task index '00'"},
           {R"({"ps": ["a:1"], "chief": ["b:1"], "master": ["c:1"]})", "both a 'chief'"}}) {
    Result bad = Placeviz({model, "--cluster=" + json});
    EXPECT_EQ(bad.code, 2) << json;
    EXPECT_THAT(bad.err, HasSubstr(why)) << json;
  }
}

// A hand-written step: w (a [4,8] float on ps:0) read by two workers, one
// recv seen only through its _Send, and a CPU->GPU hop inside worker 1.
TEST(PlacevizTest, MeasuredRunMetadata) {
  const std::string path = TempPath("step.pbtxt");
  ASSERT_TRUE(
      WriteStringToFile(path, R"pb(
        step_stats {
          dev_stats {
            device: "/job:ps/replica:0/task:0/device:CPU:0"
            node_stats {
              node_name: "edge_3_w/read/_send"
              timeline_label: "edge_3_w/read/_send = _Send(edge_3_w/read from /job:ps/replica:0/task:0/device:CPU:0 to /job:worker/replica:0/task:0/device:CPU:0; src_tensor=w/read:0; bytes=128)"
            }
            node_stats {
              node_name: "edge_5_w/read/_send"
              timeline_label: "edge_5_w/read/_send = _Send(edge_5_w/read from /job:ps/replica:0/task:0/device:CPU:0 to /job:worker/replica:0/task:1/device:CPU:0; src_tensor=w/read:0; bytes=128)"
            }
            node_stats { node_name: "w" timeline_label: "w = VariableV2()" }
          }
          dev_stats {
            device: "/job:worker/replica:0/task:0/device:CPU:0"
            node_stats {
              node_name: "edge_3_w/read/_recv"
              timeline_label: "edge_3_w/read/_recv = _Recv(edge_3_w/read from /job:ps/replica:0/task:0/device:CPU:0 to /job:worker/replica:0/task:0/device:CPU:0; src_tensor=w/read:0; bytes=128)"
              output {
                slot: 0
                tensor_description {
                  dtype: DT_FLOAT
                  shape {
                    dim { size: 4 }
                    dim { size: 8 }
                  }
                }
              }
            }
          }
          dev_stats {
            device: "/job:worker/replica:0/task:1/device:GPU:0"
            node_stats {
              node_name: "edge_9_m/_recv"
              timeline_label: "edge_9_m/_recv = _Recv(edge_9_m from /job:worker/replica:0/task:1/device:CPU:0 to /job:worker/replica:0/task:1/device:GPU:0; src_tensor=w/read:0; bytes=128)"
            }
          }
        }
        partition_graphs {
          node {
            name: "w"
            op: "VariableV2"
            device: "/job:ps/replica:0/task:0/device:CPU:0"
            attr {
              key: "dtype"
              value { type: DT_FLOAT }
            }
            attr {
              key: "shape"
              value {
                shape {
                  dim { size: 4 }
                  dim { size: 8 }
                }
              }
            }
          }
        }
      )pb")
          .ok());
  Result r = Placeviz({"--run_metadata=" + path, "--format=json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto json = ParseJson(r.out);
  ASSERT_TRUE(json.ok()) << json.status() << r.out;
  EXPECT_TRUE(json->Find("measured")->bool_value());
  const auto& edges = json->Find("edges")->items();
  ASSERT_EQ(edges.size(), 2u) << r.out;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(edges[i].Find("src_task")->string_value(), "/job:ps/task:0");
    EXPECT_EQ(edges[i].Find("dst_task")->string_value(), "/job:worker/task:" + std::to_string(i));
    EXPECT_EQ(edges[i].Find("tensor")->string_value(), "w/read:0");
    EXPECT_EQ(edges[i].Find("bytes_per_step")->number_text(), "128");
  }
  const JsonValue* ps = FindTask(*json, "/job:ps/task:0");
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(ps->Find("bytes")->number_text(), "128");
  EXPECT_EQ(ps->Find("send_bytes_per_step")->number_text(), "256");
  Result text = Placeviz({"--run_metadata=" + path});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("measured"));
  EXPECT_THAT(text.out, HasSubstr("w/read:0"));
  Result dot = Placeviz({"--run_metadata=" + path, "--format=dot"});
  ASSERT_EQ(dot.code, 0) << dot.err;
  EXPECT_THAT(dot.out, HasSubstr("128 B/step"));
}

// Edges traced to variables: w's value goes out to worker 0 through
// w/read, and worker 0's gradient comes back through an Identity into
// ApplyGradientDescent on w; a control edge is no variable's. The pairs
// sum the edges of each direction.
TEST(PlacevizTest, MeasuredTrafficPerVariableAndTaskPair) {
  const std::string path = TempPath("traced.pbtxt");
  ASSERT_TRUE(
      WriteStringToFile(path, R"pb(
        step_stats {
          dev_stats {
            device: "/job:ps/replica:0/task:0/device:CPU:0"
            node_stats {
              node_name: "edge_3_w/read/_send"
              timeline_label: "edge_3_w/read/_send = _Send(edge_3_w/read from /job:ps/replica:0/task:0/device:CPU:0 to /job:worker/replica:0/task:0/device:CPU:0; src_tensor=w/read:0; bytes=128)"
            }
            node_stats {
              node_name: "edge_7_g/_recv"
              timeline_label: "edge_7_g/_recv = _Recv(edge_7_g from /job:worker/replica:0/task:0/device:CPU:0 to /job:ps/replica:0/task:0/device:CPU:0; src_tensor=g:0; bytes=128)"
            }
            node_stats {
              node_name: "edge_8_c/_recv"
              timeline_label: "edge_8_c/_recv = _Recv(edge_8_c from /job:worker/replica:0/task:0/device:CPU:0 to /job:ps/replica:0/task:0/device:CPU:0; src_tensor=^c; bytes=4)"
            }
          }
        }
        partition_graphs {
          node {
            name: "w"
            op: "VariableV2"
            device: "/job:ps/replica:0/task:0/device:CPU:0"
            attr {
              key: "dtype"
              value { type: DT_FLOAT }
            }
            attr {
              key: "shape"
              value {
                shape {
                  dim { size: 4 }
                  dim { size: 8 }
                }
              }
            }
          }
          node {
            name: "w/read"
            op: "Identity"
            input: "w"
            device: "/job:ps/replica:0/task:0/device:CPU:0"
          }
          node {
            name: "edge_7_g/_recv"
            op: "_Recv"
            device: "/job:ps/replica:0/task:0/device:CPU:0"
            attr {
              key: "tensor_name"
              value { s: "edge_7_g" }
            }
          }
          node {
            name: "g/identity"
            op: "Identity"
            input: "edge_7_g/_recv"
            device: "/job:ps/replica:0/task:0/device:CPU:0"
          }
          node { name: "lr" op: "Const" device: "/job:ps/replica:0/task:0/device:CPU:0" }
          node {
            name: "apply"
            op: "ApplyGradientDescent"
            input: "w"
            input: "lr"
            input: "g/identity"
            device: "/job:ps/replica:0/task:0/device:CPU:0"
          }
        }
      )pb")
          .ok());
  Result r = Placeviz({"--run_metadata=" + path, "--format=json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto json = ParseJson(r.out);
  ASSERT_TRUE(json.ok()) << json.status() << r.out;
  const JsonValue* ps = FindTask(*json, "/job:ps/task:0");
  ASSERT_NE(ps, nullptr);
  const auto& vars = ps->Find("variables")->items();
  ASSERT_EQ(vars.size(), 1u) << r.out;
  EXPECT_EQ(vars[0].Find("read_bytes_per_step")->number_text(), "128");
  EXPECT_EQ(vars[0].Find("update_bytes_per_step")->number_text(), "128");
  std::map<std::string, std::string> variable_of;
  for (const JsonValue& e : json->Find("edges")->items()) {
    variable_of[e.Find("tensor")->string_value()] = e.Find("variable")->string_value();
  }
  EXPECT_EQ(variable_of,
            (std::map<std::string, std::string>{{"w/read:0", "w"}, {"g:0", "w"}, {"^c", ""}}));
  const auto& pairs = json->Find("pairs")->items();
  ASSERT_EQ(pairs.size(), 2u) << r.out;
  EXPECT_EQ(pairs[0].Find("src_task")->string_value(), "/job:ps/task:0");
  EXPECT_EQ(pairs[0].Find("dst_task")->string_value(), "/job:worker/task:0");
  EXPECT_EQ(pairs[0].Find("bytes_per_step")->number_text(), "128");
  EXPECT_EQ(pairs[0].Find("edges")->number_text(), "1");
  EXPECT_EQ(pairs[1].Find("src_task")->string_value(), "/job:worker/task:0");
  EXPECT_EQ(pairs[1].Find("bytes_per_step")->number_text(), "132");
  EXPECT_EQ(pairs[1].Find("edges")->number_text(), "2");

  Result text = Placeviz({"--run_metadata=" + path});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("read      128 B  update      128 B"));
  EXPECT_THAT(text.out, HasSubstr("g:0                                             128 B  (w)"));
  EXPECT_THAT(text.out, HasSubstr("task pairs (bytes per step):\n"
                                  "  /job:ps/task:0         -> /job:worker/task:0            128 B"
                                  "  1 edges\n"));

  // DOT: each variable's box carries its traffic, and one bold edge per
  // pair carries the pair's total.
  Result dot = Placeviz({"--run_metadata=" + path, "--format=dot"});
  ASSERT_EQ(dot.code, 0) << dot.err;
  EXPECT_THAT(dot.out, HasSubstr("read 128 B, update 128 B /step"));
  EXPECT_THAT(dot.out, HasSubstr("t0_ops -> t1_ops [style=bold, color=\"#2c3e50\", penwidth=5.9, "
                                 "label=\"total 128 B/step\\n1 edge\"]"));
  EXPECT_THAT(dot.out, HasSubstr("t1_ops -> t0_ops [style=bold, color=\"#2c3e50\", penwidth=6.0, "
                                 "label=\"total 132 B/step\\n2 edges\"]"));
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
