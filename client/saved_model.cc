#include "client/saved_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "graph/status.h"

namespace graphrun {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

bool IsSavedModelDir(const std::string& dir) {
  return IsFile(dir + "/saved_model.pb") || IsFile(dir + "/saved_model.pbtxt");
}

absl::StatusOr<tensorflow::SavedModel> ReadSavedModel(const std::string& dir) {
  tensorflow::SavedModel model;
  const std::string pb = dir + "/saved_model.pb", pbtxt = dir + "/saved_model.pbtxt";
  if (IsFile(pb)) {
    GR_ASSIGN_OR_RETURN(std::string bytes, ReadFile(pb));
    if (!model.ParseFromString(bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("'", pb, "' is not a SavedModel proto"));
    }
  } else if (IsFile(pbtxt)) {
    GR_ASSIGN_OR_RETURN(std::string text, ReadFile(pbtxt));
    if (!google::protobuf::TextFormat::ParseFromString(text, &model)) {
      return absl::InvalidArgumentError(absl::StrCat("'", pbtxt, "' is not a SavedModel proto"));
    }
  } else {
    return absl::NotFoundError(
        absl::StrCat("'", dir, "' is not a SavedModel: no saved_model.pb or saved_model.pbtxt"));
  }
  if (model.meta_graphs_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("SavedModel '", dir, "' has no MetaGraphDef"));
  }
  return model;
}

absl::StatusOr<const tensorflow::MetaGraphDef*> FindMetaGraph(
    const tensorflow::SavedModel& model, const std::vector<std::string>& tags) {
  std::vector<std::string> have;
  for (const auto& mg : model.meta_graphs()) {
    std::vector<std::string> t(mg.meta_info_def().tags().begin(), mg.meta_info_def().tags().end());
    if (Sorted(t) == Sorted(tags)) return &mg;
    have.push_back(absl::StrCat("'", absl::StrJoin(Sorted(t), ","), "'"));
  }
  return absl::NotFoundError(absl::StrCat("no MetaGraphDef with tags '",
                                          absl::StrJoin(Sorted(tags), ","),
                                          "'; the SavedModel has ", absl::StrJoin(have, ", ")));
}

absl::StatusOr<LoadedSavedModel> LoadSavedModel(const std::string& dir,
                                                const std::vector<std::string>& tags,
                                                const SessionOptions& options) {
  GR_ASSIGN_OR_RETURN(tensorflow::SavedModel model, ReadSavedModel(dir));
  GR_ASSIGN_OR_RETURN(const tensorflow::MetaGraphDef* mg, FindMetaGraph(model, tags));
  LoadedSavedModel out;
  out.meta_graph = *mg;
  GR_ASSIGN_OR_RETURN(out.session, NewSession(options));
  absl::Status s = out.session->Create(mg->graph_def());
  if (!s.ok()) return AnnotateStatus(s, absl::StrCat("SavedModel '", dir, "': "));

  const tensorflow::SaverDef& saver = mg->saver_def();
  const std::string prefix = dir + "/variables/variables";
  if (!saver.restore_op_name().empty() && IsFile(prefix + ".index")) {
    Tensor filename(DT_STRING, TensorShape({}));
    filename.flat<std::string>()[0] = prefix;
    s = out.session->Run({{saver.filename_tensor_name(), filename}}, {}, {saver.restore_op_name()})
            .status();
    if (!s.ok()) {
      return AnnotateStatus(
          s, absl::StrCat("SavedModel '", dir, "': restoring variables from '", prefix, "': "));
    }
  }
  std::vector<std::string> init;
  for (const char* key : {"saved_model_main_op", "legacy_init_op"}) {
    auto it = mg->collection_def().find(key);
    if (it != mg->collection_def().end() && it->second.node_list().value_size() > 0) {
      init.push_back(it->second.node_list().value(0));
      break;
    }
  }
  auto sig = mg->signature_def().find(kInitOpSignature);
  if (init.empty() && sig != mg->signature_def().end()) {
    auto o = sig->second.outputs().find(kInitOpSignature);
    if (o != sig->second.outputs().end()) {
      std::string name = o->second.name();
      init.push_back(name.substr(0, name.find(':')));
    }
  }
  if (!init.empty()) {
    s = out.session->Run({}, {}, init).status();
    if (!s.ok()) {
      return AnnotateStatus(s, absl::StrCat("SavedModel '", dir, "': init op '", init[0], "': "));
    }
  }
  return out;
}

absl::Status WriteSavedModel(const std::string& dir, const tensorflow::MetaGraphDef& meta_graph) {
  ::mkdir(dir.c_str(), 0755);
  tensorflow::SavedModel model;
  model.set_saved_model_schema_version(1);
  *model.add_meta_graphs() = meta_graph;
  const std::string path = dir + "/saved_model.pb";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f || !model.SerializeToOstream(&f)) {
    return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace graphrun
