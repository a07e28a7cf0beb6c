#include "distributed/rpc/grpc_worker_client.h"

#include <chrono>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "util/metrics.h"

namespace graphrun {
namespace distributed {
namespace {

// Receives one RecvTensor stream into an aligned tensor buffer.
class RecvTensorReactor : public grpc::ClientReadReactor<RecvTensorChunk> {
 public:
  RecvTensorReactor(std::string who, int64_t max_tensor_bytes, CallOptions* opts,
                    RecvTensorResult* result, StatusCallback done,
                    std::shared_ptr<WorkerService::Stub> stub)
      : who_(std::move(who)),
        max_tensor_bytes_(max_tensor_bytes),
        opts_(opts),
        result_(result),
        done_(std::move(done)),
        stub_(std::move(stub)) {}

  void Start(const RecvTensorRequest& request) {
    request_ = request;
    deadline_ = opts_ != nullptr && opts_->timeout_ms() > 0
                    ? DeadlineAfterMs(opts_->timeout_ms())
                    : std::chrono::system_clock::time_point::max();
    if (deadline_ != std::chrono::system_clock::time_point::max()) ctx_.set_deadline(deadline_);
    Issue();
  }

 private:
  // The call again, on a fresh reactor, after gRPC failed the first without
  // sending it (NotSent): it waits for the channel to connect, within the
  // first call's deadline.
  void StartRetry(const RecvTensorReactor& first, const grpc::Status& first_status) {
    request_ = first.request_;
    deadline_ = first.deadline_;
    first_status_ = first_status;
    retried_ = true;
    ctx_.set_wait_for_ready(true);
    ctx_.set_deadline(ConnectRetryDeadline(deadline_));
    Issue();
  }

