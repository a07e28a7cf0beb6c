#include "distributed/rpc/grpc_server.h"

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "distributed/rpc/bind_address.h"
#include "distributed/rpc/grpc_services.h"
#include "distributed/rpc/grpc_worker_client.h"
#include "distributed/rpc/local_master.h"
#include "graph/memory_budget.h"
#include "graph/ops/all_ops.h"
#include "graph/status.h"
#include "kernels/all_kernels.h"
#include "util/metrics.h"

namespace graphrun {
namespace distributed {
namespace {

// Time in-flight calls get to finish when the server stops.
constexpr int64_t kShutdownGraceMs = 500;
// Time peers get to take this task's last collective pieces.
constexpr int kCollectiveDrainMs = 2000;

// Counts every RPC served by method and status code
// (graphrun_rpcs_total{method="/graphrun.WorkerService/RunGraph",code="OK"}).
class RpcCounting : public grpc::experimental::Interceptor {
 public:
  explicit RpcCounting(grpc::experimental::ServerRpcInfo* info) : method_(info->method()) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status st = methods->GetSendStatus();
      Metrics::Get().Increment(
          "graphrun_rpcs_total",
          {{"method", method_},
           {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code()))}});
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
};

class RpcCountingFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcCounting(info);
  }
};

void DescribeMetrics() {
  Metrics& m = Metrics::Get();
  m.Describe("graphrun_rpcs_total", "counter", "RPCs served, by method and status code");
  m.Describe("graphrun_steps_total", "counter", "steps run by this task's master, by status code");
  m.Describe("graphrun_step_seconds", "histogram", "step latency at this task's master");
  m.Describe("graphrun_recv_bytes_total", "counter",
             "tensor bytes received from each peer task, by path");
  m.Describe("graphrun_sent_bytes_total", "counter",
             "tensor bytes sent to each peer task (or to collectives), by path");
  m.Gauge("graphrun_tensor_bytes", "bytes of tensor buffers alive in this process",
          [] { return static_cast<double>(TensorBytesInUse()); });
  m.Gauge("graphrun_tensors", "tensor buffers alive in this process",
          [] { return static_cast<double>(TensorsInUse()); });
}

// gRPC's log lines while a server starts: kept, not printed, so that a
// failure to listen is one line saying why (the port is taken, the key
// does not match the certificate) instead of gRPC's multi-line dump and a
// guess. Outside a start, lines print as gRPC prints them.
std::mutex g_start_log_mu;           // one capture at a time
std::mutex g_log_mu;                 // guards g_start_log
std::string* g_start_log = nullptr;  // the capture in progress, if any

void StartLog(gpr_log_func_args* args) {
  {
    std::lock_guard<std::mutex> l(g_log_mu);
    if (g_start_log != nullptr) {
      absl::StrAppend(g_start_log, args->message, "\n");
      return;
    }
  }
  std::fprintf(stderr, "%s %s:%d] %s\n", gpr_log_severity_string(args->severity), args->file,
               args->line, args->message);
}

