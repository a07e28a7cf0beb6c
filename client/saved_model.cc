#include "client/saved_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/graph.h"
#include "graph/status.h"
#include "util/file_read.h"

namespace graphrun {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A SavedModel proto: at most what protobuf parses (2 GiB - 1).
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return ReadFileCapped(path, (uint64_t{1} << 31) - 1);
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
    if (absl::Status parsed = ParseTextProto(text, &model); !parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", pbtxt, "' is not a SavedModel proto (", parsed.message(), ")"));
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

namespace {

// The MetaGraphDef's assets: asset_file_def, or (older exports) the
// AssetFileDefs packed in the saved_model_assets collection.
std::vector<tensorflow::AssetFileDef> AssetFileDefs(const tensorflow::MetaGraphDef& mg) {
  std::vector<tensorflow::AssetFileDef> out(mg.asset_file_def().begin(), mg.asset_file_def().end());
  if (!out.empty()) return out;
  auto it = mg.collection_def().find("saved_model_assets");
  if (it == mg.collection_def().end()) return out;
  for (const auto& any : it->second.any_list().value()) {
    tensorflow::AssetFileDef a;
    if (absl::EndsWith(any.type_url(), "tensorflow.AssetFileDef") &&
        a.ParseFromString(any.value())) {
      out.push_back(std::move(a));
    }
  }
  return out;
}

}  // namespace

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

  // The assets: each asset's tensor is fed DIR/assets/FILENAME in the
  // restore and init runs (TensorFlow's loader: asset_file_def, else the
  // saved_model_assets collection).
  NamedTensorList assets;
  for (const tensorflow::AssetFileDef& a : AssetFileDefs(*mg)) {
    if (a.tensor_info().name().empty()) continue;
    assets.push_back(
        {a.tensor_info().name(), Tensor::Scalar<std::string>(dir + "/assets/" + a.filename())});
  }

  const tensorflow::SaverDef& saver = mg->saver_def();
  const std::string prefix = dir + "/variables/variables";
  if (!saver.restore_op_name().empty() && IsFile(prefix + ".index")) {
    NamedTensorList feeds = assets;
    feeds.push_back({saver.filename_tensor_name(), Tensor::Scalar<std::string>(prefix)});
    s = out.session->Run(feeds, {}, {saver.restore_op_name()}).status();
    if (!s.ok()) {
      return AnnotateStatus(
          s, absl::StrCat("SavedModel '", dir, "': restoring variables from '", prefix, "': "));
    }
  }
  // The init op, in TensorFlow's order: the __saved_model_init_op
  // signature, then the saved_model_main_op and legacy_init_op collections.
  std::vector<std::string> init;
  auto sig = mg->signature_def().find(kInitOpSignature);
  if (sig != mg->signature_def().end()) {
    auto o = sig->second.outputs().find(kInitOpSignature);
    if (o != sig->second.outputs().end()) {
      std::string name = o->second.name();
      init.push_back(name.substr(0, name.find(':')));
    }
  }
  for (const char* key : {"saved_model_main_op", "legacy_init_op"}) {
    if (!init.empty()) break;
    auto it = mg->collection_def().find(key);
    if (it == mg->collection_def().end()) continue;
    if (it->second.node_list().value_size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("SavedModel '", dir, "': collection '", key,
                                                     "' must hold one op, it holds ",
                                                     it->second.node_list().value_size()));
    }
    init.push_back(it->second.node_list().value(0));
  }
  if (!init.empty()) {
    s = out.session->Run(assets, {}, init).status();
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
