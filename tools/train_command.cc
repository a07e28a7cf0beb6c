#include "tools/train_command.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/loop/saver.h"
#include "distributed/cluster_spec.h"
#include "distributed/rpc/grpc_session.h"
#include "distributed/slurm.h"
#include "graph/status.h"
#include "kernels/data/dataset_util.h"
#include "tools/credential_flags.h"
#include "tools/file_util.h"
#include "tools/flags.h"
#include "tools/server_command.h"
#include "tools/trace.h"
#include "util/auth_token.h"
#include "util/json.h"

namespace graphrun {
namespace tools {
namespace {

// --trace_dir: the traced steps as one RunMetadata (every step's device
// stats, the first step's partition graphs) and one Chrome trace.
absl::Status WriteTrace(const std::string& dir, const std::vector<tensorflow::RunMetadata>& steps) {
  tensorflow::RunMetadata merged;
  for (size_t i = 0; i < steps.size(); ++i) {
    for (const auto& d : steps[i].step_stats().dev_stats()) {
      *merged.mutable_step_stats()->add_dev_stats() = d;
    }
    if (i == 0) *merged.mutable_partition_graphs() = steps[i].partition_graphs();
  }
  std::string bytes;
  if (!merged.SerializeToString(&bytes)) {
    return absl::InternalError("--trace_dir: cannot serialize RunMetadata");
  }
  GR_RETURN_IF_ERROR(WriteStringToFile(dir + "/run_metadata.pb", bytes));
  GR_RETURN_IF_ERROR(
      WriteStringToFile(dir + "/trace.json", StepStatsToChromeTrace(merged.step_stats())));
  std::cerr << "graphrun train: traced " << steps.size() << " steps of every task into " << dir
            << " (run_metadata.pb, trace.json; placeviz --run_metadata=" << dir
            << "/run_metadata.pb)" << std::endl;
  return absl::OkStatus();
}

const FlagSet& TrainFlagSet() {
  static const FlagSet* kFlags = [] {
    auto* f = new FlagSet();
    f->String("model", "mlp|cnn", "model of the zoo (default mlp)")
        .String("distribution", "parameter_server|mirrored|multi_worker_mirrored",
                "how training replicates: parameter servers (default; the embedded cluster or "
                "TF_CONFIG), mirrored (--num_replicas in-graph replicas in this process) or "
                "multi_worker_mirrored (one process per worker: --workers of the embedded "
                "cluster, or TF_CONFIG; no PS); both all-reduce the gradients")
        .String("num_replicas", "N",
                "mirrored: replicas, one device each (default 2); multi_worker_mirrored: "
                "replicas per worker, one device each (default: one per device of "
                "--replica_device_type on the worker, one on the CPU)")
        .String("replica_device_type", "TYPE",
                "mirrored and multi_worker_mirrored: the replicas' devices: CPU (default), "
                "GPU, ... (soft placement: ops without a kernel of the type run on a CPU)")
        .String("auto_shard_policy", "auto|data|file|off",
                "multi_worker_mirrored: how the training data is split among the workers, as "
                "tf.data's (default auto)")
        .String("allreduce_pack_bytes", "N",
                "all-reduce: gradients fused into packs of at most N bytes (default 4194304; 0: "
                "one collective per gradient)")
        .String("data", "DIR", "IDX files (default /usr/share/datasets/fashion-mnist)")
        .Bool("local", "one process, in-process session (no cluster)")
        .Bool("in_process",
              "the embedded cluster's tasks as gRPC servers in this process (default: one "
              "process per task)")
        .String("ps", "N",
                "PS tasks of the embedded cluster (default 2); under srun, the first N ranks "
                "(default 1)")
        .String("port_base", "P",
                "under srun: a task listens on P + its rank on its node (default 2222)")
        .String("workers", "M",
                "worker tasks of the embedded cluster (default 2); under a TF_CONFIG "
                "sparseCluster, the job's training tasks (chief and workers)")
        .Bool("sync",
              "synchronous replicas: every update averages one batch of every "
              "worker (SyncReplicasOptimizer); default async")
        .String("epochs", "E", "passes over the training set (default 5)")
        .String("steps", "S", "stop at global step S (instead of --epochs)")
        .String("batch_size", "B", "global batch, split over the workers (default 256)")
        .String("optimizer", "sgd|momentum|adam", "default adam")
        .String("learning_rate", "LR", "default adam 0.001, momentum 0.01, sgd 0.1")
        .String("checkpoint_dir", "DIR",
                "checkpoints; resumes from them (default "
                "/tmp/graphrun_train; '' for none)")
        .String("save_checkpoint_steps", "N", "checkpoint every N global steps (default 500)")
        .String("save_checkpoint_secs", "S", "and/or every S seconds (default 0: off)")
        .String("strategy", "NAME",
                "variable placement: balanced (default), greedy_bytes, "
                "round_robin")
        .String("max_restarts", "N",
                "when a task of the embedded cluster dies, restart the cluster from the last "
                "checkpoint at most N times (default 3)")
        .String("export_graph", "FILE",
                "after training, write the frozen inference graph for `graphrun run` "
                "(feed images, fetch predictions/probabilities; .pbtxt: text)")
        .String("export_saved_model", "DIR",
                "after training, write a SavedModel (signature serving_default: images -> "
                "probabilities, classes) for `graphrun run DIR --signature=serving_default`")
        .String("summary_dir", "DIR",
                "TensorBoard event files: the chief's training scalars under DIR/train, an "
                "evaluator's under DIR/eval")
        .String("bind", "HOST",
                "under TF_CONFIG: address to listen on (default: the task's cluster host if "
                "it is this machine's, else 0.0.0.0)")
        .Bool("insecure", "under TF_CONFIG: serve beyond loopback without credentials")
        .String("trace_dir", "DIR",
                "after --trace_warmup_steps chief steps, trace --trace_steps steps of every task "
                "and write DIR/run_metadata.pb and DIR/trace.json (Chrome trace with Send->Recv "
                "arrows; placeviz --run_metadata=DIR/run_metadata.pb shows bytes per task pair)")
        .String("trace_steps", "N", "steps to trace (default 3)")
        .String("trace_warmup_steps", "N", "chief steps before tracing (default 20)")
        .String("metrics_port", "P",
                "under TF_CONFIG: serve Prometheus metrics at http://HOST:P/metrics")
        .String("heartbeat_interval_ms", "N",
                "the task servers' heartbeats to the peers in use, every N ms (default 1000; "
                "0: none)")
        .String("heartbeat_misses", "N", "a peer is dead after N unanswered (default 3)")
        .Bool("evaluator",
              "evaluate each new checkpoint of --checkpoint_dir on the test set (one JSON line "
              "each) until the chief's final one, instead of training")
        .String("eval_timeout_secs", "S",
                "evaluator: give up after S seconds without a new checkpoint (default 0: wait)")
        .String("format", "text|json", "json: print only the final JSON line")
        .String("log_every", "N", "progress line every N chief steps (default 100)")
        .String("seed", "N", "initializer and shuffle seed (default 1)")
        .String("intra_op_threads", "N",
                "threads inside one kernel (--local: 0 = cores; "
                "per task: default 1)")
        .String("inter_op_threads", "N",
                "threads running nodes (--local: 0 = cores; per "
                "task: default 2)");
    AddCredentialFlags(*f);
    return f;
  }();
  return *kFlags;
}

std::string OptNum(const std::optional<double>& v) {
  return v.has_value() ? JsonNumber(*v) : "null";
}
}  // namespace

absl::StatusOr<TrainConfig> ParseTrainFlags(absl::Span<const std::string> args) {
  GR_ASSIGN_OR_RETURN(ParsedFlags f, TrainFlagSet().Parse(args));
  if (!f.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("train: unexpected argument '", f.positional()[0], "'"));
  }
  TrainConfig c;
  c.model = f.GetString("model", c.model);
  if (c.model != "mlp" && c.model != "cnn") {
    return absl::InvalidArgumentError(absl::StrCat("--model: '", c.model, "' is not mlp or cnn"));
  }
  c.data_dir = f.GetString("data", c.data_dir);
  c.distribution = f.GetString("distribution", c.distribution);
  if (c.distribution != "parameter_server" && c.distribution != "mirrored" &&
      c.distribution != "multi_worker_mirrored") {
    return absl::InvalidArgumentError(
        absl::StrCat("--distribution: '", c.distribution,
                     "' is not parameter_server, mirrored or multi_worker_mirrored"));
  }
  const bool mirrored = c.distribution == "mirrored";
  const bool multi_worker = c.distribution == "multi_worker_mirrored";
  if (!mirrored && !multi_worker && f.Has("num_replicas")) {
    return absl::InvalidArgumentError(
        "--num_replicas: only with --distribution=mirrored or multi_worker_mirrored");
  }
  if (!mirrored && !multi_worker && f.Has("replica_device_type")) {
    return absl::InvalidArgumentError(
        "--replica_device_type: only with --distribution=mirrored or multi_worker_mirrored");
  }
  if (!mirrored && !multi_worker && f.Has("allreduce_pack_bytes")) {
    return absl::InvalidArgumentError(
        "--allreduce_pack_bytes: only with --distribution=mirrored or multi_worker_mirrored");
  }
  if (!multi_worker && f.Has("auto_shard_policy")) {
    return absl::InvalidArgumentError(
        "--auto_shard_policy: only with --distribution=multi_worker_mirrored");
  }
  if (mirrored || multi_worker) {
    std::vector<const char*> not_with = {"ps", "local", "in_process", "sync", "strategy"};
    if (mirrored) not_with.push_back("workers");
    for (const char* flag : not_with) {
      if (f.Has(flag)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, ": not with --distribution=", c.distribution,
                         mirrored ? " (in-graph replicas in one process, no parameter servers)"
                                  : " (one process per worker, no parameter servers)"));
      }
    }
    if (mirrored) {
      GR_ASSIGN_OR_RETURN(int64_t replicas, f.GetInt("num_replicas", c.num_replicas, 1, 256));
      c.num_replicas = static_cast<int>(replicas);
    } else {
      GR_ASSIGN_OR_RETURN(int64_t per_worker,
                          f.GetInt("num_replicas", c.replicas_per_worker, 1, 256));
      c.replicas_per_worker = static_cast<int>(per_worker);
    }
    c.replica_device_type = f.GetString("replica_device_type", c.replica_device_type);
    GR_ASSIGN_OR_RETURN(
        c.allreduce_pack_bytes,
        f.GetInt("allreduce_pack_bytes", c.allreduce_pack_bytes, 0, int64_t{1} << 40));
    c.auto_shard_policy = f.GetString("auto_shard_policy", c.auto_shard_policy);
    if (c.auto_shard_policy != "auto" && c.auto_shard_policy != "data" &&
        c.auto_shard_policy != "file" && c.auto_shard_policy != "off") {
      return absl::InvalidArgumentError(absl::StrCat("--auto_shard_policy: '", c.auto_shard_policy,
                                                     "' is not auto, data, file or off"));
    }
  }
  c.local = f.GetBool("local");
  c.in_process = f.GetBool("in_process");
  if (c.local && (f.Has("ps") || f.Has("workers"))) {
    return absl::InvalidArgumentError("--local: not with --ps/--workers");
  }
  GR_ASSIGN_OR_RETURN(int64_t ps, f.GetInt("ps", c.ps, 1, 64));
  GR_ASSIGN_OR_RETURN(int64_t workers, f.GetInt("workers", c.workers, 1, 64));
  c.ps = multi_worker ? 0 : static_cast<int>(ps);
  c.workers = static_cast<int>(workers);
  c.sync = f.GetBool("sync");
  if (c.sync && c.local) {
    return absl::InvalidArgumentError(
        "--sync: synchronous replicas need a cluster (--ps/--workers); --local trains one "
        "replica");
  }
  if (f.Has("epochs") && f.Has("steps")) {
    return absl::InvalidArgumentError("--epochs and --steps: give one");
  }
  GR_ASSIGN_OR_RETURN(c.epochs, f.GetInt("epochs", -1, 1, 1 << 20));
  GR_ASSIGN_OR_RETURN(c.steps, f.GetInt("steps", -1, 0, int64_t{1} << 40));
  GR_ASSIGN_OR_RETURN(c.batch_size, f.GetInt("batch_size", c.batch_size, 1, 1 << 20));
  c.optimizer = f.GetString("optimizer", c.optimizer);
  if (c.optimizer != "sgd" && c.optimizer != "momentum" && c.optimizer != "adam") {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer: '", c.optimizer, "' is not sgd, momentum or adam"));
  }
  if (f.Has("learning_rate")) {
    if (!absl::SimpleAtod(f.GetString("learning_rate"), &c.learning_rate) ||
        !(c.learning_rate > 0) || !std::isfinite(c.learning_rate)) {
      return absl::InvalidArgumentError("--learning_rate: expected a positive number");
    }
  }
  c.checkpoint_dir = f.GetString("checkpoint_dir", c.checkpoint_dir);
  GR_ASSIGN_OR_RETURN(
      c.save_checkpoint_steps,
      f.GetInt("save_checkpoint_steps", c.save_checkpoint_steps, 0, int64_t{1} << 40));
  if (f.Has("save_checkpoint_secs")) {
    if (!absl::SimpleAtod(f.GetString("save_checkpoint_secs"), &c.save_checkpoint_secs) ||
        !(c.save_checkpoint_secs >= 0) || !std::isfinite(c.save_checkpoint_secs)) {
      return absl::InvalidArgumentError("--save_checkpoint_secs: expected seconds >= 0");
    }
  }
  c.strategy = f.GetString("strategy", c.strategy);
  if (f.Has("strategy") && c.local) {
    return absl::InvalidArgumentError("--strategy: --local places nothing (no PS tasks)");
  }
  const bool from_slurm =
      std::getenv("TF_CONFIG") == nullptr && distributed::UnderSlurm(std::getenv) && !c.local;
  if (f.Has("port_base") && !from_slurm) {  // it was ignored silently
    return absl::InvalidArgumentError(
        "--port_base: only for tasks started by srun (the cluster then comes from SLURM_*)");
  }
  if (const char* tf_config = std::getenv("TF_CONFIG"); tf_config != nullptr) {
    c.tf_config = tf_config;
  } else if (from_slurm) {
    // A task of `srun graphrun train`: the cluster from SLURM_* (TF_CONFIG,
    // when set, wins). Exported, so that a ps task served as `graphrun
    // server` reads the same.
    distributed::SlurmOptions so;
    GR_ASSIGN_OR_RETURN(int64_t num_ps, f.GetInt("ps", multi_worker ? 0 : 1, 0, 64));
    GR_ASSIGN_OR_RETURN(int64_t port_base, f.GetInt("port_base", 2222, 1, 65535));
    so.num_ps = static_cast<int>(num_ps);
    so.port_base = static_cast<int>(port_base);
    GR_ASSIGN_OR_RETURN(c.tf_config, distributed::TfConfigFromSlurm(std::getenv, so));
    setenv("TF_CONFIG", c.tf_config.c_str(), 1);
  }
  const bool external = !c.tf_config.empty();
  if (external && f.Has("workers")) {
    // A sparseCluster (TFJob's enableDynamicWorker) does not say how many
    // training tasks the job has; --workers does. A full cluster says it.
    GR_ASSIGN_OR_RETURN(distributed::TfConfig cfg, distributed::ParseTfConfig(c.tf_config));
    const int named = cfg.cluster.num_tasks("chief") + cfg.cluster.num_tasks("worker");
    if (cfg.sparse) {
      c.cluster_replicas = c.workers;
    } else if (c.workers != named) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--workers=", c.workers, ": TF_CONFIG's cluster has ", named,
          " training tasks (chief and workers); --workers counts them only for a sparseCluster"));
    }
  }
  if (multi_worker && c.auto_shard_policy == "file") {
    // The zoo's training set is one file: too few to shard by file among
    // several workers. Said before any task starts.
    int workers = c.workers;
    if (external) {
      GR_ASSIGN_OR_RETURN(distributed::TfConfig cfg, distributed::ParseTfConfig(c.tf_config));
      if (!cfg.sparse) workers = cfg.cluster.num_tasks("chief") + cfg.cluster.num_tasks("worker");
    }
    if (workers > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auto_shard_policy=file: the training set is 1 file (", c.data_dir,
          "/train-images-idx3-ubyte[.gz]) for ", workers,
          " workers; sharding by file needs at least one file per worker (use data or auto)"));
    }
  }
  if (mirrored || (multi_worker && !external)) {
    // (Replicas per worker by default are known once the workers have
    // their devices: one on the CPU.)
    const int per_worker = c.replicas_per_worker > 0        ? c.replicas_per_worker
                           : c.replica_device_type == "CPU" ? 1
                                                            : 0;
    const int replicas = mirrored ? c.num_replicas : c.workers * std::max(per_worker, 1);
    if (c.batch_size < replicas || c.batch_size % replicas != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--batch_size: the global batch ", c.batch_size, " does not divide evenly among ",
          replicas,
          mirrored         ? " replicas"
          : per_worker > 1 ? absl::StrCat(" replicas (", c.workers, " workers x ", per_worker, ")")
                           : " workers"));
    }
  } else if (!c.local && !multi_worker) {
    // Checked here, before any task starts.
    GR_RETURN_IF_ERROR(client::trainer::CheckTrainStrategy(c.strategy));
    if (!external) {
      auto per_replica = data::PerReplicaBatchSize(c.batch_size, c.workers);
      if (!per_replica.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--batch_size: ", per_replica.status().message()));
      }
    }
  }
  GR_ASSIGN_OR_RETURN(int64_t restarts, f.GetInt("max_restarts", c.max_restarts, 0, 100));
  c.max_restarts = static_cast<int>(restarts);
  c.summary_dir = f.GetString("summary_dir", "");
  c.evaluator = f.GetBool("evaluator");
  c.bind_host = f.GetString("bind", "");
  c.insecure = f.GetBool("insecure");
  if (f.Has("trace_dir")) {
    GR_ASSIGN_OR_RETURN(int64_t trace_steps, f.GetInt("trace_steps", 3, 1, 1000));
    GR_ASSIGN_OR_RETURN(c.trace_warmup_steps, f.GetInt("trace_warmup_steps", 20, 0, 1 << 30));
    c.trace_steps = static_cast<int>(trace_steps);
    const std::string dir = f.GetString("trace_dir");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("--trace_dir: cannot create ", dir, ": ", ec.message()));
    }
    c.on_trace = [dir](std::vector<tensorflow::RunMetadata> steps) {
      absl::Status s = WriteTrace(dir, steps);
      if (!s.ok()) std::cerr << StatusToLine(s) << "\n";
    };
  } else if (f.Has("trace_steps") || f.Has("trace_warmup_steps")) {
    return absl::InvalidArgumentError("--trace_steps/--trace_warmup_steps: only with --trace_dir");
  }
  GR_ASSIGN_OR_RETURN(int64_t metrics_port, f.GetInt("metrics_port", -1, -1, 65535));
  c.metrics_port = static_cast<int>(metrics_port);
  GR_ASSIGN_OR_RETURN(c.heartbeat_interval_ms,
                      f.GetInt("heartbeat_interval_ms", c.heartbeat_interval_ms, 0, 3600000));
  GR_ASSIGN_OR_RETURN(int64_t misses, f.GetInt("heartbeat_misses", c.heartbeat_misses, 1, 1000));
  c.heartbeat_misses = static_cast<int>(misses);
  const CredentialArgs creds = GetCredentialArgs(f);
  c.auth_token_file = creds.auth_token_file;
  c.tls_ca_file = creds.tls_ca;
  c.tls_cert_file = creds.tls_cert;
  c.tls_key_file = creds.tls_key;
  // Read here so that the trainer's tasks never start without them.
  GR_RETURN_IF_ERROR(LoadCredentials(creds).status());
  if (f.Has("eval_timeout_secs")) {
    if (!absl::SimpleAtod(f.GetString("eval_timeout_secs"), &c.eval_timeout_secs) ||
        !(c.eval_timeout_secs >= 0) || !std::isfinite(c.eval_timeout_secs)) {
      return absl::InvalidArgumentError("--eval_timeout_secs: expected seconds >= 0");
    }
  }
  if (c.evaluator && c.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("--evaluator: needs the chief's --checkpoint_dir");
  }
  c.export_graph = f.GetString("export_graph", "");
  if (!c.export_graph.empty() && c.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        "--export_graph: needs checkpoints (the exported weights are the last checkpoint's); "
        "give --checkpoint_dir");
  }
  c.export_saved_model = f.GetString("export_saved_model", "");
  std::string format = f.GetString("format", "text");
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError("--format: expected text or json");
  }
  c.json_only = format == "json";
  GR_ASSIGN_OR_RETURN(c.log_every, f.GetInt("log_every", c.log_every, 1, int64_t{1} << 40));
  GR_ASSIGN_OR_RETURN(c.seed, f.GetInt("seed", c.seed, 1, int64_t{1} << 40));
  GR_ASSIGN_OR_RETURN(int64_t intra, f.GetInt("intra_op_threads", 0, 0, 256));
  GR_ASSIGN_OR_RETURN(int64_t inter, f.GetInt("inter_op_threads", 0, 0, 256));
  c.intra_op_threads = static_cast<int>(intra);
  c.inter_op_threads = static_cast<int>(inter);
  return c;
}