// Why gRPC could not listen, from its log: the first cause it names.
std::string ListenFailure(const std::string& log) {
  for (const char* cause : {"Address already in use", "Cannot assign requested address",
                            "Permission denied", "Invalid cert chain file", "Invalid private key",
                            "Name or service not known", "Address family not supported"}) {
    if (log.find(cause) != std::string::npos) return cause;
  }
  return "gRPC refused the address";
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(const ServerOptions& options) {
  std::unique_ptr<GrpcServer> s(new GrpcServer());
  s->options_ = options;
  if (options.job.empty()) return absl::InvalidArgumentError("server: --job is required");
  if (options.task < 0) return absl::InvalidArgumentError("server: --task must be >= 0");
  auto address = options.cluster.Address(options.job, options.task);
  if (!address.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("server: task ", options.job, ":", options.task,
                                                   " is not in the cluster (",
                                                   address.status().message(), ")"));
  }
  if (options.port < -1 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("server: bad port ", options.port));
  }
  if (options.max_message_bytes < 1024 ||
      options.max_message_bytes > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError("server: max_message_bytes must be in [1 KiB, 2 GiB - 1]");
  }
  if (options.recv_chunk_bytes < 1024 ||
      options.recv_chunk_bytes > options.max_message_bytes - 1024) {
    return absl::InvalidArgumentError(
        "server: recv_chunk_bytes must be in [1 KiB, max_message_bytes - 1 KiB]");
  }
  if (options.max_recv_tensor_bytes < 0) {
    return absl::InvalidArgumentError("server: max_recv_tensor_bytes must not be negative");
  }
  if (!options.auth_token.empty()) {
    GR_RETURN_IF_ERROR(CheckAuthToken(options.auth_token, "the server's options"));
  }
  if (options.inter_op_threads < 0 || options.intra_op_threads < 0) {
    return absl::InvalidArgumentError("server: thread counts must not be negative");
  }
  s->task_name_ = TaskName(options.job, options.task);
  DeviceMgrOptions dm;
  dm.job = options.job;
  dm.task = options.task;
  dm.num_cpus = options.num_cpus;
  dm.intra_op_threads = options.intra_op_threads;
  if (options.allowed_dirs.has_value()) {
    GR_ASSIGN_OR_RETURN(dm.file_access, FileAccessPolicy::Confined(*options.allowed_dirs));
  }
  GR_ASSIGN_OR_RETURN(s->device_mgr_, DeviceMgr::NewLocal(dm));
  int inter = options.inter_op_threads > 0
                  ? options.inter_op_threads
                  : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  s->inter_op_pool_ = std::make_unique<ThreadPool>("inter_op", inter);
  ChannelOptions copts;
  copts.max_message_bytes = options.max_message_bytes;
  copts.data_channel = options.data_channel;
  copts.data.max_tensor_bytes = options.max_recv_tensor_bytes;
  copts.auth_token = options.auth_token;
  copts.data.auth_token = options.auth_token;
  copts.tls = options.tls;
  copts.data.tls = options.tls;
  s->worker_cache_ = std::make_unique<GrpcWorkerCache>(options.cluster, copts);

  const OpRegistry* ops = options.op_registry ? options.op_registry : &DefaultOpRegistry();
  const KernelRegistry* kernels =
      options.kernel_registry ? options.kernel_registry : &DefaultKernelRegistry();
  s->worker_env_.task = s->task_name_;
  s->worker_env_.device_mgr = s->device_mgr_.get();
  s->worker_env_.op_registry = ops;
  s->worker_env_.kernel_registry = kernels;
  s->worker_env_.inter_op_pool = s->inter_op_pool_.get();
  s->worker_env_.worker_cache = s->worker_cache_.get();
  // The leader depends on the jobs only, not on the ports.
  s->collectives_ =
      std::make_unique<RemoteCollectives>(s->task_name_, s->worker_cache_.get(),
                                          RemoteCollectives::LeaderOf(options.cluster.TaskNames()));
  s->worker_env_.collectives = s->collectives_.get();
  if (options.limits.max_sessions < 1 || options.limits.max_concurrent_steps < 1 ||
      options.limits.max_graph_nodes < 1 || options.limits.max_plans_per_session < 1) {
    return absl::InvalidArgumentError(
        "max_sessions, max_concurrent_steps, max_graph_nodes and max_plans_per_session must be >= "
        "1");
  }
  s->worker_env_.limits = options.limits;
  if (options.heartbeat_interval_ms < 0 || options.heartbeat_misses < 1) {
    return absl::InvalidArgumentError(
        "heartbeat_interval_ms must be >= 0 and heartbeat_misses >= 1");
  }
  HealthOptions ho;
  ho.interval_ms = options.heartbeat_interval_ms;
  ho.misses = options.heartbeat_misses;
  ho.self_task = s->task_name_;
  s->health_ = std::make_unique<HealthMonitor>(ho, s->worker_cache_.get(), &std::cerr);
  s->collectives_->set_health(s->health_.get());
  s->collectives_->set_push(options.collective_push && options.heartbeat_interval_ms > 0);
  s->worker_env_.health = s->health_.get();
  s->worker_ = std::make_unique<Worker>(&s->worker_env_);
  s->worker_cache_->SetLocalWorker(s->task_name_, s->worker_.get());

  s->master_env_.task = s->task_name_;
  s->master_env_.worker_cache = s->worker_cache_.get();
  s->master_env_.op_registry = ops;
  s->master_env_.kernel_registry = kernels;
  s->master_env_.control_timeout_ms = options.control_timeout_ms;
  s->master_env_.health = s->health_.get();
  s->master_env_.limits = options.limits;
  s->master_ = std::make_unique<Master>(&s->master_env_);
  s->worker_service_ =
      std::make_unique<GrpcWorkerService>(s->worker_.get(), options.recv_chunk_bytes);
  s->master_service_ = std::make_unique<GrpcMasterService>(s->master_.get());
  s->gate_ = std::make_unique<ServingGate>(s->task_name_, options.auth_token);
  s->worker_service_->set_stats([p = s.get(), start = std::chrono::steady_clock::now()](
                                    TaskStats* stats) { p->FillStats(start, stats); });
  if (!options.await_cluster) s->gate_->Open();
  s->worker_service_->set_gate(s->gate_.get());
  s->master_service_->set_gate(s->gate_.get());
  return s;
}

