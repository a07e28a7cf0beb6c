#include "client/trainer/trainer.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/loop/saver.h"
#include "client/trainer/trainer_internal.h"
#include "distributed/cluster_spec.h"
#include "distributed/rpc/grpc_session.h"
#include "graph/status.h"
#include "util/temp_dir.h"

namespace graphrun {
namespace client {
namespace trainer {

using internal::TrainInProcessCluster;
using internal::TrainLocal;
using internal::TrainProcessCluster;
using internal::TrainTfConfigTask;

bool TfConfigTaskIs(const TrainConfig& c, const std::string& task_type) {
  if (c.tf_config.empty()) return false;
  absl::StatusOr<distributed::TfConfig> cfg = distributed::ParseTfConfig(c.tf_config);
  return cfg.ok() && cfg->task_type == task_type;
}

absl::Status RunEvaluator(const TrainConfig& c, std::ostream& out, std::ostream* log) {
  return internal::RunEvaluator(c, out, log);
}

namespace {

// --export_graph and --export_saved_model, on the chief (the task that
// saved the last checkpoint).
absl::StatusOr<TrainResult> Export(const TrainConfig& c, absl::StatusOr<TrainResult> r,
                                   std::ostream* log) {
  if (!r.ok() || r->checkpoint.empty()) return r;
  if (!c.export_graph.empty()) {
    GR_RETURN_IF_ERROR(ExportInferenceGraph(c, r->checkpoint, c.export_graph));
    r->exported_graph = c.export_graph;
    if (log != nullptr) {
      *log << "exported the inference graph to " << c.export_graph
           << " (feed images: uint8 [N, 28, 28]; fetch predictions, probabilities)\n";
    }
  }
  if (!c.export_saved_model.empty()) {
    GR_RETURN_IF_ERROR(ExportSavedModel(c, r->checkpoint, c.export_saved_model));
    r->exported_saved_model = c.export_saved_model;
    if (log != nullptr) {
      *log << "exported a SavedModel to " << c.export_saved_model
           << " (signature serving_default: images uint8 [N, 28, 28] -> probabilities, "
              "classes)\n";
    }
  }
  return r;
}

}  // namespace

std::vector<std::string> TaskAllowedDirs(const TrainConfig& c) {
  std::vector<std::string> dirs = {c.data_dir};
  if (!c.checkpoint_dir.empty()) dirs.push_back(c.checkpoint_dir);
  return dirs;
}

absl::StatusOr<TrainResult> Train(const TrainConfig& c, std::ostream* log) {
  if (!c.export_saved_model.empty() && c.checkpoint_dir.empty()) {
    // A SavedModel's weights come from the last checkpoint: a run without
    // checkpoints makes them in a private directory, removed afterwards.
    absl::StatusOr<std::string> made = MakeTempDir("graphrun-export-");
    if (!made.ok()) {
      return absl::InternalError(
          absl::StrCat("train: the temporary checkpoint directory: ", made.status().message()));
    }
    const std::string tmp = *made;
    TrainConfig with = c;
    with.checkpoint_dir = tmp;
    absl::StatusOr<TrainResult> r = Train(with, log);
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    if (r.ok()) r->checkpoint.clear();
    return r;
  }
  if (!c.checkpoint_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(c.checkpoint_dir, ec);
    if (ec) {
      return absl::FailedPreconditionError(absl::StrCat(
          "train: cannot create --checkpoint_dir=", c.checkpoint_dir, ": ", ec.message()));
    }
  }
  // Found before training, not after it (the checkpoint directory, made
  // above, may hold them).
  GR_RETURN_IF_ERROR(CheckExportTargets(c));
  if (c.distribution == "mirrored") {
    if (log != nullptr) {
      *log << "graphrun train: " << c.model << " on " << c.data_dir << ", mirrored over "
           << c.num_replicas << " replicas (one process, " << c.replica_device_type
           << " devices 0.." << c.num_replicas - 1 << "), " << c.optimizer << ", global batch "
           << c.batch_size << " (" << c.batch_size / c.num_replicas << " per replica)\n";
    }
    return Export(c, internal::TrainMirrored(c, log), log);
  }
  if (!c.local) {
    distributed::RegisterGrpcSession();  // idempotent: grpc:// targets
    if (!c.tf_config.empty()) return Export(c, TrainTfConfigTask(c, c.tf_config, log), log);
  }
  if (log != nullptr) {
    *log << "graphrun train: " << c.model << " on " << c.data_dir << ", "
         << (c.local ? std::string("local (one process)")
             : c.distribution == "multi_worker_mirrored"
                 ? absl::StrCat(c.workers, " workers (one process each",
                                c.replicas_per_worker > 1
                                    ? absl::StrCat(", ", c.replicas_per_worker, " ",
                                                   c.replica_device_type, " replicas each")
                                    : std::string(),
                                "), multi_worker_mirrored: gradients all-reduced, no PS")
                 : absl::StrCat(c.ps, " PS + ", c.workers, " workers, ", c.sync ? "sync" : "async"))
         << ", " << c.optimizer << ", global batch " << c.batch_size << "\n";
  }
  if (c.local) return Export(c, TrainLocal(c, log), log);
  if (c.in_process) return Export(c, TrainInProcessCluster(c, log), log);
  // A task that dies ends the cluster's run; with a checkpoint to resume
  // from, a new cluster continues from it (its chief restores, its
  // workers wait), as a restarted TensorFlow job's MonitoredTrainingSession
  // would.
  absl::StatusOr<TrainResult> r;
  int restarts = 0;
  std::ostream* notices = c.notices != nullptr ? c.notices : log;
  auto annotate = [&r](absl::string_view why) {
    r = absl::Status(r.status().code(), absl::StrCat(r.status().message(), " (", why, ")"));
  };
  while (true) {
    r = TrainProcessCluster(c, log);
    if (r.ok() || !r.status().GetPayload(internal::kTaskDiedPayload).has_value()) break;
    if (c.checkpoint_dir.empty()) {
      annotate("not restarted: no --checkpoint_dir to resume from");
      break;
    }
    if (c.stop != nullptr && c.stop->load()) break;
    absl::StatusOr<std::string> latest = client::Saver::LatestCheckpoint(c.checkpoint_dir);
    if (!latest.ok()) {
      annotate(absl::StrCat("not restarted: no checkpoint in ", c.checkpoint_dir, " yet"));
      break;
    }
    if (restarts == c.max_restarts) {
      annotate(absl::StrCat("after ", restarts, restarts == 1 ? " restart" : " restarts"));
      break;
    }
    ++restarts;
    if (notices != nullptr) {
      *notices << "graphrun train: task "
               << std::string(*r.status().GetPayload(internal::kTaskDiedPayload))
               << " died; the run failed with: " << r.status().message() << "\n"
               << "graphrun train: restarting the cluster from " << *latest << " (restart "
               << restarts << " of at most " << c.max_restarts << ")\n";
    }
  }
  if (r.ok()) r->restarts = restarts;
  return Export(c, std::move(r), log);
}

}  // namespace trainer
}  // namespace client
}  // namespace graphrun
