#include "distributed/health.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/status.h"

namespace graphrun {
namespace distributed {

struct HealthMonitor::Watch::State {
  std::vector<std::string> tasks;
  std::mutex mu;
  std::condition_variable cv;
  bool active = true;
  bool running = false;  // on_dead is running on `runner`
  std::thread::id runner;
  std::function<void(const absl::Status&)> on_dead;

  // Runs on_dead once, unless cancelled first.
  void Fire(const absl::Status& why) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (!active) return;
      active = false;
      running = true;
      runner = std::this_thread::get_id();
    }
    on_dead(why);
    std::lock_guard<std::mutex> l(mu);
    running = false;
    cv.notify_all();
  }
  // Waits for a running on_dead, unless this thread is running it (the
  // callback may end what owns the watch).
  void Deactivate() {
    std::unique_lock<std::mutex> l(mu);
    active = false;
    if (runner != std::this_thread::get_id()) cv.wait(l, [this] { return !running; });
  }
};

void HealthMonitor::Watch::Cancel() {
  if (state_ == nullptr) return;
  monitor_->Unwatch(state_);
  state_->Deactivate();
  state_.reset();
}

HealthMonitor::HealthMonitor(HealthOptions options, WorkerCacheInterface* workers,
                             std::ostream* report)
    : options_(std::move(options)), workers_(workers), report_(report) {
  if (options_.interval_ms > 0) thread_ = std::thread([this] { Loop(); });
}

HealthMonitor::~HealthMonitor() { Stop(); }

void HealthMonitor::Stop() {
  {
    std::unique_lock<std::mutex> l(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::unique_lock<std::mutex> l(mu_);
  // Heartbeats still in flight end within their deadline.
  cv_.wait(l, [this] { return probes_in_flight_ == 0; });
  std::vector<std::shared_ptr<Watch::State>> all(watches_.begin(), watches_.end());
  l.unlock();
  for (const auto& w : all) w->Deactivate();
}

HealthMonitor::Watch HealthMonitor::WatchTasks(const std::vector<std::string>& tasks,
                                               std::function<void(const absl::Status&)> on_dead,
                                               bool heard_from) {
  Watch w;
  w.monitor_ = this;
  w.state_ = std::make_shared<Watch::State>();
  w.state_->on_dead = std::move(on_dead);
  absl::Status already;
  // The loop is woken only for a task it does not probe yet: a watch that
  // comes and goes every step (collectives) costs no thread wake-up.
  bool wake = false;
  const auto now = std::chrono::steady_clock::now();
  const auto linger = std::chrono::milliseconds(options_.interval_ms * (options_.misses + 2));
  std::vector<std::string> back;  // found dead and said so; heard from now
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const std::string& t : tasks) {
      if (t == options_.self_task) continue;
      w.state_->tasks.push_back(t);
      Peer& p = peers_[t];
      if (heard_from && p.dead) {
        if (p.reported) back.push_back(t);
        p.misses = 0;
        p.dead = false;
        p.reported = false;
        p.dead_status = absl::OkStatus();
      }
      if (p.watchers == 0 && !p.dead && !p.probing && now - p.idle_since >= linger) wake = true;
      ++p.watchers;
      if (p.dead && already.ok()) {
        already = p.dead_status;
        if (!p.reported && report_ != nullptr) {
          p.reported = true;
          *report_ << StatusToLine(already) << "\n" << std::flush;
        }
      }
    }
    if (options_.interval_ms > 0 && !stop_) watches_.insert(w.state_);
    if (wake) cv_.notify_all();
  }
  for (const std::string& t : back) {
    if (report_ != nullptr) {
      *report_ << "graphrun: task " << t << " is back (it called this task)\n" << std::flush;
    }
  }
  if (!already.ok()) w.state_->Fire(already);
  return w;
}

void HealthMonitor::Unwatch(const std::shared_ptr<Watch::State>& state) {
  std::lock_guard<std::mutex> l(mu_);
  watches_.erase(state);
  for (const std::string& t : state->tasks) {
    auto it = peers_.find(t);
    if (it != peers_.end() && it->second.watchers > 0 && --it->second.watchers == 0) {
      it->second.idle_since = std::chrono::steady_clock::now();
    }
  }
}

absl::Status HealthMonitor::TaskStatus(const std::string& task) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = peers_.find(task);
  return it == peers_.end() || !it->second.dead ? absl::OkStatus() : it->second.dead_status;
}

void HealthMonitor::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    std::vector<std::string> due;
    const auto now = std::chrono::steady_clock::now();
    const auto linger = std::chrono::milliseconds(options_.interval_ms * (options_.misses + 2));
    for (auto& [task, p] : peers_) {
      // Watched tasks (and lately watched), and dead ones (to see them
      // come back).
      const bool wanted = p.watchers > 0 || now - p.idle_since < linger || p.dead;
      if (wanted && !p.probing) {
        p.probing = true;
        ++probes_in_flight_;
        due.push_back(task);
      }
    }
    l.unlock();
    for (const std::string& t : due) Probe(t);
    l.lock();
    cv_.wait_for(l, std::chrono::milliseconds(options_.interval_ms), [this] { return stop_; });
  }
}

void HealthMonitor::Probe(const std::string& task) {
  auto worker = workers_->GetWorker(task);
  if (!worker.ok()) {
    ProbeDone(task, worker.status());
    return;
  }
  // Answered (or not) before the next tick, so each interval counts once.
  const int64_t deadline_ms = std::max<int64_t>(1, options_.interval_ms * 3 / 4);
  (*worker)->HeartbeatAsync(deadline_ms,
                            [this, task](const absl::Status& s) { ProbeDone(task, s); });
}

void HealthMonitor::ProbeDone(const std::string& task, const absl::Status& s) {
  std::vector<std::shared_ptr<Watch::State>> fire;
  absl::Status dead;
  std::string line;
  {
    std::lock_guard<std::mutex> l(mu_);
    Peer& p = peers_[task];
    p.probing = false;
    --probes_in_flight_;
    cv_.notify_all();
    if (s.ok()) {
      if (p.dead && p.reported && report_ != nullptr) {
        line = absl::StrCat("graphrun: task ", task, " answers heartbeats again\n");
      }
      p.misses = 0;
      p.dead = false;
      p.reported = false;
      p.dead_status = absl::OkStatus();
    } else if (!p.dead && ++p.misses >= options_.misses && !stop_) {
      p.dead = true;
      p.dead_status = absl::UnavailableError(absl::StrFormat(
          "task %s is unreachable: %d heartbeats in a row went unanswered (every %d ms; last: "
          "%s)",
          task, p.misses, options_.interval_ms, s.message()));
      dead = p.dead_status;
      // Reported now if a step or collective needs the task, else when one
      // does (a task that left at the end of a run is no news).
      if (p.watchers > 0) {
        p.reported = true;
        line = StatusToLine(dead) + "\n";
      }
      for (const auto& w : watches_) {
        for (const std::string& t : w->tasks) {
          if (t == task) {
            fire.push_back(w);
            break;
          }
        }
      }
    }
  }
  if (!line.empty() && report_ != nullptr) *report_ << line << std::flush;
  for (const auto& w : fire) w->Fire(dead);
}

}  // namespace distributed
}  // namespace graphrun