  void Issue() {
    stub_->async()->RecvTensor(&ctx_, &request_, this);
    if (opts_ != nullptr) opts_->SetCancelCallback([this] { ctx_.TryCancel(); });
    StartRead(&chunk_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // end of stream or error: OnDone follows
    absl::Status s = Consume();
    if (!s.ok()) {
      error_ = s;
      ctx_.TryCancel();
      return;
    }
    StartRead(&chunk_);
  }

  void OnDone(const grpc::Status& status) override {
    if (opts_ != nullptr) opts_->ClearCancelCallback();
    if (!retried_ && error_.ok() && !have_meta_ && NotSent(status) &&
        (opts_ == nullptr || !opts_->cancelled())) {
      auto* retry =
          new RecvTensorReactor(who_, max_tensor_bytes_, opts_, result_, std::move(done_), stub_);
      retry->StartRetry(*this, status);
      delete this;
      return;
    }
    absl::Status s = error_;
    if (s.ok()) {
      s = FromGrpcStatus(retried_ ? AfterConnectRetry(first_status_, status) : status, who_);
    }
    if (s.ok() && !have_meta_) {
      s = absl::DataLossError(absl::StrCat(who_, ": RecvTensor stream ended without a tensor"));
    }
    if (s.ok() && received_ != expected_) {
      s = absl::DataLossError(absl::StrCat(who_, ": RecvTensor stream ended after ", received_,
                                           " of ", expected_, " bytes"));
    }
    if (s.ok()) {
      result_->tensor = std::move(tensor_);
      result_->is_dead = is_dead_;
    }
    StatusCallback done = std::move(done_);
    delete this;
    done(s);
  }

  absl::Status Consume() {
    if (chunk_.has_meta()) {
      if (have_meta_) return absl::DataLossError(absl::StrCat(who_, ": second tensor header"));
      have_meta_ = true;
      const TensorMeta& m = chunk_.meta();
      is_dead_ = m.is_dead();
      if (!is_dead_) {
        if (m.has_value()) {
          GR_ASSIGN_OR_RETURN(tensor_, Tensor::FromProto(m.value()));
        } else {
          auto shape = TensorShape::FromProto(m.shape());
          if (!shape.ok()) return shape.status();
          DataType dtype = static_cast<DataType>(m.dtype());
          if (DataTypeSize(dtype) == 0 || !DataTypeSupported(dtype)) {
            return absl::InvalidArgumentError(
                absl::StrCat(who_, ": RecvTensor of unsupported type ", m.dtype()));
          }
          if (m.total_bytes() > max_tensor_bytes_ || m.total_bytes() < 0) {
            return absl::ResourceExhaustedError(absl::StrCat(
                who_, ": RecvTensor of ", m.total_bytes(), " bytes exceeds the limit of ",
                max_tensor_bytes_, " bytes (max_recv_tensor_bytes)"));
          }
          tensor_ = Tensor(dtype, *shape);
          expected_ = tensor_.TotalBytes();
          if (expected_ != m.total_bytes()) {
            return absl::DataLossError(absl::StrCat(who_, ": tensor header says ", m.total_bytes(),
                                                    " bytes, shape needs ", expected_));
          }
        }
      }
    }
    if (!chunk_.data().empty()) {
      const std::string& d = chunk_.data();
      if (!have_meta_ || chunk_.offset() < 0 ||
          chunk_.offset() + static_cast<int64_t>(d.size()) > expected_) {
        return absl::DataLossError(absl::StrCat(who_, ": RecvTensor chunk out of bounds"));
      }
      std::memcpy(tensor_.raw_data() + chunk_.offset(), d.data(), d.size());
      received_ += static_cast<int64_t>(d.size());
    }
    return absl::OkStatus();
  }

  const std::string who_;
  const int64_t max_tensor_bytes_;
  CallOptions* const opts_;
  RecvTensorResult* const result_;
  StatusCallback done_;
  const std::shared_ptr<WorkerService::Stub> stub_;  // the client's
  std::chrono::system_clock::time_point deadline_;
  bool retried_ = false;
  grpc::Status first_status_;
  grpc::ClientContext ctx_;
  RecvTensorRequest request_;
  RecvTensorChunk chunk_;
  absl::Status error_;
  bool have_meta_ = false;
  bool is_dead_ = false;
  Tensor tensor_;
  int64_t expected_ = 0;
  int64_t received_ = 0;
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

GrpcWorkerClient::GrpcWorkerClient(std::string task, std::string address,
                                   std::shared_ptr<grpc::Channel> channel, ChannelOptions options)
    : task_(task),
      who_(absl::StrCat("task ", task, " (", address, ")")),
      address_(std::move(address)),
      options_(options),
      channel_(std::move(channel)),
      stub_(WorkerService::NewStub(channel_)),
      control_timeout_ms_(options.control_timeout_ms) {}

namespace {

// One unary call; sent once more, waiting for the channel to connect, when
// gRPC failed the first try without sending it (NotSent).
template <typename Req, typename Resp, typename Method>
class UnaryCall {
 public:
  UnaryCall(Method method, CallOptions* opts, int64_t timeout_ms, const Req& request,
            Resp* response, StatusCallback done, std::string who)
      : method_(std::move(method)),
        opts_(opts),
        deadline_(timeout_ms > 0 ? DeadlineAfterMs(timeout_ms)
                                 : std::chrono::system_clock::time_point::max()),
        request_(request),
        response_(response),
        done_(std::move(done)),
        who_(std::move(who)) {}

  void Start() {
    ctx_ = std::make_unique<grpc::ClientContext>();
    if (retried_) {
      ctx_->set_wait_for_ready(true);
      ctx_->set_deadline(ConnectRetryDeadline(deadline_));
    } else if (deadline_ != std::chrono::system_clock::time_point::max()) {
      ctx_->set_deadline(deadline_);
    }
    // Cleared before ctx_ changes (OnDone), so never races with it.
    if (opts_ != nullptr) opts_->SetCancelCallback([this] { ctx_->TryCancel(); });
    method_(ctx_.get(), &request_, response_, [this](grpc::Status s) { OnDone(s); });
  }

 private:
  void OnDone(const grpc::Status& s) {
    if (opts_ != nullptr) opts_->ClearCancelCallback();
    if (!retried_ && NotSent(s) && (opts_ == nullptr || !opts_->cancelled())) {
      retried_ = true;
      first_ = s;
      Start();
      return;
    }
    absl::Status status = FromGrpcStatus(retried_ ? AfterConnectRetry(first_, s) : s, who_);
    StatusCallback done = std::move(done_);
    delete this;
    done(status);
  }

  Method method_;
  CallOptions* const opts_;
  const std::chrono::system_clock::time_point deadline_;
  const Req& request_;
  Resp* const response_;
  StatusCallback done_;
  const std::string who_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  bool retried_ = false;
  grpc::Status first_;
};

}  // namespace

template <typename Req, typename Resp, typename Method>
void GrpcWorkerClient::Unary(Method method, CallOptions* opts, int64_t timeout_ms,
                             const Req& request, Resp* response, StatusCallback done) {
  (new UnaryCall<Req, Resp, Method>(std::move(method), opts, timeout_ms, request, response,
                                    std::move(done), who_))
      ->Start();
}

#define GR_ASYNC(Name)                                           \
  [stub = stub_](grpc::ClientContext* c, const auto* r, auto* p, \
                 std::function<void(grpc::Status)> f) {          \
    stub->async()->Name(c, r, p, std::move(f));                  \
  }

void GrpcWorkerClient::GetStatusAsync(const GetStatusRequest& request, GetStatusResponse* response,
                                      StatusCallback done) {
  Unary(GR_ASYNC(GetStatus), nullptr, control_timeout_ms_, request, response, std::move(done));
}
void GrpcWorkerClient::HeartbeatAsync(int64_t timeout_ms, StatusCallback done) {
  auto req = std::make_shared<GetStatusRequest>();
  auto resp = std::make_shared<GetStatusResponse>();
  Unary(GR_ASYNC(GetStatus), nullptr, timeout_ms, *req, resp.get(),
        [req, resp, done = std::move(done)](const absl::Status& s) { done(s); });
}
void GrpcWorkerClient::CreateWorkerSessionAsync(const CreateWorkerSessionRequest& request,
                                                CreateWorkerSessionResponse* response,
                                                StatusCallback done) {
  Unary(GR_ASYNC(CreateWorkerSession), nullptr, control_timeout_ms_, request, response,
        std::move(done));
}
void GrpcWorkerClient::DeleteWorkerSessionAsync(const DeleteWorkerSessionRequest& request,
                                                DeleteWorkerSessionResponse* response,
                                                StatusCallback done) {
  Unary(GR_ASYNC(DeleteWorkerSession), nullptr, control_timeout_ms_, request, response,
        std::move(done));
}
void GrpcWorkerClient::RegisterGraphAsync(const RegisterGraphRequest& request,
                                          RegisterGraphResponse* response, StatusCallback done) {
  Unary(GR_ASYNC(RegisterGraph), nullptr, control_timeout_ms_, request, response, std::move(done));
}
void GrpcWorkerClient::DeregisterGraphAsync(const DeregisterGraphRequest& request,
                                            DeregisterGraphResponse* response,
                                            StatusCallback done) {
  Unary(GR_ASYNC(DeregisterGraph), nullptr, control_timeout_ms_, request, response,
        std::move(done));
}
void GrpcWorkerClient::RunGraphAsync(CallOptions* opts, const RunGraphRequest& request,
                                     RunGraphResponse* response, StatusCallback done) {
  Unary(GR_ASYNC(RunGraph), opts, opts ? opts->timeout_ms() : 0, request, response,
        std::move(done));
}
void GrpcWorkerClient::CleanupGraphAsync(const CleanupGraphRequest& request,
                                         CleanupGraphResponse* response, StatusCallback done) {
  Unary(GR_ASYNC(CleanupGraph), nullptr, control_timeout_ms_, request, response, std::move(done));
}
void GrpcWorkerClient::CleanupAllAsync(const CleanupAllRequest& request,
                                       CleanupAllResponse* response, StatusCallback done) {
  Unary(GR_ASYNC(CleanupAll), nullptr, control_timeout_ms_, request, response, std::move(done));
}
void GrpcWorkerClient::RecvTensorAsync(CallOptions* opts, const RecvTensorRequest& request,
                                       RecvTensorResult* response, StatusCallback done) {
  // Bytes received per peer and path (graphrun_recv_bytes_total).
  auto counted = [this, response](const char* path, StatusCallback done) {
    return [task = task_, path, response, done = std::move(done)](const absl::Status& s) {
      if (s.ok() && response->tensor.IsInitialized()) {
        Metrics::Get().Increment("graphrun_recv_bytes_total", {{"peer", task}, {"path", path}},
                                 static_cast<double>(response->tensor.TotalBytes()));
      }
      done(s);
    };
  };
  if (options_.data_channel != DataChannelMode::kOff) {
    auto conn = DataConnectionForRecv();
    if (conn.ok()) {
      num_data_channel_.fetch_add(1);
      (*conn)->RecvTensorAsync(opts, request, response, counted("data_channel", std::move(done)));
      return;
    }
    if (options_.data_channel == DataChannelMode::kRequired) {
      done(conn.status());
      return;
    }
  }
  num_grpc_.fetch_add(1);
  auto* reactor = new RecvTensorReactor(who_, options_.data.max_tensor_bytes, opts, response,
                                        counted("grpc", std::move(done)), stub_);
  reactor->Start(request);
}

void GrpcWorkerClient::PushTensorAsync(const std::string& key, const Tensor& tensor,
                                       StatusCallback done) {
  if (options_.data_channel != DataChannelMode::kOff) {
    auto conn = DataConnectionForRecv();
    if (conn.ok()) {
      done((*conn)->PushTensor(key, tensor));
      return;
    }
    if (options_.data_channel == DataChannelMode::kRequired) {
      done(conn.status());
      return;
    }
  }
  auto req = std::make_shared<PushTensorRequest>();
  auto resp = std::make_shared<PushTensorResponse>();
  req->set_rendezvous_key(key);
  tensor.AsProtoTensorContent(req->mutable_tensor());
  Unary(GR_ASYNC(PushTensor), nullptr, control_timeout_ms_, *req, resp.get(),
        [req, resp, done = std::move(done)](const absl::Status& s) { done(s); });
}

std::function<void()> GrpcWorkerClient::WatchLoss(
    std::function<void(const absl::Status&)> on_lost) {
  std::shared_ptr<DataConnection> conn;
  {
    std::lock_guard<std::mutex> l(data_mu_);
    conn = data_;
  }
  if (conn == nullptr) return [] {};  // (a broken one calls on_lost at once)
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  conn->WatchBreak(cancelled, std::move(on_lost));
  return [cancelled] { cancelled->store(true); };
}

absl::StatusOr<std::shared_ptr<DataConnection>> GrpcWorkerClient::DataConnectionForRecv() {
  std::lock_guard<std::mutex> l(data_mu_);
  if (data_ != nullptr && !data_->broken()) return data_;
  data_.reset();
  const bool preferred = options_.data_channel == DataChannelMode::kPreferred;
  if (preferred && NowMs() < data_retry_after_ms_) {
    return absl::UnavailableError(absl::StrCat(who_, ": data channel backing off"));
  }
  auto conn = Negotiate();
  if (!conn.ok()) {
    // A peer without a data channel is not asked again soon; a transient
    // failure is retried after a second.
    bool unsupported = conn.status().code() == absl::StatusCode::kUnimplemented;
    data_retry_after_ms_ = NowMs() + (unsupported ? 30000 : 1000);
    return conn.status();
  }
  data_ = *conn;
  return data_;
}

absl::StatusOr<std::shared_ptr<DataConnection>> GrpcWorkerClient::Negotiate() {
  grpc::ClientContext ctx;
  ctx.set_deadline(
      DeadlineAfterMs(std::min(control_timeout_ms_, options_.data.connect_timeout_ms)));
  GetStatusRequest req;
  GetStatusResponse resp;
  grpc::Status gs = stub_->GetStatus(&ctx, req, &resp);
  if (!gs.ok()) return FromGrpcStatus(gs, who_);
  const auto& md = ctx.GetServerTrailingMetadata();
  auto it = md.find(kDataPortMetadataKey);
  int port = 0;
  if (it == md.end() ||
      !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &port) ||
      port <= 0 || port > 65535) {
    return absl::UnimplementedError(absl::StrCat(who_, ": offers no data channel"));
  }
  std::string host = address_.substr(0, address_.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return DataConnection::Connect(host, port, who_, options_.data);
}

absl::StatusOr<GetStatusResponse> FetchTaskStatus(const std::string& address,
                                                  const ChannelOptions& options, bool include_stats,
                                                  int64_t timeout_ms) {
  auto stub = WorkerService::NewStub(NewChannel(address, options));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfterMs(timeout_ms));
  GetStatusRequest req;
  req.set_include_stats(include_stats);
  GetStatusResponse resp;
  grpc::Status st = stub->GetStatus(&ctx, req, &resp);
  if (!st.ok()) return FromGrpcStatus(st, address);
  return resp;
}

GrpcWorkerCache::GrpcWorkerCache(ClusterSpec cluster, ChannelOptions options)
    : options_(options), cluster_(std::move(cluster)) {}

void GrpcWorkerCache::SetLocalWorker(const std::string& task, WorkerInterface* worker) {
  std::lock_guard<std::mutex> l(mu_);
  local_task_ = task;
  local_worker_ = worker;
}

void GrpcWorkerCache::SetClusterSpec(ClusterSpec cluster) {
  std::lock_guard<std::mutex> l(mu_);
  cluster_ = std::move(cluster);
  for (auto it = clients_.begin(); it != clients_.end();) {
    auto addr = cluster_.AddressOfTask(it->first);
    if (!addr.ok() || *addr != it->second.first) {
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
}

std::map<std::string, std::string> GrpcWorkerCache::Addresses() const {
  std::lock_guard<std::mutex> l(mu_);
  std::map<std::string, std::string> out;
  for (const std::string& task : cluster_.TaskNames()) {
    absl::StatusOr<std::string> address = cluster_.AddressOfTask(task);
    if (address.ok()) out[task] = *address;
  }
  return out;
}

absl::Status GrpcWorkerCache::LearnAddresses(const std::map<std::string, std::string>& addresses) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<std::string, std::string>> news;
  for (const auto& [task, address] : addresses) {
    if (cluster_.AddressOfTask(task).ok()) continue;  // the cluster's own stays
    absl::StatusOr<TaskId> id = ParseTaskName(task);
    int port = 0;
    if (!id.ok() || TaskName(id->job, id->task) != task || !ParseHostPort(address, &port) ||
        port == 0) {
      return absl::InvalidArgumentError(absl::StrCat("task address '", task, "' -> '", address,
                                                     "': expected a task name and host:port"));
    }
    auto known = learned_.find(task);
    if (known == learned_.end() || known->second != address) news.emplace_back(task, address);
  }
  size_t added = 0;
  for (const auto& [task, address] : news) added += learned_.count(task) == 0 ? 1 : 0;
  if (learned_.size() + added > kMaxLearnedTasks) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "more than ", kMaxLearnedTasks, " tasks outside this task's cluster were named to it"));
  }
  for (const auto& [task, address] : news) {
    learned_[task] = address;
    clients_.erase(task);  // a restarted task at a new address: a new client
  }
  return absl::OkStatus();
}

std::vector<std::string> GrpcWorkerCache::ListTasks() const {
  std::lock_guard<std::mutex> l(mu_);
  return cluster_.TaskNames();
}

absl::StatusOr<std::shared_ptr<WorkerInterface>> GrpcWorkerCache::GetWorker(
    const std::string& task) {
  std::lock_guard<std::mutex> l(mu_);
  if (task == local_task_ && local_worker_ != nullptr) {
    // Non-owning: the server owns its worker.
    return std::shared_ptr<WorkerInterface>(std::shared_ptr<void>(), local_worker_);
  }
  auto it = clients_.find(task);
  if (it != clients_.end()) return it->second.second;
  auto addr = cluster_.AddressOfTask(task);
  if (!addr.ok()) {
    auto learned = learned_.find(task);
    if (learned == learned_.end()) {
      return absl::NotFoundError(
          absl::StrCat("no task ", task, " in the cluster: ", addr.status().message()));
    }
    addr = learned->second;
  }
  auto client =
      std::make_shared<GrpcWorkerClient>(task, *addr, NewChannel(*addr, options_), options_);
  clients_[task] = {*addr, client};
  return std::shared_ptr<WorkerInterface>(client);
}

GrpcWorkerClient::RecvTensorCounts GrpcWorkerCache::recv_tensor_counts() const {
  std::lock_guard<std::mutex> l(mu_);
  GrpcWorkerClient::RecvTensorCounts sum;
  for (const auto& [task, c] : clients_) {
    auto n = c.second->recv_tensor_counts();
    sum.data_channel += n.data_channel;
    sum.grpc += n.grpc;
  }
  return sum;
}

}  // namespace distributed
}  // namespace graphrun
