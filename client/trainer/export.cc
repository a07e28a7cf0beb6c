// `graphrun train --export_graph=FILE`: the trained model as a frozen
// inference graph for `graphrun run`; `--export_saved_model=DIR`: as a
// SavedModel (docs/training.md, "Exporting").
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/freeze_graph.h"
#include "client/loop/saver.h"
#include "client/ops.h"
#include "client/saved_model.h"
#include "client/trainer/trainer_internal.h"
#include "google/protobuf/text_format.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_util.h"

namespace graphrun {
namespace client {
namespace trainer {

using internal::BuildModel;

namespace {

// The inference graph: "images" (uint8 [N, 28, 28]) through the input
// pipeline's transforms and the model to "probabilities" and
// "predictions"; the variables restored from `checkpoint` in a session,
// with their values.
struct InferenceGraph {
  client::Scope root = client::Scope::NewRootScope();
  std::vector<client::Variable> variables;
  std::vector<Tensor> values;
};

absl::Status BuildInference(const TrainConfig& c, const std::string& checkpoint, InferenceGraph* g,
                            tensorflow::SaverDef* saver_def) {
  namespace ops = client::ops;
  client::Scope& root = g->root;
  // The input pipeline's transforms, as graph ops: cast, scale (the same
  // float multiply, so the same bits), reshape.
  auto images =
      ops::Placeholder(root.WithOpName("images"), DT_UINT8, ops::Placeholder::Shape({-1, 28, 28}));
  client::Output x = ops::Mul(root, ops::Cast(root, images, DT_FLOAT),
                              Tensor::Scalar<float>(static_cast<float>(0.00392156862745098)));
  x = ops::Reshape(root, x,
                   c.model == "cnn" ? Tensor::FromVector<int32_t>({-1, 28, 28, 1})
                                    : Tensor::FromVector<int32_t>({-1, 784}));
  // The loss head wants labels; freezing prunes it with them.
  auto labels = ops::Placeholder(root.WithOpName("labels"), DT_INT32);
  client::train::Layers layers(root, c.seed);
  client::train::Model m = BuildModel(c, layers, x, labels, /*training=*/false);
  ops::Softmax(root.WithOpName("probabilities"), m.logits);
  ops::ArgMax(root.WithOpName("predictions"), m.logits, Tensor::Scalar<int32_t>(1));
  std::vector<client::Output> reads;
  for (const client::Variable& v : layers.variables()) reads.push_back(v.Read());
  GR_ASSIGN_OR_RETURN(client::Saver saver, client::Saver::Create(root, layers.variables()));
  if (saver_def != nullptr) *saver_def = saver.ToSaverDef();
  GR_RETURN_IF_ERROR(root.status());

  client::ClientSession session(root);
  GR_RETURN_IF_ERROR(saver.Restore(session, checkpoint));
  GR_ASSIGN_OR_RETURN(g->values, session.Run(reads));
  g->variables = layers.variables();
  return absl::OkStatus();
}

}  // namespace

absl::Status ExportInferenceGraph(const TrainConfig& c, const std::string& checkpoint,
                                  const std::string& path) {
  InferenceGraph g;
  GR_RETURN_IF_ERROR(BuildInference(c, checkpoint, &g, nullptr));
  client::Scope& root = g.root;
  absl::flat_hash_map<std::string, Tensor> by_var;
  for (size_t i = 0; i < g.variables.size(); ++i) {
    by_var[g.variables[i].handle().node()->name()] = g.values[i];
  }
  GR_ASSIGN_OR_RETURN(tensorflow::GraphDef graph, root.ToGraphDef());
  GR_ASSIGN_OR_RETURN(tensorflow::GraphDef frozen,
                      client::FreezeGraph(graph, {"predictions", "probabilities"}, by_var));

  std::string bytes;
  const bool text = absl::EndsWith(path, ".pbtxt");
  if (text ? !google::protobuf::TextFormat::PrintToString(frozen, &bytes)
           : !frozen.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat("train: cannot serialize the exported graph"));
  }
  // Written next to its final name and renamed: a reader never sees half a
  // graph.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      return absl::FailedPreconditionError(
          absl::StrCat("train: cannot write --export_graph=", path, ": ", std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("train: cannot write --export_graph=", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ExportSavedModel(const TrainConfig& c, const std::string& checkpoint,
                              const std::string& dir) {
  InferenceGraph g;
  tensorflow::MetaGraphDef mg;
  GR_RETURN_IF_ERROR(BuildInference(c, checkpoint, &g, mg.mutable_saver_def()));
  GR_ASSIGN_OR_RETURN(*mg.mutable_graph_def(), g.root.ToGraphDef());
  mg.mutable_meta_info_def()->add_tags(kServeTag);
  mg.mutable_meta_info_def()->set_meta_graph_version("graphrun");
  tensorflow::SignatureDef& sig = (*mg.mutable_signature_def())[kDefaultServingSignature];
  sig.set_method_name("tensorflow/serving/predict");
  auto info = [](const std::string& name, DataType dtype, std::vector<int64_t> dims) {
    tensorflow::TensorInfo t;
    t.set_name(name);
    t.set_dtype(static_cast<tensorflow::DataType>(dtype));
    for (int64_t d : dims) t.mutable_tensor_shape()->add_dim()->set_size(d);
    return t;
  };
  (*sig.mutable_inputs())["images"] = info("images:0", DT_UINT8, {-1, 28, 28});
  (*sig.mutable_outputs())["probabilities"] = info("probabilities:0", DT_FLOAT, {-1, 10});
  (*sig.mutable_outputs())["classes"] = info("predictions:0", DT_INT64, {-1});

  // Written beside DIR and renamed into place: a reader never sees half a
  // model. An earlier SavedModel at DIR is replaced; anything else there
  // is an error.
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !IsSavedModelDir(dir)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "train: --export_saved_model=", dir, " exists and is not a SavedModel; not replacing it"));
  }
  const std::string tmp = dir + ".tmp";
  std::filesystem::remove_all(tmp, ec);
  std::filesystem::create_directories(tmp + "/variables", ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("train: cannot write --export_saved_model=", dir, ": ", ec.message()));
  }
  GR_ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(tmp + "/variables/variables"));
  for (size_t i = 0; i < g.variables.size(); ++i) {
    GR_RETURN_IF_ERROR(writer->Add(g.variables[i].handle().node()->name(), g.values[i]));
  }
  GR_RETURN_IF_ERROR(writer->Finish());
  GR_RETURN_IF_ERROR(WriteSavedModel(tmp, mg));
  std::filesystem::remove_all(dir, ec);
  std::filesystem::rename(tmp, dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("train: cannot write --export_saved_model=", dir, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckExportTargets(const TrainConfig& c) {
  // The directory `path` is written in (beside it, then renamed).
  auto writable_dir = [](const std::string& flag, const std::string& path) -> absl::Status {
    std::string dir = std::filesystem::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat("train: ", flag, "=", path, ": no directory ", dir));
    }
    // Tried, not asked (access() says yes to root everywhere).
    std::string probe = dir + "/.graphrun-export-XXXXXX";
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "train: ", flag, "=", path, ": cannot write in ", dir, ": ", std::strerror(errno)));
    }
    ::close(fd);
    ::unlink(probe.c_str());
    return absl::OkStatus();
  };
  if (!c.export_graph.empty()) {
    GR_RETURN_IF_ERROR(writable_dir("--export_graph", c.export_graph));
    std::error_code ec;
    if (std::filesystem::is_directory(c.export_graph, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "train: --export_graph=", c.export_graph, " is a directory; give a .pb or .pbtxt file"));
    }
  }
  if (!c.export_saved_model.empty()) {
    std::string dir = c.export_saved_model;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    GR_RETURN_IF_ERROR(writable_dir("--export_saved_model", dir));
    std::error_code ec;
    if (std::filesystem::exists(dir, ec) && !IsSavedModelDir(dir)) {
      return absl::FailedPreconditionError(absl::StrCat("train: --export_saved_model=", dir,
                                                        " exists and is not a SavedModel; not "
                                                        "replacing it"));
    }
  }
  return absl::OkStatus();
}

}  // namespace trainer
}  // namespace client
}  // namespace graphrun
