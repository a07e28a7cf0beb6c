// The op census: which ops a set of TensorFlow graphs use, and whether
// graphrun runs them. Reads GraphDef files (.pb, .pbtxt), SavedModel
// directories and SavedModel text files; counts every node of each graph
// and of its function library; prints a Markdown table (docs/op_census.md)
// of op, graphs, nodes and status:
//   kernel     a CPU kernel is registered;
//   lowered    a call or functional op, or a library function used as an
//              op, inlined at import (graph/function_lowering.h);
//   no kernel  the op's schema is known but no CPU kernel runs it;
//   unknown    graphrun does not know the op.
// The common inference ops (kCommon) are listed even when no graph uses
// them. scripts/op_census.sh runs it over the repository's graphs.
//   op_census [--common] GRAPH_OR_DIR...
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/saved_model.h"
#include "google/protobuf/text_format.h"
#include "graph/graph.h"
#include "graph/ops/all_ops.h"
#include "kernels/all_kernels.h"
#include "tools/file_util.h"

namespace graphrun {
namespace {

const char* const kCommon[] = {"Conv2D",
                               "DepthwiseConv2dNative",
                               "MaxPool",
                               "AvgPool",
                               "Mean",
                               "Sum",
                               "Max",
                               "Reshape",
                               "Squeeze",
                               "ExpandDims",
                               "Pad",
                               "PadV2",
                               "ConcatV2",
                               "GatherV2",
                               "Softmax",
                               "Sigmoid",
                               "Tanh",
                               "Relu",
                               "Relu6",
                               "ResizeBilinear",
                               "FusedBatchNormV3",
                               "BatchMatMulV2",
                               "MatMul",
                               "BiasAdd",
                               "ParseExample",
                               "ParseExampleV2"};

bool IsFunctional(const std::string& op) {
  return op == "PartitionedCall" || op == "StatefulPartitionedCall" || op == "If" ||
         op == "StatelessIf" || op == "Case" || op == "StatelessCase" || op == "While" ||
         op == "StatelessWhile";
}

struct Usage {
  std::set<std::string> graphs;
  int64_t nodes = 0;
};

void Count(const tensorflow::GraphDef& g, const std::string& name,
           std::map<std::string, Usage>* ops, std::set<std::string>* functions) {
  for (const auto& f : g.library().function()) functions->insert(f.signature().name());
  auto add = [&](const std::string& op) {
    Usage& u = (*ops)[op];
    u.graphs.insert(name);
    ++u.nodes;
  };
  for (const auto& n : g.node()) add(n.op());
  for (const auto& f : g.library().function()) {
    for (const auto& n : f.node_def()) add(n.op());
  }
}

// The graphs in `path`: a SavedModel (directory or text), or a GraphDef.
bool Load(const std::string& path, std::vector<tensorflow::GraphDef>* out) {
  if (IsSavedModelDir(path)) {
    auto m = ReadSavedModel(path);
    if (!m.ok()) return false;
    for (const auto& mg : m->meta_graphs()) out->push_back(mg.graph_def());
    return true;
  }
  auto text = tools::ReadFileToString(path);
  if (!text.ok()) return false;
  tensorflow::SavedModel model;
  if (absl::EndsWith(path, ".pbtxt") && absl::StrContains(*text, "meta_graphs") &&
      ParseTextProto(*text, &model).ok() && model.meta_graphs_size()) {
    for (const auto& mg : model.meta_graphs()) out->push_back(mg.graph_def());
    return true;
  }
  auto g = ParseGraphDef(*text, absl::EndsWith(path, ".pbtxt"));
  if (!g.ok()) return false;
  out->push_back(*g);
  return true;
}

int Main(int argc, char** argv) {
  std::map<std::string, Usage> ops;
  std::set<std::string> functions;
  int graphs = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<tensorflow::GraphDef> gs;
    if (!Load(argv[i], &gs)) {
      std::cerr << "op_census: skipping " << argv[i] << " (not a GraphDef or SavedModel)\n";
      continue;
    }
    for (const auto& g : gs) {
      Count(g, argv[i], &ops, &functions);
      ++graphs;
    }
  }
  for (const char* op : kCommon) ops[op];  // listed even when unused

  const OpRegistry& registry = DefaultOpRegistry();
  std::set<std::string> cpu;
  for (const auto& [op, device] : DefaultKernelRegistry().List()) {
    if (device == "CPU") cpu.insert(op);
  }
  std::map<std::string, int> totals;
  std::vector<std::pair<std::string, std::string>> rows;  // (status, row)
  for (const auto& [op, u] : ops) {
    std::string status;
    if (IsFunctional(op) || functions.count(op)) {
      status = "lowered";
    } else if (cpu.count(op)) {
      status = "kernel";
    } else if (registry.LookUp(op) != nullptr) {
      status = "no kernel";
    } else {
      status = "unknown";
    }
    ++totals[status];
    bool common = false;
    for (const char* c : kCommon) common = common || op == c;
    rows.emplace_back(status, absl::StrCat("| `", op, "`", common ? " *" : "", " | ",
                                           u.graphs.size(), " | ", u.nodes, " | ", status, " |"));
  }
  std::cout << "Graphs: " << graphs << "; ops: " << ops.size();
  for (const auto& [s, n] : totals) std::cout << "; " << s << ": " << n;
  std::cout << "\n\n| op | graphs | nodes | status |\n|---|---|---|---|\n";
  for (const char* want : {"unknown", "no kernel", "lowered", "kernel"}) {
    for (const auto& [s, row] : rows) {
      if (s == want) std::cout << row << "\n";
    }
  }
  return 0;
}

}  // namespace
}  // namespace graphrun

int main(int argc, char** argv) { return graphrun::Main(argc, argv); }
