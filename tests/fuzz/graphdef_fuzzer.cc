// libFuzzer target: GraphDef parsing (binary and text), function-library
// lowering, import with full validation and shape inference, placement over two CPU devices with
// soft placement off and on, and partitioning. Any input must yield a Status, never a crash, hang
// or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "graph/function_lowering.h"
#include "graph/graph.h"
#include "graph/ops/all_ops.h"
#include "placement/partition.h"
#include "placement/placer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphrun;
  // No log line for each of the millions of malformed protos (about
  // 800,000 inputs wrote 244 MB of them).
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  if (size > (1 << 16)) return 0;
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto def = ParseGraphDef(bytes);
  if (!def.ok() || def->node_size() > 512) return 0;
  // Function libraries are lowered first, with a node limit that keeps one
  // input fast (the default, 2^20, bounds memory, not fuzzing time).
  if (NeedsLowering(*def)) {
    LoweringOptions lo;
    lo.max_nodes = 4096;
    auto lowered = LowerFunctionCalls(*def, DefaultOpRegistry(), lo);
    if (!lowered.ok()) return 0;
    *def = std::move(lowered->graph_def);
  }
  auto graph = GraphFromGraphDef(*def, DefaultOpRegistry());
  if (!graph.ok()) return 0;
  const std::vector<placement::DeviceInfo> devices = {
      {"/job:localhost/replica:0/task:0/device:CPU:0", "CPU"},
      {"/job:localhost/replica:0/task:0/device:CPU:1", "CPU"},
  };
  for (bool soft : {false, true}) {
    placement::PlacerOptions opts;
    opts.allow_soft_placement = soft;
    if (!placement::Place(graph->get(), devices, opts).ok()) continue;
    placement::PartitionOptions popts;
    auto parts = placement::Partition(**graph, popts);
    if (parts.ok()) {
      for (const auto& [name, g] : *parts) {
        ImportOptions io;
        io.infer_shapes = false;
        (void)GraphFromGraphDef(g, DefaultOpRegistry(), io);
      }
    }
  }
  return 0;
}
