// Saver: checkpoints resource variables with graph ops, TensorFlow's
// sharded scheme. Variables are grouped by the device of their handle; each
// group is saved by its own SaveV2 placed on that device (so on a parameter
// server no variable crosses the network to be saved), then one
// MergeV2Checkpoints writes the index. Restore runs one RestoreV2 per group
// on the group's device and assigns. The format is kernels/checkpoint_util
// (docs/checkpoint_format.md); checkpoint state ("checkpoint" file,
// keep-last-N) goes through the same library.
//
// Partitioned variables (client/partitioned_variable.h): a variable with
// SaveSliceInfo is saved as its slice of the full tensor, under the FULL
// name ("w", slice "10 4 0,4:0,4" for w/part_0), and restored by asking
// RestoreV2 for that slice, which the reader assembles from whatever slices
// were saved. So a checkpoint written with K parts restores into K' parts
// or into a plain Variable "w", and a plain "w" restores into parts. A slot
// variable "<part>/<suffix>" of a part's shape (Adam's "w/part_0/Adam")
// inherits the part's slice, under the name "<full>/<suffix>" ("w/Adam"),
// as TensorFlow's slot_creator gives it. Plain variables of a fully
// defined shape are restored with their full shape in shape_and_slices, so
// a checkpoint of another shape is InvalidArgument naming the tensor.
//
// Not thread-safe: build and use from one thread.
#ifndef GRAPHRUN_CLIENT_LOOP_SAVER_H_
#define GRAPHRUN_CLIENT_LOOP_SAVER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client_session.h"
#include "client/scope.h"
#include "client/variables.h"
#include "graph/proto/meta_graph.pb.h"

namespace graphrun {
namespace client {

struct SaverOptions {
  int max_to_keep = 5;  // older checkpoints are deleted
  std::string basename = "model.ckpt";
};

class Saver {
 public:
  // Builds the save and restore ops under name scope "save" of `scope`.
  // InvalidArgument if `vars` is empty, two variables share a name, or two
  // variables save the same tensor inconsistently (one of them whole,
  // different full shapes or dtypes, overlapping slices), naming both.
  static absl::StatusOr<Saver> Create(const Scope& scope, const std::vector<Variable>& vars,
                                      const SaverOptions& options = {});

  // Saves every variable to "<dir>/<basename>-<global_step>", records it
  // in <dir>/checkpoint and drops checkpoints beyond max_to_keep. Returns
  // the prefix written.
  absl::StatusOr<std::string> Save(const ClientSession& session, const std::string& dir,
                                   int64_t global_step) const;
  // Restores every variable from `prefix`. NotFound naming a variable (its
  // full name for a part) the checkpoint lacks or whose slice it does not
  // cover; InvalidArgument naming it for a dtype or full-shape mismatch.
  absl::Status Restore(const ClientSession& session, const std::string& prefix) const;
  // Restores from `prefix` only the shards (devices) that hold one of
  // `variables` (names as Variable::name()), every variable of those
  // shards and no other: after a parameter server restarts, its variables
  // come back while the other servers' keep their newer values. Returns
  // the devices restored, sorted. InvalidArgument naming a variable the
  // saver does not hold; otherwise Restore's errors.
  absl::StatusOr<std::vector<std::string>> RestoreShardsOf(
      const ClientSession& session, const std::string& prefix,
      const std::vector<std::string>& variables) const;

  // The newest checkpoint prefix in `dir`, or NotFound.
  static absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir);
  // Marks `prefix` (the newest checkpoint of `dir`) as its run's last, and
  // whether the newest checkpoint of `dir` is so marked (false when none).
  static absl::Status MarkFinal(const std::string& dir, const std::string& prefix);
  static bool IsFinal(const std::string& dir);
  // The global step encoded in a prefix "…-<step>", or -1.
  static int64_t StepOfPrefix(const std::string& prefix);

  int num_shards() const { return num_shards_; }
  // TensorFlow's SaverDef for these ops, for a SavedModel's MetaGraphDef:
  // the filename tensor (fed a checkpoint prefix) and the restore op. No
  // save tensor: graphrun's save op returns nothing.
  tensorflow::SaverDef ToSaverDef() const;

 private:
  Saver() = default;
  SaverOptions options_;
  Output filename_;       // string scalar placeholder
  Operation save_op_;     // merge after all shard saves
  Operation restore_op_;  // all assignments
  // Per shard: its device and the restore of its variables.
  std::vector<std::string> shard_devices_;
  std::vector<Operation> shard_restores_;
  std::map<std::string, int> shard_of_;  // variable name -> shard
  int num_shards_ = 0;
};

}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_LOOP_SAVER_H_
