#include "kernels/gpu/nccl_backend.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/gpu/gpu_accelerator.h"

namespace graphrun {
namespace {

std::atomic<int64_t> rounds_run{0};

// NCCL, loaded at run time (libnccl.so.2), so that a CUDA build starts
// where NCCL is missing and its GPUs meet through host memory instead.
struct Nccl {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  decltype(&::ncclCommInitAll) CommInitAll = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;

  // Null with `why` when the library or a symbol is missing.
  static const Nccl* Load(std::string* why) {
    void* lib = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = ::dlerror();
      *why = e != nullptr ? e : "dlopen failed";
      return nullptr;
    }
    auto* n = new Nccl();
    bool ok = true;
    auto sym = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(::dlsym(lib, name));
      if (*fn == nullptr && ok) {
        ok = false;
        *why = absl::StrCat("libnccl.so.2 has no ", name);
      }
    };
    sym(&n->GetVersion, "ncclGetVersion");
    sym(&n->GetErrorString, "ncclGetErrorString");
    sym(&n->GetLastError, "ncclGetLastError");
    sym(&n->CommInitAll, "ncclCommInitAll");
    sym(&n->GetUniqueId, "ncclGetUniqueId");
    sym(&n->CommInitRank, "ncclCommInitRank");
    sym(&n->CommAbort, "ncclCommAbort");
    sym(&n->GroupStart, "ncclGroupStart");
    sym(&n->GroupEnd, "ncclGroupEnd");
    sym(&n->AllReduce, "ncclAllReduce");
    sym(&n->Broadcast, "ncclBroadcast");
    if (!ok) {
      delete n;
      return nullptr;
    }
    return n;  // kept for the process, as the library is
  }
};

// "collective reduce of group 1 instance 7 over GPU:0, GPU:1".
std::string Describe(const DeviceCollectiveBackend::Member& m, const std::vector<int>& ordinals) {
  const CollectiveArgs& a = *m.args;
  std::vector<std::string> gpus;
  for (int o : ordinals) gpus.push_back(absl::StrCat("GPU:", o));
  return absl::StrCat("collective ", CollectiveTypeName(a.type), " of group ", a.group_key,
                      " instance ", a.instance_key, " through NCCL (", absl::StrJoin(gpus, ", "),
                      ")");
}

absl::StatusOr<ncclDataType_t> NcclType(DataType t) {
  switch (t) {
    case DT_FLOAT:
      return ncclFloat32;
    case DT_DOUBLE:
      return ncclFloat64;
    case DT_HALF:
      return ncclFloat16;
    case DT_BFLOAT16:
      return ncclBfloat16;
    case DT_INT32:
      return ncclInt32;
    case DT_INT64:
      return ncclInt64;
    case DT_INT8:
      return ncclInt8;
    case DT_UINT8:
    case DT_BOOL:  // one byte; broadcast and gather only (bools do not reduce)
      return ncclUint8;
    default:
      return absl::UnimplementedError(absl::StrCat("NCCL has no type for ", DataTypeString(t)));
  }
}

absl::StatusOr<ncclRedOp_t> NcclOp(const CollectiveArgs& a) {
  const bool floating =
      a.dtype == DT_FLOAT || a.dtype == DT_DOUBLE || a.dtype == DT_HALF || a.dtype == DT_BFLOAT16;
  if (a.final_op == CollectiveFinal::kDiv) {
    if (a.merge_op == CollectiveMerge::kAdd && floating) return ncclAvg;
    return absl::UnimplementedError(absl::StrCat(
        "final_op Div through NCCL needs merge_op Add on a floating type (",
        DataTypeString(a.dtype), "); give communication_hint='ring' to reduce in host memory"));
  }
  switch (a.merge_op) {
    case CollectiveMerge::kAdd:
      return ncclSum;
    case CollectiveMerge::kMul:
      return ncclProd;
    case CollectiveMerge::kMin:
      return ncclMin;
    case CollectiveMerge::kMax:
      return ncclMax;
  }
  return absl::InvalidArgumentError("unknown merge_op");
}

class NcclBackend final : public DeviceCollectiveBackend {
 public:
  explicit NcclBackend(const Nccl* nccl) : nccl_(*nccl) {}
  const std::string& name() const override { return name_; }

