// SavedModel directories, TensorFlow's serving format:
//
//   DIR/saved_model.pb (or saved_model.pbtxt)   a SavedModel proto: one or
//       more MetaGraphDefs, each with tags ("serve"), a GraphDef (with its
//       function library), a SaverDef and named SignatureDefs;
//   DIR/variables/variables.{index,data-*}       the variables, a checkpoint
//       in TensorFlow's format (docs/checkpoint_format.md).
//
// Loading does what TensorFlow's loader does: it creates a session on the
// MetaGraphDef's graph (function calls lowered: TF 2 signatures call into
// the library through StatefulPartitionedCall), runs the SaverDef's restore
// op with its filename tensor fed the variables prefix (TF 1 savers and
// TF 2's traced restore functions alike), then the init op: collection
// "saved_model_main_op" or "legacy_init_op" (TF 1), or the output of
// signature "__saved_model_init_op" (TF 2).
#ifndef GRAPHRUN_CLIENT_SAVED_MODEL_H_
#define GRAPHRUN_CLIENT_SAVED_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/proto/meta_graph.pb.h"
#include "runtime/session.h"

namespace graphrun {

constexpr char kServeTag[] = "serve";
constexpr char kDefaultServingSignature[] = "serving_default";
constexpr char kInitOpSignature[] = "__saved_model_init_op";

// True when `dir` holds saved_model.pb or saved_model.pbtxt.
bool IsSavedModelDir(const std::string& dir);

// Parses DIR/saved_model.pb (binary) or DIR/saved_model.pbtxt. NotFound
// naming the directory when neither exists; InvalidArgument naming the
// file when it does not parse.
absl::StatusOr<tensorflow::SavedModel> ReadSavedModel(const std::string& dir);

// The MetaGraphDef whose tags are exactly `tags` (in any order). NotFound
// listing the tag sets the model has.
absl::StatusOr<const tensorflow::MetaGraphDef*> FindMetaGraph(const tensorflow::SavedModel& model,
                                                              const std::vector<std::string>& tags);

struct LoadedSavedModel {
  tensorflow::MetaGraphDef meta_graph;
  std::unique_ptr<Session> session;
};

// Loads the MetaGraphDef tagged `tags` into a new session (see the top of
// this file). Errors name the directory and what failed: the restore (with
// the checkpoint's error) or the init op.
absl::StatusOr<LoadedSavedModel> LoadSavedModel(const std::string& dir,
                                                const std::vector<std::string>& tags,
                                                const SessionOptions& options);

// Writes DIR/saved_model.pb holding `meta_graph` (schema version 1). The
// caller writes the variables (DIR/variables/variables) itself.
absl::Status WriteSavedModel(const std::string& dir, const tensorflow::MetaGraphDef& meta_graph);

}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_SAVED_MODEL_H_
