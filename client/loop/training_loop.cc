#include "client/loop/training_loop.h"

#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ops.h"
#include "graph/status.h"

namespace graphrun {
namespace client {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

LoggingHook::LoggingHook(int64_t every_n_steps, std::function<void(const std::string&)> sink,
                         std::string prefix)
    : every_(every_n_steps < 1 ? 1 : every_n_steps),
      sink_(std::move(sink)),
      prefix_(std::move(prefix)) {}

void LoggingHook::AfterStep(const StepInfo& step, const std::vector<std::string>& names) {
  if (step.local_step % every_ != 0) return;
  double dt = step.seconds - last_seconds_;
  double rate = dt > 0 ? static_cast<double>(step.examples - last_examples_) / dt : 0;
  last_seconds_ = step.seconds;
  last_examples_ = step.examples;
  std::string line = absl::StrCat(prefix_, "step ", step.global_step, " (epoch ", step.epoch, "):");
  for (size_t i = 0; i < step.metrics.size() && i < names.size(); ++i) {
    absl::StrAppend(&line, " ", names[i], "=", absl::StrFormat("%.4f", step.metrics[i]));
  }
  absl::StrAppend(&line, " examples/s=", absl::StrFormat("%.0f", rate));
  sink_(line);
}

absl::StatusOr<std::unique_ptr<TrainingLoop>> TrainingLoop::Create(const Scope& scope,
                                                                   TrainingGraph graph,
                                                                   TrainingLoopOptions options) {
  GR_RETURN_IF_ERROR(scope.status());
  if (graph.train_op.node() == nullptr || graph.init_op.node() == nullptr ||
      graph.global_step == nullptr) {
    return absl::InvalidArgumentError(
        "TrainingLoop: train_op, init_op and global_step are required");
  }
  if (graph.metrics.size() != graph.metric_names.size()) {
    return absl::InvalidArgumentError(absl::StrCat("TrainingLoop: ", graph.metrics.size(),
                                                   " metrics but ", graph.metric_names.size(),
                                                   " metric names"));
  }
  if (options.last_step < 0 && options.max_epochs < 0) {
    return absl::InvalidArgumentError(
        "TrainingLoop: set last_step or max_epochs, else the loop never ends");
  }
  if (options.max_epochs >= 0 && graph.iterator_init.node() == nullptr) {
    return absl::InvalidArgumentError("TrainingLoop: max_epochs needs an iterator_init");
  }
  std::unique_ptr<TrainingLoop> loop(new TrainingLoop());
  Scope s = scope.NewSubScope("training_loop");
  for (const Variable& v : graph.variables) {
    loop->is_initialized_.push_back(
        ops::VarIsInitializedOp(s.ColocateWith(v.op()), v.handle()).is_initialized);
  }
  loop->global_step_now_ = graph.global_step->Read(s);
  loop->global_step_after_ = graph.global_step->Read(s.WithControlDependencies({graph.train_op}));
  if ((options.is_chief || options.initializes_own_variables) && !options.checkpoint_dir.empty()) {
    if (graph.variables.empty()) {
      return absl::InvalidArgumentError("TrainingLoop: checkpoints need variables to save");
    }
    GR_ASSIGN_OR_RETURN(Saver saver, Saver::Create(scope, graph.variables, options.saver));
    loop->saver_.emplace(std::move(saver));
  }
  GR_RETURN_IF_ERROR(scope.status());
  loop->graph_ = std::move(graph);
  loop->options_ = std::move(options);
  return loop;
}

absl::StatusOr<int64_t> TrainingLoop::ReadGlobalStep(const ClientSession& session) const {
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, session.Run({global_step_now_}));
  return out[0].scalar<int64_t>();
}

absl::StatusOr<bool> TrainingLoop::AllInitialized(const ClientSession& session) const {
  if (is_initialized_.empty()) return true;
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, session.Run(is_initialized_));
  for (const Tensor& t : out) {
    if (!t.scalar<bool>()) return false;
  }
  return true;
}

absl::StatusOr<std::vector<bool>> TrainingLoop::InitializedFlags(
    const ClientSession& session) const {
  std::vector<bool> flags;
  if (is_initialized_.empty()) return flags;
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, session.Run(is_initialized_));
  for (const Tensor& t : out) flags.push_back(t.scalar<bool>());
  return flags;
}

