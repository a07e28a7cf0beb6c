// `graphrun train --evaluator`: evaluates each new checkpoint of the chief.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/client_session.h"
#include "client/loop/saver.h"
#include "client/loop/summary_writer.h"
#include "client/loop/sync_replicas_hook.h"
#include "client/loop/training_loop.h"
#include "client/ops.h"
#include "client/train/layers.h"
#include "client/train/mirrored_strategy.h"
#include "client/train/models.h"
#include "client/train/multi_worker_mirrored_strategy.h"
#include "client/train/optimizers.h"
#include "client/train/parameter_server_strategy.h"
#include "client/train/sync_replicas_optimizer.h"
#include "client/trainer/pieces.h"
#include "client/trainer/trainer_internal.h"
#include "distributed/local_cluster.h"
#include "graph/status.h"
#include "kernels/data/dataset_util.h"
#include "placement/balanced_strategy.h"
#include "placement/placement_report.h"
#include "placement/ps_strategy.h"
#include "placement/replica_device_setter.h"
#include "util/json.h"

namespace graphrun {
namespace client {
namespace trainer {
namespace internal {

absl::Status RunEvaluator(const TrainConfig& c, std::ostream& out, std::ostream* log) {
  if (c.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("evaluator: needs the chief's --checkpoint_dir");
  }
  // The model as the chief saves it, on the test set.
  ReplicaGraph g;
  g.root.SetGraphSeed(c.seed);
  const Scope& s = g.root;
  g.global_step = std::make_unique<Variable>(train::CreateGlobalStep(s));
  GR_ASSIGN_OR_RETURN(IdxPair test, FindIdxPair(c, "t10k"));
  Input in = BuildInput(s.NewSubScope("eval_input"), c, test.images, test.labels, g.eval_batch, 0,
                        1, /*shuffle=*/false);
  train::LayersOptions lo;
  lo.seed = c.seed;
  g.layers.push_back(std::make_unique<train::Layers>(s, lo));
  train::Model m = BuildModel(c, *g.layers[0], in.images, in.labels, /*training=*/false);
  g.eval_init = in.make_iterator;
  g.eval_loss = m.loss;
  g.eval_accuracy = m.accuracy;
  g.eval_count = ops::Size(s, in.labels);
  std::vector<Variable> vars = g.layers[0]->variables();
  vars.push_back(*g.global_step);
  GR_ASSIGN_OR_RETURN(client::Saver saver, client::Saver::Create(s, vars));
  Output step_now = g.global_step->Read(s);
  GR_RETURN_IF_ERROR(s.status());
  const std::string summary_dir =
      (c.summary_dir.empty() ? c.checkpoint_dir : c.summary_dir) + "/eval";
  GR_ASSIGN_OR_RETURN(std::unique_ptr<client::EventFileWriter> events,
                      client::EventFileWriter::Create(summary_dir));
  const std::string results_file = summary_dir + "/results.jsonl";
  SessionOptions so;
  so.config.set_intra_op_parallelism_threads(c.intra_op_threads);
  so.config.set_inter_op_parallelism_threads(c.inter_op_threads);
  ClientSession session(g.root, so);
  if (log != nullptr) {
    *log << "evaluator: waiting for checkpoints in " << c.checkpoint_dir << " (results in "
         << results_file << ", summaries in " << summary_dir << ")\n";
  }
  std::string evaluated;
  // The last evaluation's line up to its "final" value, and whether that
  // was true.
  std::string last_line;
  bool emitted_final = false;
  auto emit = [&](bool final) -> absl::Status {
    const std::string line = absl::StrCat(last_line, final ? "true" : "false", "}");
    emitted_final = final;
    out << line << std::endl;
    std::ofstream f(results_file, std::ios::app);
    f << line << "\n";
    if (!f) {
      return absl::FailedPreconditionError(
          absl::StrCat("evaluator: cannot append to ", results_file));
    }
    return absl::OkStatus();
  };
  auto idle_since = std::chrono::steady_clock::now();
  while (true) {
    if (c.stop != nullptr && c.stop->load()) return absl::CancelledError("evaluator: stopped");
    // Final is read first: once set, the newest checkpoint is the run's
    // last, so the one read next is at least as new.
    const bool final = client::Saver::IsFinal(c.checkpoint_dir);
    absl::StatusOr<std::string> latest = client::Saver::LatestCheckpoint(c.checkpoint_dir);
    if (latest.ok() && *latest != evaluated) {
      absl::Status restored = saver.Restore(session, *latest);
      if (absl::IsNotFound(restored) && !final) {
        // The chief's rotation deleted it meanwhile: take the newest next.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      GR_RETURN_IF_ERROR(restored);
      GR_ASSIGN_OR_RETURN(std::vector<Tensor> step, session.Run({step_now}));
      TrainResult r;
      GR_RETURN_IF_ERROR(Evaluate(g, session, &r));
      const int64_t global_step = step[0].scalar<int64_t>();
      last_line =
          absl::StrCat("{\"global_step\": ", global_step, ", \"checkpoint\": ", JsonQuote(*latest),
                       ", \"test_accuracy\": ", JsonNumber(*r.test_accuracy),
                       ", \"test_loss\": ", JsonNumber(*r.test_loss), ", \"final\": ");
      // Final when the marker was set before the checkpoint was read, or is
      // set now and the checkpoint is still the newest (the chief marks its
      // last checkpoint final just after saving it).
      bool is_final = final;
      if (!is_final && client::Saver::IsFinal(c.checkpoint_dir)) {
        auto newest = client::Saver::LatestCheckpoint(c.checkpoint_dir);
        is_final = newest.ok() && *newest == *latest;
      }
      GR_RETURN_IF_ERROR(emit(is_final));
      GR_RETURN_IF_ERROR(events->WriteScalars(
          global_step, {{"accuracy", *r.test_accuracy}, {"loss", *r.test_loss}}));
      GR_RETURN_IF_ERROR(events->Flush());
      evaluated = *latest;
      idle_since = std::chrono::steady_clock::now();
      if (is_final) return absl::OkStatus();
      continue;
    }
    if (latest.ok() && final) {
      // Evaluated already. When the chief marked it final only after that
      // evaluation, say so: the last line is always the final one.
      if (!emitted_final) GR_RETURN_IF_ERROR(emit(true));
      return absl::OkStatus();
    }
    if (!latest.ok() && !absl::IsNotFound(latest.status())) return latest.status();
    if (c.eval_timeout_secs > 0 && std::chrono::steady_clock::now() - idle_since >
                                       std::chrono::duration<double>(c.eval_timeout_secs)) {
      return absl::DeadlineExceededError(absl::StrCat("evaluator: no new checkpoint in ",
                                                      c.checkpoint_dir, " within ",
                                                      c.eval_timeout_secs, " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace internal
}  // namespace trainer
}  // namespace client
}  // namespace graphrun
