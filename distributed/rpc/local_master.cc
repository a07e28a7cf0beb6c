#include "distributed/rpc/local_master.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>

#include "absl/container/flat_hash_map.h"

namespace graphrun {
namespace distributed {
namespace {

struct Entry {
  MasterInterface* master = nullptr;
  int active = 0;                  // calls running; guarded by Registry::mu
  std::set<CallOptions*> running;  // their options; guarded by Registry::mu
};

struct Registry {
  std::mutex mu;
  std::condition_variable cv;  // an entry's `active` went down
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> by_target;
};

Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: servers may stop at exit
  return *r;
}

}  // namespace

void LocalMaster::Register(const std::string& target, MasterInterface* master) {
  Registry& r = TheRegistry();
  auto e = std::make_shared<Entry>();
  e->master = master;
  std::lock_guard<std::mutex> l(r.mu);
  r.by_target[target] = std::move(e);
}

void LocalMaster::Unregister(const std::string& target, MasterInterface* master, int64_t grace_ms) {
  Registry& r = TheRegistry();
  std::unique_lock<std::mutex> l(r.mu);
  auto it = r.by_target.find(target);
  if (it == r.by_target.end() || it->second->master != master) return;
  std::shared_ptr<Entry> e = std::move(it->second);
  r.by_target.erase(it);
  r.cv.wait_for(l, std::chrono::milliseconds(grace_ms), [&] { return e->active == 0; });
  // Held under mu: a call's options stay alive until it leaves `running`.
  for (CallOptions* opts : e->running) opts->StartCancel();
  r.cv.wait(l, [&] { return e->active == 0; });
}

bool LocalMaster::Call(const std::string& target,
                       const std::function<void(MasterInterface*, CallOptions*)>& call) {
  Registry& r = TheRegistry();
  CallOptions opts;
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> l(r.mu);
    auto it = r.by_target.find(target);
    if (it == r.by_target.end()) return false;
    e = it->second;
    ++e->active;
    e->running.insert(&opts);
  }
  call(e->master, &opts);
  {
    std::lock_guard<std::mutex> l(r.mu);
    e->running.erase(&opts);
    --e->active;
  }
  r.cv.notify_all();
  return true;
}

}  // namespace distributed
}  // namespace graphrun