std::string JsonStringList(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& s : items) quoted.push_back(JsonQuote(s));
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

std::string TrainResultToJson(const TrainConfig& c, const TrainResult& r) {
  return absl::StrCat(
      "{\"test_accuracy\": ", OptNum(r.test_accuracy), ", \"global_step\": ", r.global_step,
      ", \"examples_per_sec\": ", FormatDoubleShortest(r.examples_per_sec),
      ", \"restored_from_step\": ",
      r.restored_from_step.has_value() ? absl::StrCat(*r.restored_from_step) : "null",
      ", \"test_loss\": ", OptNum(r.test_loss), ", \"first_loss\": ", OptNum(r.first_loss),
      ", \"last_loss\": ", OptNum(r.last_loss), ", \"examples\": ", r.examples,
      ", \"seconds\": ", FormatDoubleShortest(r.seconds), ", \"model\": ", JsonQuote(c.model),
      ", \"mode\": ", JsonQuote(r.mode), ", \"ps\": ", r.num_ps, ", \"workers\": ", r.num_workers,
      ", \"sync\": ", c.sync ? "true" : "false", ", \"strategy\": ",
      c.local || c.distribution != "parameter_server" ? "null" : JsonQuote(c.strategy),
      ", \"optimizer\": ", JsonQuote(c.optimizer), ", \"batch_size\": ", c.batch_size,
      ", \"checkpoint\": ", r.checkpoint.empty() ? "null" : JsonQuote(r.checkpoint),
      ", \"exported_graph\": ", r.exported_graph.empty() ? "null" : JsonQuote(r.exported_graph),
      ", \"exported_saved_model\": ",
      r.exported_saved_model.empty() ? "null" : JsonQuote(r.exported_saved_model),
      ", \"restarts\": ", r.restarts,
      ", \"restored_devices\": ", JsonStringList(r.restored_devices),
      ", \"distribution\": ", JsonQuote(c.local ? "one_device" : c.distribution),
      ", \"replicas\": ", r.num_replicas > 0 ? r.num_replicas : r.num_workers, ", \"allreduce\": ",
      r.allreduce.has_value() ? absl::StrCat("{\"algorithm\": ", JsonQuote(r.allreduce->algorithm),
                                             ", \"packs\": ", r.allreduce->packs,
                                             ", \"bytes_per_step\": ", r.allreduce->bytes, "}")
                              : std::string("null"),
      "}");
}

int TrainCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  absl::StatusOr<TrainConfig> c = ParseTrainFlags(args);
  if (!c.ok()) {
    err << StatusToLine(c.status()) << "\n";
    return kExitUsage;
  }
  // Whether --trace_dir got any traced step (the chief's loop thread
  // hands them over).
  std::atomic<bool> traced{false};
  if (c->on_trace) {
    c->on_trace = [write = std::move(c->on_trace),
                   &traced](std::vector<tensorflow::RunMetadata> steps) {
      traced = true;
      write(std::move(steps));
    };
  }
  if (c->evaluator || (!c->local && client::trainer::TfConfigTaskIs(*c, "evaluator"))) {
    // The evaluator task of any distribution: it reads the chief's
    // checkpoints, and needs no server.
    if (!c->json_only) err << "graphrun train: running as the evaluator\n";
    absl::Status s = client::trainer::RunEvaluator(*c, out, c->json_only ? nullptr : &err);
    if (!s.ok()) {
      err << StatusToLine(s) << "\n";
      return kExitFailure;
    }
    return kExitOk;
  }
  if (!c->local && c->distribution == "parameter_server" &&
      client::trainer::TfConfigTaskIs(*c, "ps")) {
    // A PS task of an external cluster only serves its variables.
    err << "graphrun train: TF_CONFIG names a ps task; serving it as `graphrun server`\n";
    std::vector<std::string> server_args;
    if (!c->bind_host.empty()) server_args.push_back("--bind=" + c->bind_host);
    if (c->insecure) server_args.push_back("--insecure");
    if (c->metrics_port >= 0)
      server_args.push_back(absl::StrCat("--metrics_port=", c->metrics_port));
    server_args.push_back(absl::StrCat("--heartbeat_interval_ms=", c->heartbeat_interval_ms));
    server_args.push_back(absl::StrCat("--heartbeat_misses=", c->heartbeat_misses));
    server_args.push_back("--allowed_dirs=" +
                          absl::StrJoin(client::trainer::TaskAllowedDirs(*c), ","));
    CredentialArgs creds{c->auth_token_file, c->tls_ca_file, c->tls_cert_file, c->tls_key_file};
    for (std::string& flag : creds.ToFlags()) server_args.push_back(std::move(flag));
    return ServerCommand(server_args, out, err);
  }
  c->notices = &err;
  absl::StatusOr<TrainResult> r = client::trainer::Train(*c, c->json_only ? nullptr : &out);
  if (!r.ok()) {
    err << StatusToLine(r.status()) << "\n";
    return kExitFailure;  // usage errors were found by ParseTrainFlags
  }
  if (c->on_trace && !traced.load() && r->test_accuracy.has_value()) {
    // Asynchronous workers can take the steps a chief needed to reach
    // the traced window; that is worth a line, not a failed run. (Only
    // the chief, which evaluates, traces.)
    err << "graphrun train: --trace_dir: nothing traced: training ended before the chief ran "
        << c->trace_warmup_steps << " steps (--trace_warmup_steps)\n";
  }
  if (!c->json_only) {
    out << "trained to global step " << r->global_step
        << (!r->restored_devices.empty()
                ? absl::StrCat(" (", absl::StrJoin(r->restored_devices, ", "),
                               " restored from the checkpoint of step ",
                               r->restored_from_step.value_or(-1), ")")
            : r->restored_from_step ? absl::StrCat(" (resumed from ", *r->restored_from_step, ")")
                                    : std::string())
        << ": " << absl::StrFormat("%.0f", r->examples_per_sec) << " examples/s, test accuracy "
        << (r->test_accuracy ? absl::StrFormat("%.4f", *r->test_accuracy) : "n/a")
        << (r->checkpoint.empty() ? std::string() : ", checkpoint " + r->checkpoint) << "\n";
  }
  out << TrainResultToJson(*c, *r) << "\n";
  return kExitOk;
}

std::string TrainUsage() {
  return absl::StrCat(
      "usage: graphrun train [--model=mlp|cnn] [--data=DIR] [--ps=N --workers=M [--sync] |\n"
      "                      --local]\n"
      "                      [--epochs=E | --steps=S] [--batch_size=B] [--optimizer=...]\n"
      "                      [--learning_rate=LR] [--checkpoint_dir=DIR] [--strategy=NAME]\n"
      "                      [--export_graph=FILE] [--format=text|json]\n\n"
      "Trains a model of the zoo on IDX files (Fashion-MNIST by default), by default on\n"
      "a local cluster of 2 PS and 2 worker tasks, one process each (between-graph replication,\n"
      "async updates; --sync averages every worker's batch into one update), evaluates it\n"
      "on the t10k files and prints one JSON line.\n"
      "A second run with the same --checkpoint_dir resumes. With TF_CONFIG set, runs as\n"
      "that task of an external cluster.\n\nflags:\n",
      TrainFlagSet().Usage());
}

}  // namespace tools
}  // namespace graphrun
