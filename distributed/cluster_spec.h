// ClusterSpec: the jobs of a cluster and the address of each task, in
// TensorFlow's JSON form
//   {"ps": ["host:port", ...], "worker": ["host:port", ...]}
// (a job may also be an object {"0": "host:port", "1": ...} with dense
// indices), and TF_CONFIG:
//   {"cluster": {...}, "task": {"type": "worker", "index": 0}}
// with task types chief, worker, ps, evaluator (any job of the cluster is
// accepted; evaluator may be outside the cluster). TF_CONFIG may instead
// hold a "sparseCluster", as Kubeflow's TFJob writes it with
// enableDynamicWorker: only the tasks this one talks to, e.g. for worker 1
//   {"sparseCluster": {"worker": {"1": "w1:2222"}, "ps": ["p0:2222"]}, ...}
// A sparse ClusterSpec has holes: tasks whose address it does not know.
//
// Task names are "/job:NAME/replica:0/task:I". A ClusterSpec is a value
// type; thread-compatible.
#ifndef GRAPHRUN_DISTRIBUTED_CLUSTER_SPEC_H_
#define GRAPHRUN_DISTRIBUTED_CLUSTER_SPEC_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace graphrun {
namespace distributed {

class ClusterSpec {
 public:
  ClusterSpec() = default;

  // Parses the JSON form. InvalidArgument naming the field ("cluster spec:
  // job 'ps' task 1: ...") for malformed JSON, a non-string address, an
  // address without ":port", an empty or badly named job, sparse indices.
  // `sparse`: also a sparse cluster's form (ToJson of a task's sparse
  // view: jobs with gaps in their indices); the result is then sparse().
  static absl::StatusOr<ClusterSpec> FromJson(absl::string_view json, bool sparse = false);
  // `--cluster=` value: JSON text, or "@path" for a JSON file (NotFound /
  // InvalidArgument naming the path).
  static absl::StatusOr<ClusterSpec> FromFlag(const std::string& value);

  // Appends a task to `job` (creating it) and returns its index.
  int AddTask(const std::string& job, const std::string& address);
  // Sets task `index` of `job`; tasks below it not set yet become holes
  // and the cluster sparse.
  void SetTask(const std::string& job, int index, const std::string& address);

  // Whether the cluster names only some of its tasks (a TF_CONFIG
  // sparseCluster, or holes): the jobs' sizes are not known.
  bool sparse() const { return sparse_; }
  void MarkSparse() { sparse_ = true; }
  // The tasks of `view` (a sparse cluster: the ones a task talks to) at
  // this cluster's addresses; tasks this cluster lacks stay out. `view`
  // dense: this cluster itself.
  ClusterSpec KnownTo(const ClusterSpec& view) const;

  // Addresses by job and index; "" for a hole of a sparse cluster.
  const std::map<std::string, std::vector<std::string>>& jobs() const { return jobs_; }
  bool empty() const { return jobs_.empty(); }
  // Tasks of `job`; in a sparse cluster the highest known index + 1, not
  // the job's size (which it does not say).
  int num_tasks(const std::string& job) const;
  // NotFound naming the job/task (a hole: "not in this sparse cluster").
  absl::StatusOr<std::string> Address(const std::string& job, int task) const;
  // Every task name whose address is known, jobs sorted, tasks in index
  // order.
  std::vector<std::string> TaskNames() const;
  // Address of "/job:J/replica:0/task:I"; NotFound naming the task.
  absl::StatusOr<std::string> AddressOfTask(const std::string& task_name) const;

  // One line of TensorFlow's JSON form, jobs sorted; a job with holes as
  // an object of its known tasks ({"1": "host:port"}).
  std::string ToJson() const;

 private:
  std::map<std::string, std::vector<std::string>> jobs_;
  bool sparse_ = false;
};

struct TfConfig {
  ClusterSpec cluster;
  std::string task_type;  // "chief", "worker", "ps", "evaluator", ...
  int task_index = 0;
  std::string environment;  // "cloud" from TFJob; informational
  bool sparse = false;      // from "sparseCluster" (and cluster.sparse())
};

// Parses TF_CONFIG. InvalidArgument naming the field ("TF_CONFIG: task.index
// must be a non-negative integer"); the task must exist in the cluster
// unless its type is "evaluator". As Kubeflow's TFJob and SageMaker write
// it too: a "master" job and task type are the chief (renamed "chief" in
// the result), and "environment" is kept. "sparseCluster" instead of
// "cluster" (not both): jobs may be empty ([] or {}) and objects may skip
// indices; TFJob gives a PS its own address alone ("ps": ["p1:2222"] for
// task index 1), which is read as that task's address.
absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json);

// Whether `address` is "host:port": a non-empty host and a port in
// 0..65535 (in *port).
bool ParseHostPort(absl::string_view address, int* port);

// "/job:J/replica:0/task:I".
std::string TaskName(const std::string& job, int task);

struct TaskId {
  std::string job;
  int replica = 0;
  int task = 0;
};
// Parses "/job:J/replica:R/task:I" (optionally followed by "/device:...").
// InvalidArgument when a part is missing.
absl::StatusOr<TaskId> ParseTaskName(absl::string_view name);

// The task prefix of a full device name: "/job:ps/replica:0/task:1" of
// "/job:ps/replica:0/task:1/device:CPU:0"; the name itself if it has no
// device part.
std::string TaskOfDevice(absl::string_view device);

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_CLUSTER_SPEC_H_
