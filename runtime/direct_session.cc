#include "runtime/direct_session.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/function_lowering.h"
#include "graph/ops/all_ops.h"
#include "graph/status.h"
#include "kernels/all_kernels.h"
#include "runtime/local_rendezvous.h"
#include "runtime/session_factory.h"
#include "runtime/step_pipeline.h"

namespace graphrun {
namespace {

class SimpleCallFrame : public CallFrameInterface {
 public:
  SimpleCallFrame(std::vector<Tensor> args, int num_retvals)
      : args_(std::move(args)), retvals_(num_retvals) {}
  absl::StatusOr<Tensor> GetArg(int index) const override {
    if (index < 0 || index >= static_cast<int>(args_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no argument ", index));
    }
    return args_[index];
  }
  absl::Status SetRetval(int index, const Tensor& value) override {
    std::lock_guard<std::mutex> l(mu_);
    if (index < 0 || index >= static_cast<int>(retvals_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no result ", index));
    }
    retvals_[index] = value;
    return absl::OkStatus();
  }
  std::vector<Tensor> TakeRetvals() { return std::move(retvals_); }

 private:
  std::vector<Tensor> args_;
  std::mutex mu_;
  std::vector<Tensor> retvals_;
};

int DefaultThreads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

}  // namespace

absl::StatusOr<std::unique_ptr<Session>> NewSession(const SessionOptions& options) {
  if (!options.target.empty() && options.target != "local") {
    if (SessionFactory factory = FindSessionFactory(options.target)) return factory(options);
    return absl::InvalidArgumentError(
        absl::StrCat("session target '", options.target,
                     "' is not supported by this build (only local sessions)"));
  }
  GR_ASSIGN_OR_RETURN(std::unique_ptr<DirectSession> s, DirectSession::Create(options));
  return std::unique_ptr<Session>(std::move(s));
}

absl::StatusOr<std::unique_ptr<DirectSession>> DirectSession::Create(
    const SessionOptions& options) {
  std::unique_ptr<DirectSession> s(new DirectSession());
  s->options_ = options;
  s->op_registry_ = options.op_registry ? options.op_registry : &DefaultOpRegistry();
  s->kernel_registry_ =
      options.kernel_registry ? options.kernel_registry : &DefaultKernelRegistry();
  const auto& cfg = options.config;
  DeviceMgrOptions dm;
  auto it = cfg.device_count().find("CPU");
  dm.num_cpus = it == cfg.device_count().end() ? 1 : it->second;
  for (const auto& [type, count] : cfg.device_count()) {
    if (type != kDeviceCpu) dm.device_count[type] = count;
  }
  dm.device_factories = options.device_factories;
  if (cfg.gpu_options().per_process_gpu_memory_fraction() < 0 ||
      cfg.gpu_options().per_process_gpu_memory_fraction() > 1) {
    return absl::InvalidArgumentError(
        "gpu_options.per_process_gpu_memory_fraction must be in [0, 1]");
  }
  dm.accelerator_memory_fraction = cfg.gpu_options().per_process_gpu_memory_fraction();
  dm.accelerator_allow_growth = cfg.gpu_options().allow_growth();
  if (cfg.intra_op_parallelism_threads() < 0 || cfg.inter_op_parallelism_threads() < 0) {
    return absl::InvalidArgumentError("thread counts must not be negative");
  }
  dm.intra_op_threads = cfg.intra_op_parallelism_threads();
  GR_ASSIGN_OR_RETURN(s->device_mgr_, DeviceMgr::NewLocal(dm));
  int inter = cfg.inter_op_parallelism_threads() > 0 ? cfg.inter_op_parallelism_threads()
                                                     : DefaultThreads();
  s->inter_op_pool_ = std::make_unique<ThreadPool>("inter_op", inter);
  ThreadPool* collective_pool = s->inter_op_pool_.get();
  s->collectives_ = std::make_unique<InProcessCollectives>(
      [collective_pool](std::function<void()> fn) { collective_pool->Schedule(std::move(fn)); });
  return s;
}

DirectSession::~DirectSession() { Close().IgnoreError(); }

absl::Status DirectSession::ValidateAndSetGraph(tensorflow::GraphDef def,
                                                tensorflow::FunctionDefLibrary library) {
  // Full validation (ops, attrs, edges, types, cycles, shapes) up front, so
  // a bad graph fails at Create with the node named.
  auto origin = std::make_shared<absl::flat_hash_map<std::string, std::string>>();
  if (origin_ != nullptr) *origin = *origin_;
  GR_ASSIGN_OR_RETURN(def, CanonicalizeGraphDefForSession(def, *op_registry_, {}, origin.get()));
  GR_RETURN_IF_ERROR(
      AnnotateLoweringError(GraphFromGraphDef(def, *op_registry_).status(), *origin));
  graph_def_ = std::move(def);
  library_ = std::move(library);
  origin_ = std::move(origin);
  has_graph_ = true;
  ++graph_version_;
  executors_.clear();
  return absl::OkStatus();
}

absl::Status DirectSession::Annotated(absl::Status s) {
  if (s.ok()) return s;
  std::shared_ptr<const absl::flat_hash_map<std::string, std::string>> origin;
  {
    std::lock_guard<std::mutex> l(mu_);
    origin = origin_;
  }
  return origin == nullptr ? s : AnnotateLoweringError(s, *origin);
}

absl::Status DirectSession::Create(const tensorflow::GraphDef& graph) {
  std::lock_guard<std::mutex> l(mu_);
  if (closed_) return absl::FailedPreconditionError("session is closed");
  if (has_graph_) {
    return absl::FailedPreconditionError("session already has a graph; use Extend");
  }
  GR_RETURN_IF_ERROR(ValidateNodeNames(graph));
  tensorflow::FunctionDefLibrary library;
  GR_RETURN_IF_ERROR(MergeFunctionLibrary(graph.library(), &library));
  return ValidateAndSetGraph(graph, std::move(library));
}

absl::Status DirectSession::Extend(const tensorflow::GraphDef& graph) {
  std::lock_guard<std::mutex> l(mu_);
  if (closed_) return absl::FailedPreconditionError("session is closed");
  GR_RETURN_IF_ERROR(ValidateNodeNames(graph));
  tensorflow::GraphDef merged = graph_def_;
  for (const auto& n : graph.node()) *merged.add_node() = n;
  // The functions of earlier graphs stay callable, as in TensorFlow.
  tensorflow::FunctionDefLibrary library = library_;
  GR_RETURN_IF_ERROR(MergeFunctionLibrary(graph.library(), &library));
  // Attached when the extension brings functions (lowering checks them)
  // or its nodes call into the library; an extension of plain nodes is
  // not lowered again (a kept call frame's functions are in `merged`).
  if (graph.library().function_size() > 0 || CallsLibrary(graph, library)) {
    *merged.mutable_library() = library;
  }
  if (!has_graph_) *merged.mutable_versions() = graph.versions();
  return ValidateAndSetGraph(std::move(merged), std::move(library));
}

absl::StatusOr<std::vector<DeviceAttributes>> DirectSession::ListDevices() {
  return device_mgr_->ListDeviceAttributes();
}

absl::Status DirectSession::Close() {
  std::lock_guard<std::mutex> l(mu_);
  closed_ = true;
  for (CancellationManager* cm : running_) cm->StartCancel();
  return absl::OkStatus();
}

std::shared_ptr<const NodeDevices> DirectSession::Pinned(
    const tensorflow::GraphDef& def, int64_t version,
    const std::vector<placement::DeviceInfo>& devices) {
  std::shared_ptr<const NodeDevices> previous;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (pinned_ != nullptr && pinned_version_ == version) return pinned_;
    previous = pinned_;
  }
  auto pinned = std::make_shared<const NodeDevices>(
      PlaceStatefulNodes(def, *op_registry_, *kernel_registry_, devices[0].name, devices,
                         options_.config, options_.device_factories, previous.get()));
  std::lock_guard<std::mutex> l(mu_);
  if (version == graph_version_ && pinned_version_ != version) {
    pinned_ = pinned;
    pinned_version_ = version;
  }
  return pinned_version_ == version ? pinned_ : pinned;
}

absl::StatusOr<std::shared_ptr<DirectSession::ExecutorsAndKeys>>
DirectSession::GetOrCreateExecutors(const std::vector<std::string>& feeds,
                                    const std::vector<std::string>& fetches,
                                    const std::vector<std::string>& targets) {
  std::string key = ClientGraphKey(feeds, fetches, targets);
  tensorflow::GraphDef def;
  int64_t version = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return absl::CancelledError("session is closed");
    if (!has_graph_) {
      return absl::FailedPreconditionError("session has no graph; call Create first");
    }
    auto it = executors_.find(key);
    if (it != executors_.end()) return it->second;
    def = graph_def_;
    version = graph_version_;
  }
  const auto& devices = device_mgr_->devices();
  std::vector<placement::DeviceInfo> infos;
  for (const auto& d : devices) infos.push_back({d->name(), d->device_type()});
  std::shared_ptr<const NodeDevices> pinned = Pinned(def, version, infos);
  ClientGraphSpec spec{feeds, fetches, targets, devices[0]->name()};
  GR_ASSIGN_OR_RETURN(ClientGraph cg,
                      PlaceClientGraph(def, *op_registry_, *kernel_registry_, spec, infos,
                                       options_.config, options_.device_factories, pinned.get()));
  auto ek = std::make_shared<ExecutorsAndKeys>();
  ek->feed_types = cg.feed_types;
  ek->fetch_types = cg.fetch_types;
  FunctionRuntimeOptions call_frames;
  call_frames.allow_soft_placement = options_.config.allow_soft_placement();
  GR_ASSIGN_OR_RETURN(ek->executors,
                      DeviceExecutors::Build(*cg.graph, device_mgr_.get(), *op_registry_,
                                             *kernel_registry_, call_frames));
  std::lock_guard<std::mutex> l(mu_);
  executors_[key] = ek;
  return ek;
}

absl::StatusOr<std::vector<Tensor>> DirectSession::Run(const tensorflow::RunOptions& options,
                                                       const NamedTensorList& feeds,
                                                       const std::vector<std::string>& fetches,
                                                       const std::vector<std::string>& targets,
                                                       tensorflow::RunMetadata* metadata) {
  std::vector<std::string> feed_names;
  std::vector<Tensor> args;
  for (const auto& [name, t] : feeds) {
    feed_names.push_back(name);
    args.push_back(t);
  }
  auto executors = GetOrCreateExecutors(feed_names, fetches, targets);
  if (!executors.ok()) return Annotated(executors.status());
  std::shared_ptr<ExecutorsAndKeys> ek = *std::move(executors);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].IsInitialized() || args[i].dtype() != ek->feed_types[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", feed_names[i], "': the graph expects ",
                       DataTypeString(ek->feed_types[i]), " but the fed value is ",
                       args[i].IsInitialized() ? DataTypeString(args[i].dtype()) : "empty"));
    }
  }
  SimpleCallFrame frame(std::move(args), static_cast<int>(fetches.size()));
  LocalRendezvous rendezvous;
  CancellationManager cm;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return absl::CancelledError("session is closed");
    running_.push_back(&cm);
  }
  const bool trace =
      options.trace_level() != tensorflow::RunOptions::NO_TRACE && metadata != nullptr;
  tensorflow::StepStats step_stats;

  int64_t timeout_ms = options.timeout_in_ms() > 0 ? options.timeout_in_ms()
                                                   : options_.config.operation_timeout_in_ms();
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
  } waiter;
  DeviceExecutors::StepArgs sargs;
  sargs.step_id = next_step_id_.fetch_add(1);
  sargs.rendezvous = &rendezvous;
  sargs.call_frame = &frame;
  sargs.cancellation = &cm;
  sargs.inter_op_pool = inter_op_pool_.get();
  sargs.collectives = collectives_.get();
  sargs.stats = trace ? &step_stats : nullptr;
  // With a deadline this thread watches the clock, so nothing runs inline.
  sargs.run_last_inline = timeout_ms <= 0;
  DeviceExecutors::RunAsync(ek->executors, sargs, [&waiter](const absl::Status& s) {
    std::lock_guard<std::mutex> l(waiter.mu);
    waiter.status = s;
    waiter.done = true;
    waiter.cv.notify_all();
  });
  absl::Status step_status;
  {
    std::unique_lock<std::mutex> l(waiter.mu);
    if (timeout_ms > 0 && !waiter.cv.wait_for(l, std::chrono::milliseconds(timeout_ms),
                                              [&] { return waiter.done; })) {
      l.unlock();
      absl::Status deadline =
          absl::DeadlineExceededError(absl::StrCat("step timed out after ", timeout_ms, " ms"));
      step_status = deadline;
      rendezvous.StartAbort(deadline);
      cm.StartCancel();
      l.lock();
    }
    waiter.cv.wait(l, [&] { return waiter.done; });
    if (step_status.ok()) step_status = waiter.status;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    running_.erase(std::remove(running_.begin(), running_.end(), &cm), running_.end());
  }
  if (!step_status.ok()) return Annotated(step_status);
  if (metadata != nullptr) {
    if (trace) *metadata->mutable_step_stats() = std::move(step_stats);
    if (options.output_partition_graphs()) {
      for (auto& g : ek->executors->partition_graphs()) *metadata->add_partition_graphs() = g;
    }
  }
  std::vector<Tensor> out = frame.TakeRetvals();
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].IsInitialized()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fetch '", fetches[i],
                       "' produced no value (it is on an untaken "
                       "branch of a conditional, or the step stopped early)"));
    }
  }
  return out;
}

}  // namespace graphrun