GrpcServer::~GrpcServer() {
  Stop();
  if (health_ != nullptr) health_->Stop();  // a server never started (or refused by Create)
  // Sessions close before the worker and cache they use go away.
  master_.reset();
  worker_.reset();
}

absl::Status GrpcServer::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (started_) return absl::FailedPreconditionError("server already started");
  const std::string own_address = *options_.cluster.Address(options_.job, options_.task);
  options_.bind_host = ChooseBindHost(own_address, options_.bind_host);
  if (!IsLoopbackHost(options_.bind_host) && options_.auth_token.empty() &&
      !options_.tls.enabled()) {
    if (!options_.insecure) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", task_name_, " would listen on ", options_.bind_host, " (its cluster entry is ",
          own_address,
          "), beyond loopback, where anyone who reaches the port may run graphs on it; give the "
          "cluster certificates (--tls_ca, --tls_cert, --tls_key; `graphrun tls init` makes them) "
          "or a token (--auth_token_file or GRAPHRUN_AUTH_TOKEN), or --insecure to serve "
          "without credentials anyway, or --bind=127.0.0.1"));
    }
    std::cerr << "graphrun: warning: task " << task_name_ << " listens on " << options_.bind_host
              << " without credentials (--insecure): anyone who reaches the port can run graphs "
                 "on it\n";
  }
  int port = options_.port;
  if (port < 0) {
    std::string address = own_address;
    std::string port_text = address.substr(address.rfind(':') + 1);
    if (!absl::SimpleAtoi(port_text, &port)) {
      return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
    }
  }
  // The data channel checks the same credentials (secure_stream.h).
  if (options_.data_channel != DataChannelMode::kOff) {
    DataChannelOptions dopts;
    dopts.max_tensor_bytes = options_.max_recv_tensor_bytes;
    dopts.auth_token = options_.auth_token;
    dopts.tls = options_.tls;
    auto ds = DataChannelServer::Start(worker_.get(), options_.bind_host, dopts);
    if (ds.ok()) {
      data_server_ = std::move(*ds);
    } else if (options_.data_channel == DataChannelMode::kRequired) {
      return absl::UnavailableError(absl::StrCat("task ", task_name_, ": ", ds.status().message()));
    }
    // kPreferred: peers fall back to gRPC.
  }
  // An IPv6 host ("::", "::1") goes in brackets, as gRPC parses addresses.
  const bool ipv6 =
      options_.bind_host.find(':') != std::string::npos && options_.bind_host.front() != '[';
  std::string listen = ipv6 ? absl::StrCat("[", options_.bind_host, "]:", port)
                            : absl::StrCat(options_.bind_host, ":", port);
  grpc::ServerBuilder builder;
  // Never share a port with another process silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(listen, ServerCredentials(options_.tls), &bound_port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
  // Handlers block until their call completes (a RunStep for the whole
  // step), so at any time several threads hold calls. gRPC's defaults (at
  // most 2 idle pollers) make a thread exit after nearly every call and a
  // new one start for the next: measured 490 threads created in a 9 s
  // training run. Keep up to kMaxIdlePollers idle threads instead.
  constexpr int kMaxIdlePollers = 16;
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxIdlePollers);
  {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<RpcCountingFactory>());
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(master_service_.get());
  std::string start_log;
  {
    static std::once_flag installed;
    std::call_once(installed, [] { gpr_set_log_function(StartLog); });
    std::lock_guard<std::mutex> one(g_start_log_mu);
    {
      std::lock_guard<std::mutex> l(g_log_mu);
      g_start_log = &start_log;
    }
    server_ = builder.BuildAndStart();
    std::lock_guard<std::mutex> l(g_log_mu);
    g_start_log = nullptr;
  }
  if (server_ == nullptr || bound_port_ == 0) {
    server_.reset();
    data_server_.reset();
    return absl::UnavailableError(absl::StrCat("task ", task_name_, ": cannot listen on ", listen,
                                               ": ", ListenFailure(start_log)));
  }
  if (data_server_ != nullptr) worker_service_->set_data_port(data_server_->port());
  if (options_.metrics_port >= 0) {
    DescribeMetrics();
    auto ms = MetricsHttpServer::Start(options_.bind_host, options_.metrics_port);
    if (!ms.ok()) {
      server_->Shutdown();
      server_.reset();
      data_server_.reset();
      return absl::UnavailableError(absl::StrCat("task ", task_name_, ": ", ms.status().message()));
    }
    metrics_server_ = *std::move(ms);
  }
  // Sessions in this process reach the master without gRPC.
  local_target_ = target();
  LocalMaster::Register(local_target_, master_.get());
  started_ = true;
  return absl::OkStatus();
}

