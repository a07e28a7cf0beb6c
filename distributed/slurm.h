// The cluster of a Slurm job step, as TensorFlow's SlurmClusterResolver
// derives it, for `srun graphrun train ...` (docs/deploy.md):
//   - the step's nodes (SLURM_STEP_NODELIST, a hostlist such as
//     "node[01-03,7]") and tasks per node (SLURM_STEP_TASKS_PER_NODE, such
//     as "2(x3),1"), tasks placed on nodes in rank order (block
//     distribution);
//   - the task of rank r on its node as the k-th there listens on
//     port_base + k;
//   - ranks 0 .. num_ps-1 are the parameter servers, the rest workers in
//     rank order; worker 0 is the chief.
// The result is TF_CONFIG's JSON, so everything downstream is the same as
// under TF_CONFIG.
#ifndef GRAPHRUN_DISTRIBUTED_SLURM_H_
#define GRAPHRUN_DISTRIBUTED_SLURM_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace graphrun {
namespace distributed {

// "node[01-03,7],gpu5" -> node01 node02 node03 node7 gpu5 (each range
// keeps its own zero padding). InvalidArgument naming the bad part.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist);
// "2(x3),1" -> 2 2 2 1.
absl::StatusOr<std::vector<int>> ExpandTasksPerNode(absl::string_view spec);

struct SlurmOptions {
  int num_ps = 1;
  int port_base = 2222;
};

// True when this process is a task of a Slurm job step (SLURM_PROCID set).
bool UnderSlurm(const std::function<const char*(const char*)>& getenv);
// TF_CONFIG's JSON for this task. InvalidArgument naming the variable
// that is missing or malformed, or when the step has no worker left after
// num_ps parameter servers.
absl::StatusOr<std::string> TfConfigFromSlurm(const std::function<const char*(const char*)>& getenv,
                                              const SlurmOptions& options);

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_SLURM_H_