absl::StatusOr<std::optional<int64_t>> TrainingLoop::PrepareVariables(
    const ClientSession& session) {
  if (options_.is_chief || options_.initializes_own_variables) {
    // A task the chief needs may not be up yet (tasks of a cluster start
    // in any order): Unavailable is retried until init_timeout, as
    // TensorFlow's master waits for its workers.
    auto deadline =
        std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(options_.init_timeout);
    while (true) {
      absl::StatusOr<std::optional<int64_t>> r = InitializeOrRestore(session);
      if (!absl::IsUnavailable(r.status())) return r;
      if (options_.stop != nullptr && options_.stop->load()) return r;
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::UnavailableError(absl::StrCat(kTaskNotUpMessage, " within ",
                                                   absl::FormatDuration(options_.init_timeout),
                                                   ": ", r.status().message()));
      }
      std::this_thread::sleep_for(absl::ToChronoMilliseconds(options_.init_poll_interval));
    }
  }
  auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(options_.init_timeout);
  absl::Status last = absl::OkStatus();
  while (true) {
    if (options_.stop != nullptr && options_.stop->load()) {
      return absl::CancelledError("TrainingLoop: stopped while waiting for initialization");
    }
    absl::StatusOr<bool> ready = AllInitialized(session);
    if (ready.ok() && *ready) return std::optional<int64_t>();
    if (!ready.ok()) last = ready.status();
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "TrainingLoop: variables not initialized by the chief within ",
          absl::FormatDuration(options_.init_timeout),
          last.ok() ? std::string() : absl::StrCat(" (last check: ", last.message(), ")")));
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(options_.init_poll_interval));
  }
}

absl::StatusOr<std::optional<int64_t>> TrainingLoop::InitializeOrRestore(
    const ClientSession& session) {
  restored_devices_.clear();
  std::vector<bool> flags;
  if (options_.keep_initialized_variables) {
    GR_ASSIGN_OR_RETURN(flags, InitializedFlags(session));
  }
  std::vector<std::string> lost;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (!flags[i]) lost.push_back(graph_.variables[i].name());
  }
  // With keep_initialized_variables (a replica rebuilt after a loss),
  // variables that hold values are kept: only the lost ones come back
  // from the checkpoint.
  if (!flags.empty() && lost.empty()) return std::optional<int64_t>();
  const bool partial = !lost.empty() && lost.size() < flags.size();
  if (saver_.has_value()) {
    absl::StatusOr<std::string> latest = Saver::LatestCheckpoint(options_.checkpoint_dir);
    if (latest.ok() && partial) {
      absl::StatusOr<std::vector<std::string>> devices =
          saver_->RestoreShardsOf(session, *latest, lost);
      if (!devices.ok()) {
        return absl::Status(devices.status().code(),
                            absl::StrCat("restoring ", *latest, ": ", devices.status().message()));
      }
      restored_devices_ = *std::move(devices);
      return std::optional<int64_t>(Saver::StepOfPrefix(*latest));
    }
    if (latest.ok()) {
      // Restore assigns every variable, so none is ever seen initialized
      // with fresh values by a waiting worker.
      absl::Status s = saver_->Restore(session, *latest);
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat("restoring ", *latest, ": ", s.message()));
      }
      GR_ASSIGN_OR_RETURN(int64_t step, ReadGlobalStep(session));
      return std::optional<int64_t>(step);
    }
    if (!absl::IsNotFound(latest.status())) return latest.status();
  }
  if (partial) {
    // init_op would reset the variables that survived as well.
    return absl::FailedPreconditionError(absl::StrCat(
        "TrainingLoop: ", lost.size(), " of ", flags.size(),
        " variables lost their values (a task holding them restarted?), first '", lost[0],
        "', and there is no checkpoint",
        options_.checkpoint_dir.empty() ? std::string() : " in " + options_.checkpoint_dir,
        " to restore them from"));
  }
  GR_RETURN_IF_ERROR(session.Run({}, {}, {graph_.init_op}).status());
  return std::optional<int64_t>();
}

absl::StatusOr<std::string> TrainingLoop::Save(const ClientSession& session) {
  if (!saver_.has_value() || !options_.is_chief) {
    return absl::FailedPreconditionError(
        "TrainingLoop: only the chief with a checkpoint_dir saves");
  }
  GR_ASSIGN_OR_RETURN(int64_t step, ReadGlobalStep(session));
  return saver_->Save(session, options_.checkpoint_dir, step);
}

absl::StatusOr<TrainingSummary> TrainingLoop::Run(const ClientSession& session) {
  bool hooks_started = false;
  absl::StatusOr<TrainingSummary> r = RunSteps(session, &hooks_started);
  if (!r.ok() && hooks_started) {
    for (const auto& hook : options_.hooks) hook->OnError(session, r.status());
  }
  return r;
}

