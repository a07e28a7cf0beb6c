// Peer liveness: heartbeats to the tasks a process is using right now.
//
// A master session watches the tasks of every step it runs, a task's
// collectives the whole cluster while an all-reduce is in flight. Every
// `interval_ms` each watched task gets a heartbeat (a GetStatus with a
// deadline of 3/4 of the interval); after `misses` heartbeats in a row without an
// answer (the process is gone, stopped, or cut off) the task is dead:
// one line "Unavailable: task T is unreachable: ..." goes to the report
// stream (stderr) at once, and every watch on T gets that status, so a
// step that needs T fails within about (misses + 1) intervals of its death
// instead of waiting for a step deadline. Heartbeats to a task go on for
// (misses + 2) intervals after its last watch ended (a training loop's
// steps come and go faster than heartbeats); a task found dead while
// nobody watches it is reported when a watch needs it. A task that
// answers again is alive again (and said so).
#ifndef GRAPHRUN_DISTRIBUTED_HEALTH_H_
#define GRAPHRUN_DISTRIBUTED_HEALTH_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "distributed/worker_interface.h"

namespace graphrun {
namespace distributed {

struct HealthOptions {
  int64_t interval_ms = 1000;  // <= 0: no heartbeats (watches never fire)
  int misses = 3;
  std::string self_task;  // never watched
};

class HealthMonitor {
 public:
  // Heartbeats go through `workers` (which must outlive the monitor);
  // deaths are reported on `report` (may be null).
  HealthMonitor(HealthOptions options, WorkerCacheInterface* workers, std::ostream* report);
  ~HealthMonitor();  // Stop()
  // Ends the heartbeats; no watch fires after it returns.
  void Stop();

  class Watch {
   public:
    Watch() = default;
    Watch(Watch&&) = default;
    Watch& operator=(Watch&&) = default;
    ~Watch() { Cancel(); }
    // After it returns, the callback is not running and never will.
    void Cancel();

   private:
    friend class HealthMonitor;
    struct State;
    std::shared_ptr<State> state_;
    HealthMonitor* monitor_ = nullptr;
  };
  // Calls on_dead(Unavailable naming the task) once, on the monitor's
  // thread, when one of `tasks` is found dead while the watch lives (at
  // once, on this thread, for a task already dead). Cancel (or destroy)
  // the watch without holding a lock that `on_dead` takes.
  // `heard_from`: the tasks just reached this one (a call from them, such
  // as a master's RunGraph): one found dead is alive again at once (said
  // on the report stream if its death was), not only after its next
  // answered heartbeat, and the watch does not fire for it.
  Watch WatchTasks(const std::vector<std::string>& tasks,
                   std::function<void(const absl::Status&)> on_dead, bool heard_from = false);

  // The status of a task found dead (OK when it is not).
  absl::Status TaskStatus(const std::string& task) const;
  int64_t interval_ms() const { return options_.interval_ms; }

 private:
  struct Peer {
    int watchers = 0;
    // When the last watch of the task ended: heartbeats go on a little
    // while (steps come and go between heartbeats).
    std::chrono::steady_clock::time_point idle_since;
    int misses = 0;
    bool probing = false;
    bool dead = false;
    bool reported = false;  // its death went to the report stream
    absl::Status dead_status;
  };
  void Loop();
  void Probe(const std::string& task);
  void ProbeDone(const std::string& task, const absl::Status& s);
  void Unwatch(const std::shared_ptr<Watch::State>& state);

  const HealthOptions options_;
  WorkerCacheInterface* const workers_;
  std::ostream* const report_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int probes_in_flight_ = 0;
  std::map<std::string, Peer> peers_;
  std::set<std::shared_ptr<Watch::State>> watches_;
  std::thread thread_;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_HEALTH_H_
