#include "tools/show_command.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/saved_model.h"
#include "graph/status.h"
#include "tools/flags.h"

namespace graphrun {
namespace tools {
namespace {

template <typename Map>
std::vector<std::string> SortedKeys(const Map& m) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// "(-1, 784)", "()" for a scalar, "unknown_rank".
std::string ShapeText(const tensorflow::TensorShapeProto& s) {
  if (s.unknown_rank()) return "unknown_rank";
  std::vector<std::string> dims;
  for (const auto& d : s.dim()) dims.push_back(absl::StrCat(d.size()));
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

void ShowTensors(const char* what,
                 const google::protobuf::Map<std::string, tensorflow::TensorInfo>& infos,
                 std::string* out) {
  absl::StrAppend(out, "  The given SavedModel SignatureDef contains the following ", what,
                  "(s):\n");
  for (const std::string& key : SortedKeys(infos)) {
    const tensorflow::TensorInfo& t = infos.at(key);
    absl::StrAppend(out, "    ", what, "s['", key, "'] tensor_info:\n",
                    "        dtype: ", tensorflow::DataType_Name(t.dtype()), "\n",
                    "        shape: ", ShapeText(t.tensor_shape()), "\n",
                    "        name: ", t.name(), "\n");
  }
}

}  // namespace

std::string ShowSavedModel(const tensorflow::SavedModel& model) {
  std::vector<std::pair<std::string, const tensorflow::MetaGraphDef*>> graphs;
  for (const auto& mg : model.meta_graphs()) {
    std::vector<std::string> tags(mg.meta_info_def().tags().begin(),
                                  mg.meta_info_def().tags().end());
    graphs.emplace_back(absl::StrJoin(tags, ", "), &mg);
  }
  std::sort(graphs.begin(), graphs.end());
  std::string out;
  for (const auto& [tags, mg] : graphs) {
    absl::StrAppend(&out, "\nMetaGraphDef with tag-set: '", tags,
                    "' contains the following SignatureDefs:\n");
    for (const std::string& key : SortedKeys(mg->signature_def())) {
      const tensorflow::SignatureDef& sig = mg->signature_def().at(key);
      absl::StrAppend(&out, "\nsignature_def['", key, "']:\n");
      ShowTensors("input", sig.inputs(), &out);
      ShowTensors("output", sig.outputs(), &out);
      absl::StrAppend(&out, "  Method name is: ", sig.method_name(), "\n");
    }
  }
  return out;
}

std::string ShowUsage() {
  return "usage: graphrun show SAVED_MODEL_DIR\n\n"
         "Prints a SavedModel's tag sets and signatures, each input and output with its\n"
         "dtype, shape and tensor name (the layout of saved_model_cli show --all).\n";
}

int ShowCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      out << ShowUsage();
      return kExitOk;
    }
  }
  auto flags = FlagSet().Parse(args);
  if (!flags.ok()) {
    err << StatusToLine(flags.status()) << "\n";
    return kExitUsage;
  }
  if (flags->positional().size() != 1) {
    err << StatusToLine(absl::InvalidArgumentError("show: usage: graphrun show SAVED_MODEL_DIR"))
        << "\n";
    return kExitUsage;
  }
  auto model = ReadSavedModel(flags->positional()[0]);
  if (!model.ok()) {
    err << StatusToLine(model.status()) << "\n";
    return kExitFailure;
  }
  out << ShowSavedModel(*model);
  return kExitOk;
}

}  // namespace tools
}  // namespace graphrun