absl::StatusOr<TrainingSummary> TrainingLoop::RunSteps(const ClientSession& session,
                                                       bool* hooks_started) {
  TrainingSummary summary;
  GR_ASSIGN_OR_RETURN(summary.restored_from_step, PrepareVariables(session));
  summary.restored_devices = restored_devices_;
  *hooks_started = true;
  for (const auto& hook : options_.hooks) {
    GR_RETURN_IF_ERROR(hook->AfterInit(session, options_.is_chief));
  }
  GR_ASSIGN_OR_RETURN(summary.initial_global_step, ReadGlobalStep(session));
  summary.global_step = summary.initial_global_step;
  if (graph_.iterator_init.node() != nullptr) {
    GR_RETURN_IF_ERROR(session.Run({}, {}, {graph_.iterator_init}).status());
  }
  std::vector<Output> fetches = graph_.metrics;
  fetches.push_back(global_step_after_);
  const auto t0 = std::chrono::steady_clock::now();
  auto last_save_time = t0;
  int64_t last_save_step = summary.global_step;
  auto should_stop = [&] {
    if (options_.stop != nullptr && options_.stop->load()) return true;
    return options_.last_step >= 0 && summary.global_step >= options_.last_step;
  };
  tensorflow::RunOptions step_options;
  if (options_.step_timeout_ms > 0) step_options.set_timeout_in_ms(options_.step_timeout_ms);
  StepInfo info;
  int64_t steps_this_epoch = -1;  // unknown before the first step
  std::vector<tensorflow::RunMetadata> traced;
  bool trace_done = false;
  while (!should_stop()) {
    const bool tracing = !trace_done && options_.trace_after_steps >= 0 && options_.on_trace &&
                         summary.local_steps >= options_.trace_after_steps;
    tensorflow::RunOptions run_options = step_options;
    tensorflow::RunMetadata metadata;
    if (tracing) {
      run_options.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
      run_options.set_output_partition_graphs(traced.empty());
    }
    absl::StatusOr<std::vector<Tensor>> out =
        session.Run({}, fetches, {graph_.train_op}, run_options, tracing ? &metadata : nullptr);
    if (tracing && out.ok()) {
      traced.push_back(std::move(metadata));
      if (static_cast<int>(traced.size()) >= options_.trace_steps) {
        options_.on_trace(std::move(traced));
        trace_done = true;
      }
    }
    if (absl::IsOutOfRange(out.status())) {
      // An epoch without a single step is not the end of the input but a
      // step that cannot run (e.g. a closed queue): an error, not a loop.
      if (steps_this_epoch == 0) return out.status();
      ++summary.epochs_completed;
      steps_this_epoch = 0;
      if (options_.max_epochs >= 0 && summary.epochs_completed >= options_.max_epochs) break;
      if (graph_.iterator_init.node() == nullptr) return out.status();
      GR_RETURN_IF_ERROR(session.Run({}, {}, {graph_.iterator_init}).status());
      continue;
    }
    GR_RETURN_IF_ERROR(out.status());
    ++steps_this_epoch;
    ++summary.local_steps;
    summary.examples += options_.examples_per_step;
    summary.global_step = out->back().scalar<int64_t>();
    info.local_step = summary.local_steps;
    info.global_step = summary.global_step;
    info.epoch = summary.epochs_completed;
    info.metrics.clear();
    for (size_t i = 0; i + 1 < out->size(); ++i) info.metrics.push_back((*out)[i].scalar<float>());
    info.examples = summary.examples;
    info.seconds = SecondsSince(t0);
    summary.last_metrics = info.metrics;
    if (options_.fail_on_nan_loss) {
      for (size_t i = 0; i < info.metrics.size() && i < graph_.metric_names.size(); ++i) {
        if (graph_.metric_names[i] == "loss" && !std::isfinite(info.metrics[i])) {
          return absl::FailedPreconditionError(absl::StrCat(
              "the loss is ", std::isnan(info.metrics[i]) ? "NaN" : "infinite", " at global step ",
              summary.global_step, ": the model diverged (a lower learning rate may help)"));
        }
      }
    }
    for (const auto& hook : options_.hooks) hook->AfterStep(info, graph_.metric_names);
    if (saver_.has_value() && options_.is_chief) {
      bool by_steps = options_.save_checkpoint_steps > 0 &&
                      summary.global_step - last_save_step >= options_.save_checkpoint_steps;
      bool by_time = options_.save_checkpoint_secs > 0 &&
                     SecondsSince(last_save_time) >= options_.save_checkpoint_secs;
      if (by_steps || by_time) {
        GR_ASSIGN_OR_RETURN(summary.last_checkpoint,
                            saver_->Save(session, options_.checkpoint_dir, summary.global_step));
        last_save_step = summary.global_step;
        last_save_time = std::chrono::steady_clock::now();
      }
    }
  }
  summary.seconds = SecondsSince(t0);
  // Training that ended inside the traced window still hands over the
  // steps it traced.
  if (!trace_done && !traced.empty()) options_.on_trace(std::move(traced));
  for (const auto& hook : options_.hooks) GR_RETURN_IF_ERROR(hook->AfterLoop(session));
  summary.examples_per_sec = summary.seconds > 0 ? summary.examples / summary.seconds : 0;
  if (saver_.has_value() && options_.is_chief && options_.save_at_end) {
    GR_ASSIGN_OR_RETURN(summary.global_step, ReadGlobalStep(session));
    if (summary.global_step != last_save_step || summary.last_checkpoint.empty()) {
      GR_ASSIGN_OR_RETURN(summary.last_checkpoint,
                          saver_->Save(session, options_.checkpoint_dir, summary.global_step));
    }
  }
  for (const auto& hook : options_.hooks) hook->End(summary);
  return summary;
}

}  // namespace client
}  // namespace graphrun
