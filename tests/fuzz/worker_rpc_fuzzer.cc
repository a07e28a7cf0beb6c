// libFuzzer target: the worker service's request handling, as a gRPC
// handler calls it (distributed/worker.h, in process): a sequence of
// requests — CreateWorkerSession, RegisterGraph, RunGraph, RecvTensor,
// CleanupGraph, DeregisterGraph, DeleteWorkerSession, PushTensor,
// GetStatus, CleanupAll — each
// decoded from binary or text protobuf, against one task with a worker
// session "s" already open. The task runs collectives as a server's does
// (the leader of a cluster of itself), so RecvTensor and PushTensor of
// collective keys (group joins, instances, pieces, abort notices) and
// collective ops in graphs reach them. Graphs, handles, step ids, keys and
// arguments are the fuzzer's. Every request must end with a Status (a call
// that waits is cancelled after 20 ms), never a crash, hang or sanitizer
// report.
//
// Input: records of [1 byte: request kind][2 bytes little-endian: length]
// [length bytes: the request]. Kinds 248..255 are PushTensor, 246
// GetStatus, 247 CleanupAll, 240..245 a RecvTensor held open (not waited
// for: up to 8 of them wait together, so members of a collective meet at
// the leader and its verdicts run; the ones still waiting at the end are
// cancelled); any other kind k is request k % 7 of the list above.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/fuzz/rpc_fuzz_util.h"

namespace graphrun {
namespace distributed {
namespace {

using fuzz::kTask;

// Peers: none reachable (a fuzzed graph may name other tasks).
class NoPeers : public WorkerCacheInterface {
 public:
  std::vector<std::string> ListTasks() const override { return {kTask}; }
  absl::StatusOr<std::shared_ptr<WorkerInterface>> GetWorker(const std::string& task) override {
    return absl::NotFoundError("no task " + task + " in the fuzzer's cluster");
  }
};

struct Task {
  NoPeers peers;
  fuzz::FuzzWorker task{&peers, /*with_collectives=*/true};
};

// fuzz::Call; with WORKER_RPC_FUZZER_VERBOSE set, each call's status goes
// to stderr (to check that seeds reach what they mean to).
template <typename Start>
void Call(CallOptions* opts, Start start) {
  absl::Status s = fuzz::Call(opts, std::move(start));
  static const bool verbose = std::getenv("WORKER_RPC_FUZZER_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "worker_rpc_fuzzer: %s\n", s.ToString().c_str());
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun

namespace {

// One input, on a task of its own (gone when this returns).
void RunInput(const uint8_t* data, size_t size) {
  using namespace graphrun;
  using namespace graphrun::distributed;
  fuzz::SetUpProcess();
  if (size > (1 << 15)) return;
  Task t;
  auto& task = t.task;
  {
    CreateWorkerSessionRequest req;
    req.set_session_handle("s");
    CreateWorkerSessionResponse resp;
    Call(nullptr, [&](StatusCallback d) {
      task.worker->CreateWorkerSessionAsync(req, &resp, std::move(d));
    });
  }
  // RecvTensor calls held open (kinds 240..245).
  struct Held {
    CallOptions opts;
    RecvTensorRequest req;
    RecvTensorResult result;
    absl::Status status;
    Notification called;
  };
  std::vector<std::unique_ptr<Held>> held;
  fuzz::ForEachRecord(data, size, [&](uint8_t kind, absl::string_view bytes) {
    using fuzz::Decode;
    Worker* w = task.worker.get();
    if (kind >= 240 && kind <= 245) {
      auto h = std::make_unique<Held>();
      if (held.size() >= 8 || !Decode(bytes, &h->req)) return;
      Held* p = h.get();
      held.push_back(std::move(h));
      fuzz::Caller::Get().Run([w, p] {
        w->RecvTensorAsync(&p->opts, p->req, &p->result, [p](const absl::Status& s) {
          p->status = s;
          p->called.Notify();
        });
      });
      return;
    }
    if (kind >= 248) {
      PushTensorRequest req;
      PushTensorResponse resp;
      if (!Decode(bytes, &req)) return;
      // As the gRPC handler decodes it (grpc_services.cc).
      absl::StatusOr<Tensor> value = Tensor::FromProto(req.tensor());
      if (!value.ok()) return;
      Call(nullptr, [&](StatusCallback d) { w->PushTensorAsync(req.rendezvous_key(), *value, d); });
      return;
    }
    if (kind == 246) {
      GetStatusRequest req;
      GetStatusResponse resp;
      if (!Decode(bytes, &req)) return;
      Call(nullptr, [&](StatusCallback d) { w->GetStatusAsync(req, &resp, d); });
      return;
    }
    if (kind == 247) {
      CleanupAllRequest req;
      CleanupAllResponse resp;
      if (!Decode(bytes, &req)) return;
      Call(nullptr, [&](StatusCallback d) { w->CleanupAllAsync(req, &resp, d); });
      return;
    }
    switch (kind % 7) {
      case 0: {
        CreateWorkerSessionRequest req;
        CreateWorkerSessionResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->CreateWorkerSessionAsync(req, &resp, d); });
        break;
      }
      case 1: {
        RegisterGraphRequest req;
        RegisterGraphResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->RegisterGraphAsync(req, &resp, d); });
        break;
      }
      case 2: {
        RunGraphRequest req;
        RunGraphResponse resp;
        if (!Decode(bytes, &req)) break;
        CallOptions opts;
        Call(&opts, [&](StatusCallback d) { w->RunGraphAsync(&opts, req, &resp, d); });
        CleanupGraphRequest cleanup;
        cleanup.set_step_id(req.step_id());
        CleanupGraphResponse cresp;
        Call(nullptr, [&](StatusCallback d) { w->CleanupGraphAsync(cleanup, &cresp, d); });
        break;
      }
      case 3: {
        RecvTensorRequest req;
        RecvTensorResult result;
        if (!Decode(bytes, &req)) break;
        CallOptions opts;
        Call(&opts, [&](StatusCallback d) { w->RecvTensorAsync(&opts, req, &result, d); });
        break;
      }
      case 4: {
        CleanupGraphRequest req;
        CleanupGraphResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->CleanupGraphAsync(req, &resp, d); });
        break;
      }
      case 5: {
        DeregisterGraphRequest req;
        DeregisterGraphResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->DeregisterGraphAsync(req, &resp, d); });
        break;
      }
      default: {
        DeleteWorkerSessionRequest req;
        DeleteWorkerSessionResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->DeleteWorkerSessionAsync(req, &resp, d); });
        break;
      }
    }
  });
  // The held calls end (answered, else cancelled) before the task goes.
  for (auto& h : held) {
    if (!h->called.WaitForNotificationWithTimeout(fuzz::kCancelAfter)) h->opts.StartCancel();
  }
  static const bool verbose = std::getenv("WORKER_RPC_FUZZER_VERBOSE") != nullptr;
  for (auto& h : held) {
    h->called.WaitForNotification();
    if (verbose) {
      std::fprintf(stderr, "worker_rpc_fuzzer: held: %s %s\n", h->status.ToString().c_str(),
                   std::string(h->result.tensor.raw_data(),
                               h->status.ok() ? h->result.tensor.TotalBytes() : 0)
                       .c_str());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RunInput(data, size);
  graphrun::distributed::fuzz::Quiesce();
  return 0;
}