  void RunRound(std::vector<Member> members) override {
    // One process holds every rank: rank i is members[i].
    Round round;
    round.size = static_cast<int>(members.size());
    for (int i = 0; i < round.size; ++i) round.ranks.push_back(i);
    const CollectiveArgs& a = *members[0].args;
    if (a.type == CollectiveType::kGather) {
      for (const Member& x : members) round.rows.push_back(x.input->dim_size(0));
    } else if (a.type != CollectiveType::kReduce) {
      for (int i = 0; i < round.size; ++i) {
        if (members[i].args->type == CollectiveType::kBroadcastSend) round.sender = i;
      }
    }
    Complete(members, Run(round, members, /*one_process=*/true));
  }

  bool SpansProcesses() const override { return true; }

  absl::StatusOr<std::string> NewCommunicatorId() override {
    ncclUniqueId id;
    ncclResult_t r = nccl_.GetUniqueId(&id);
    if (r != ncclSuccess) return NcclError(nccl_, "ncclGetUniqueId", r, nullptr);
    return std::string(id.internal, sizeof(id.internal));
  }

  void RunRanks(const Round& round, std::vector<Member> members) override {
    Complete(members, Run(round, members, /*one_process=*/false));
  }

 private:
  static void Complete(std::vector<Member>& members, absl::StatusOr<std::vector<Tensor>> out) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (out.ok()) {
        members[i].done(std::move((*out)[i]));
      } else {
        members[i].done(out.status());
      }
    }
  }

  // Enqueues this process's ranks of `round` (members[i] is rank
  // round.ranks[i]); the results, one per member.
  absl::StatusOr<std::vector<Tensor>> Run(const Round& round, const std::vector<Member>& m,
                                          bool one_process) {
    const size_t n = m.size();
    const CollectiveArgs& a = *m[0].args;
    std::vector<GpuAccelerator*> gpus;
    std::vector<int> ordinals;
    for (const Member& x : m) {
      auto* gpu = dynamic_cast<GpuAccelerator*>(x.args->accelerator);
      if (gpu == nullptr) {
        return absl::InternalError(absl::StrCat("collective of group ", a.group_key, " instance ",
                                                a.instance_key, ": member ", x.args->device,
                                                " is no GPU, yet came to NCCL"));
      }
      if (x.args->type != CollectiveType::kBroadcastRecv &&
          x.input->memory_space() != gpu->memory_space()) {
        return absl::InternalError(absl::StrCat("collective of group ", a.group_key, " instance ",
                                                a.instance_key, ": the input of ", x.args->device,
                                                " is not in its memory, yet came to NCCL"));
      }
      gpus.push_back(gpu);
      ordinals.push_back(gpu->ordinal());
    }
    const std::string what =
        one_process ? Describe(m[0], ordinals)
                    : absl::StrCat(Describe(m[0], ordinals), ", ranks ",
                                   absl::StrJoin(round.ranks, ","), " of ", round.size);
    auto fail = [&](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
    };
    absl::StatusOr<ncclDataType_t> type = NcclType(a.dtype);
    if (!type.ok()) return fail(type.status());
    ncclRedOp_t op = ncclSum;
    if (a.type == CollectiveType::kReduce) {
      absl::StatusOr<ncclRedOp_t> o = NcclOp(a);
      if (!o.ok()) return fail(o.status());
      op = *o;
    }
    // The result's shape (validated by the executor or the leader: equal
    // for a reduction, equal but for dimension 0 for a gather, the
    // sender's for a broadcast).
    TensorShape shape;
    std::vector<int64_t> elements;  // gather: each rank's elements
    if (a.type == CollectiveType::kReduce) {
      shape = m[0].input->shape();
    } else if (a.type == CollectiveType::kGather) {
      shape = m[0].input->shape();
      int64_t row = 1;  // elements per row
      for (int d = 1; d < shape.dims(); ++d) row *= shape.dim_size(d);
      int64_t total = 0;
      for (int64_t r : round.rows) {
        total += r;
        elements.push_back(r * row);
      }
      shape.set_dim(0, total);
    } else {
      if (round.sender < 0 || round.sender >= round.size) {
        return fail(absl::InternalError("a broadcast without a sender"));
      }
      shape = a.type == CollectiveType::kBroadcastSend ? m[0].input->shape() : a.shape;
    }
    std::vector<Tensor> out;
    for (size_t i = 0; i < n; ++i) {
      absl::StatusOr<Tensor> t = gpus[i]->AllocateDevice(a.dtype, shape, absl::StrCat(what, ": "));
      if (!t.ok()) return t.status();
      out.push_back(*std::move(t));
    }
    const size_t count = static_cast<size_t>(shape.num_elements());
    if (count == 0 && one_process) {
      rounds_run.fetch_add(1);
      return out;
    }
    const size_t elem = static_cast<size_t>(DataTypeSize(a.dtype));

    // Joining a communicator across processes waits for every rank, this
    // process's other tasks' too: outside the enqueue lock.
    absl::StatusOr<std::vector<ncclComm_t>> comms =
        one_process ? Comms(ordinals) : RankComms(round, gpus);
    if (!comms.ok()) return fail(comms.status());
    std::lock_guard<std::mutex> l(enqueue_mu_);
    if (count == 0) {
      // (After the communicator: the first round joins it on every rank.)
      rounds_run.fetch_add(1);
      return out;
    }
    ncclResult_t r = nccl_.GroupStart();
    if (r != ncclSuccess) return fail(NcclError(nccl_, "ncclGroupStart", r, nullptr));
    absl::Status first;
    auto check = [&](const char* call, ncclResult_t e, ncclComm_t comm) {
      if (e != ncclSuccess && first.ok()) first = NcclError(nccl_, call, e, comm);
      return e == ncclSuccess;
    };
    for (size_t i = 0; i < n && first.ok(); ++i) {
      ncclComm_t comm = (*comms)[i];
      const int rank = round.ranks[i];
      cudaStream_t stream = gpus[i]->compute_stream();
      char* dst = out[i].raw_data();
      switch (a.type) {
        case CollectiveType::kReduce:
          check("ncclAllReduce",
                nccl_.AllReduce(m[i].input->raw_data(), dst, count, *type, op, comm, stream), comm);
          break;
        case CollectiveType::kGather: {
          // Rank k's rows go to the same place in every output.
          size_t offset = 0;
          for (int k = 0; k < round.size && first.ok(); ++k) {
            const size_t c = static_cast<size_t>(elements[k]);
            if (c > 0) {
              const void* src = k == rank ? m[i].input->raw_data() : dst + offset * elem;
              check("ncclBroadcast",
                    nccl_.Broadcast(src, dst + offset * elem, c, *type, k, comm, stream), comm);
            }
            offset += c;
          }
          break;
        }
        case CollectiveType::kBroadcastSend:
        case CollectiveType::kBroadcastRecv: {
          const void* src = rank == round.sender ? m[i].input->raw_data() : dst;
          check("ncclBroadcast",
                nccl_.Broadcast(src, dst, count, *type, round.sender, comm, stream), comm);
          break;
        }
      }
    }
    r = nccl_.GroupEnd();
    check("ncclGroupEnd", r, nullptr);
    if (!first.ok()) return fail(first);
    rounds_run.fetch_add(1);
    return out;
  }

  static absl::Status NcclError(const Nccl& nccl, const char* call, ncclResult_t e,
                                ncclComm_t comm) {
    const char* last = comm != nullptr ? nccl.GetLastError(comm) : nullptr;
    const std::string detail = last != nullptr ? last : "";
    return absl::InternalError(absl::StrCat(call, ": ", nccl.GetErrorString(e),
                                            detail.empty() ? "" : absl::StrCat(" (", detail, ")")));
  }

  // The communicators of the GPUs `ordinals` (rank i on ordinals[i]),
  // made at their first round (ncclCommInitAll waits for no other thread).
  absl::StatusOr<std::vector<ncclComm_t>> Comms(const std::vector<int>& ordinals) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = comms_.find(ordinals);
    if (it != comms_.end()) return it->second;
    std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
    ncclResult_t r =
        nccl_.CommInitAll(comms.data(), static_cast<int>(ordinals.size()), ordinals.data());
    if (r != ncclSuccess) return NcclError(nccl_, "ncclCommInitAll", r, nullptr);
    return comms_.emplace(ordinals, std::move(comms)).first->second;
  }

  // This process's ranks of the communicator spanning processes, made at
  // its first round (every process joins then: ncclCommInitRank returns
  // once all ranks have, and connects them: NCCL_RUNTIME_CONNECT=0). The
  // join runs without the lock, so that another task of this process can
  // join its own ranks of the same communicator meanwhile; a rank another
  // thread is joining is waited for.
  absl::StatusOr<std::vector<ncclComm_t>> RankComms(const Round& round,
                                                    const std::vector<GpuAccelerator*>& gpus) {
    if (round.communicator.size() != sizeof(ncclUniqueId)) {
      return absl::InternalError(absl::StrCat("a communicator id of ", round.communicator.size(),
                                              " bytes; NCCL's are ", sizeof(ncclUniqueId)));
    }
    std::vector<ncclComm_t> comms(round.ranks.size(), nullptr);
    std::vector<size_t> missing;
    std::unique_lock<std::mutex> l(mu_);
    joined_.wait(l, [&] {
      for (int rank : round.ranks) {
        if (joining_.count({round.communicator, rank}) > 0) return false;
      }
      return true;
    });
    for (int rank : round.ranks) {
      // A join that failed is not tried again: its peers have gone on.
      auto failed = failed_joins_.find({round.communicator, rank});
      if (failed != failed_joins_.end()) return failed->second;
    }
    for (size_t i = 0; i < round.ranks.size(); ++i) {
      auto it = rank_comms_.find({round.communicator, round.ranks[i]});
      if (it != rank_comms_.end()) {
        comms[i] = it->second;
      } else {
        missing.push_back(i);
        joining_.insert({round.communicator, round.ranks[i]});
      }
    }
    if (missing.empty()) return comms;
    l.unlock();
    ncclUniqueId id;
    std::memcpy(id.internal, round.communicator.data(), sizeof(id.internal));
    int previous = 0;
    cudaGetDevice(&previous);
    // One thread joins several ranks: a group call.
    ncclResult_t r = nccl_.GroupStart();
    absl::Status first;
    if (r != ncclSuccess) first = NcclError(nccl_, "ncclGroupStart", r, nullptr);
    for (size_t i : missing) {
      if (!first.ok()) break;
      cudaSetDevice(gpus[i]->ordinal());
      r = nccl_.CommInitRank(&comms[i], round.size, id, round.ranks[i]);
      if (r != ncclSuccess) first = NcclError(nccl_, "ncclCommInitRank", r, nullptr);
    }
    r = nccl_.GroupEnd();
    if (r != ncclSuccess && first.ok()) first = NcclError(nccl_, "ncclGroupEnd", r, nullptr);
    if (!first.ok()) {
      // The ranks that did join leave again (ncclCommAbort: their peers
      // may be gone), so nothing waits on them.
      for (size_t i : missing) {
        if (comms[i] != nullptr) nccl_.CommAbort(comms[i]);
      }
    }
    cudaSetDevice(previous);
    l.lock();
    for (size_t i : missing) {
      const std::pair<std::string, int> key{round.communicator, round.ranks[i]};
      joining_.erase(key);
      if (first.ok()) {
        rank_comms_[key] = comms[i];
      } else {
        failed_joins_[key] = first;
      }
    }
    joined_.notify_all();
    if (!first.ok()) return first;
    return comms;
  }

  const Nccl& nccl_;
  const std::string name_ = "nccl";
  // Rounds are enqueued under enqueue_mu_, one at a time, so that the
  // collectives of every communicator come in the same order on each GPU;
  // mu_ guards the communicators.
  std::mutex enqueue_mu_;
  std::mutex mu_;
  std::condition_variable joined_;
  std::set<std::pair<std::string, int>> joining_;  // (id, rank) being joined
  std::map<std::pair<std::string, int>, absl::Status> failed_joins_;
  // Kept for the process: a GPU set's communicator serves every session.
  std::map<std::vector<int>, std::vector<ncclComm_t>> comms_;
  // Ranks of communicators spanning processes, by (id, rank).
  std::map<std::pair<std::string, int>, ncclComm_t> rank_comms_;
};

}  // namespace

DeviceCollectiveBackend* NcclCollectiveBackend() {
  static DeviceCollectiveBackend* const backend = []() -> DeviceCollectiveBackend* {
    const char* env = std::getenv("GRAPHRUN_NCCL");
    if (env != nullptr && std::string(env) == "0") return nullptr;
    // Ranks connect when they join (ncclCommInitRank, outside the enqueue
    // lock), not at their first collective (NCCL >= 2.22's default): a
    // first collective that waited there for a rank of another task of this
    // process would wait under the lock that rank needs. The user's
    // setting wins.
    setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
    std::string why;
    const Nccl* nccl = Nccl::Load(&why);
    int version = 0;
    if (nccl != nullptr) {
      ncclResult_t r = nccl->GetVersion(&version);
      if (r != ncclSuccess) why = nccl->GetErrorString(r);
    }
    if (nccl == nullptr || !why.empty()) {
      std::fprintf(stderr,
                   "graphrun: NCCL does not load (%s); GPU collectives go through host memory\n",
                   why.c_str());
      return nullptr;
    }
    return new NcclBackend(nccl);
  }();
  return backend;
}

int64_t NcclRoundsRun() { return rounds_run.load(); }

}  // namespace graphrun