int GrpcServer::data_port() const {
  std::lock_guard<std::mutex> l(mu_);
  return data_server_ != nullptr ? data_server_->port() : 0;
}

void GrpcServer::FillStats(std::chrono::steady_clock::time_point start, TaskStats* stats) {
  ClusterSpec cluster;
  {
    std::lock_guard<std::mutex> l(mu_);
    cluster = options_.cluster;
  }
  stats->set_cluster_json(cluster.ToJson());
  stats->set_worker_sessions(worker_->num_sessions());
  stats->set_master_sessions(static_cast<int64_t>(master_->num_sessions()));
  const Metrics& m = Metrics::Get();
  stats->set_steps(static_cast<int64_t>(m.Sum("graphrun_steps_total")));
  stats->set_graph_runs(static_cast<int64_t>(
      m.Value("graphrun_rpcs_total",
              {{"method", "/graphrun.distributed.WorkerService/RunGraph"}, {"code", "OK"}})));
  // A series' bytes per peer, over both paths, into `out`; the total.
  auto per_peer = [&m](const char* series, const std::vector<std::string>& peers,
                       google::protobuf::RepeatedPtrField<PeerBytes>* out) {
    double total = 0;
    for (const std::string& peer : peers) {
      double bytes = 0;
      for (const char* path : {"data_channel", "grpc"}) {
        bytes += m.Value(series, {{"peer", peer}, {"path", path}});
      }
      if (bytes > 0) {
        PeerBytes* p = out->Add();
        p->set_peer(peer);
        p->set_bytes(static_cast<int64_t>(bytes));
      }
      total += bytes;
    }
    return total;
  };
  per_peer("graphrun_recv_bytes_total", cluster.TaskNames(), stats->mutable_received());
  std::vector<std::string> sent_peers = cluster.TaskNames();
  sent_peers.push_back("collective");
  sent_peers.push_back("unknown");
  stats->set_sent_bytes(static_cast<int64_t>(
      per_peer("graphrun_sent_bytes_total", sent_peers, stats->mutable_sent())));
  stats->set_tensor_bytes(TensorBytesInUse());
  stats->set_uptime_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count());
}

int GrpcServer::metrics_port() const {
  std::lock_guard<std::mutex> l(mu_);
  return metrics_server_ != nullptr ? metrics_server_->port() : 0;
}

GrpcWorkerClient::RecvTensorCounts GrpcServer::recv_tensor_counts() const {
  return worker_cache_->recv_tensor_counts();
}

void GrpcServer::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!started_ || stopped_) return;
    stopped_ = true;
  }
  // A stopping task does not judge its peers.
  health_->Stop();
  // Peers may still fetch the pieces of this task's last collective.
  collectives_->Drain(kCollectiveDrainMs);
  worker_->AbortAll(absl::UnavailableError(absl::StrCat("task ", task_name_, " is stopping")));
  collectives_->AbortAll(absl::UnavailableError(absl::StrCat("task ", task_name_, " is stopping")));
  // In-process sessions' calls get the grace period gRPC's get below.
  LocalMaster::Unregister(local_target_, master_.get(), kShutdownGraceMs);
  // Pending data-channel calls were just answered with that error; now the
  // connections close, so peers see the task go at once.
  worker_service_->set_data_port(0);
  if (data_server_ != nullptr) data_server_->Stop();
  metrics_server_.reset();
  server_->Shutdown(DeadlineAfterMs(kShutdownGraceMs));
  server_->Wait();
  std::lock_guard<std::mutex> l(mu_);
  stop_done_ = true;
  stopped_cv_.notify_all();
}

void GrpcServer::Join() {
  std::unique_lock<std::mutex> l(mu_);
  stopped_cv_.wait(l, [&] { return stop_done_ || !started_; });
}

std::string GrpcServer::target() const {
  std::string host = options_.bind_host == "0.0.0.0" || options_.bind_host == "::"
                         ? "127.0.0.1"
                         : options_.bind_host;
  return absl::StrCat("grpc://", host, ":", bound_port_);
}

void GrpcServer::UpdateCluster(const ClusterSpec& cluster) {
  {
    std::lock_guard<std::mutex> l(mu_);
    options_.cluster = cluster;
  }
  worker_cache_->SetClusterSpec(cluster);
  gate_->Open();
}

}  // namespace distributed
}  // namespace graphrun
