// StepStatsCollector: where an executor run saves the NodeExecStats of its
// nodes when the step is traced (RunOptions.trace_level). A call frame's
// body saves into a child that names its nodes under the call's (the body
// names them FUNCTION/NODE: "CALL/FUNCTION/NODE", nested calls
// "CALL/FUNCTION/INNER_CALL/INNER_FUNCTION/NODE"), with the caller's
// device's.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_STEP_STATS_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_STEP_STATS_H_

#include <mutex>
#include <string>
#include <utility>

#include "graph/proto/step_stats.pb.h"

namespace graphrun {

// Collects NodeExecStats of one device for one step. Thread-safe.
class StepStatsCollector {
 public:
  explicit StepStatsCollector(tensorflow::DeviceStepStats* out) : out_(out) {}
  // Saves into `parent`, each node named "prefix/NODE". `parent` must
  // outlive this collector.
  StepStatsCollector(StepStatsCollector* parent, std::string prefix)
      : parent_(parent), prefix_(std::move(prefix)) {}

  void Save(tensorflow::NodeExecStats stats) {
    if (parent_ != nullptr) {
      stats.set_node_name(prefix_ + "/" + stats.node_name());
      parent_->Save(std::move(stats));
      return;
    }
    std::lock_guard<std::mutex> l(mu_);
    *out_->add_node_stats() = std::move(stats);
  }

 private:
  std::mutex mu_;
  tensorflow::DeviceStepStats* out_ = nullptr;
  StepStatsCollector* const parent_ = nullptr;
  const std::string prefix_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_STEP_STATS_H_
