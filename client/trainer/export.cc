// `graphrun train --export_graph=FILE`: the trained model as a frozen
// inference graph for `graphrun run` (docs/training.md, "Exporting").
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/freeze_graph.h"
#include "client/loop/saver.h"
#include "client/ops.h"
#include "client/trainer/trainer_internal.h"
#include "google/protobuf/text_format.h"
#include "graph/status.h"

namespace graphrun {
namespace client {
namespace trainer {

using internal::BuildModel;

absl::Status ExportInferenceGraph(const TrainConfig& c, const std::string& checkpoint,
                                  const std::string& path) {
  namespace ops = client::ops;
  client::Scope root = client::Scope::NewRootScope();
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
  GR_RETURN_IF_ERROR(root.status());

  client::ClientSession session(root);
  GR_RETURN_IF_ERROR(saver.Restore(session, checkpoint));
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> values, session.Run(reads));
  absl::flat_hash_map<std::string, Tensor> by_var;
  for (size_t i = 0; i < reads.size(); ++i) {
    by_var[layers.variables()[i].handle().node()->name()] = values[i];
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
          absl::StrCat("train: cannot write --export_graph=", path));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("train: cannot write --export_graph=", path));
  }
  return absl::OkStatus();
}

}  // namespace trainer
}  // namespace client
}  // namespace graphrun
