// For tests that start a real PS and worker (`graphrun server` processes,
// through the launcher link) and move a tensor between them.
#ifndef GRAPHRUN_TESTS_DISTRIBUTED_PS_WORKER_TESTLIB_H_
#define GRAPHRUN_TESTS_DISTRIBUTED_PS_WORKER_TESTLIB_H_

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/cluster_spec.h"
#include "distributed/launcher_link.h"
#include "distributed/process_util.h"
#include "google/protobuf/text_format.h"
#include "graph/proto/graph.pb.h"

namespace graphrun {
namespace distributed {
namespace test {

inline std::string GraphrunBinary() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/tools/graphrun";
}

inline std::string TestTmpDir() {
  return std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
}

// /job:ps/task:0 and /job:worker/task:0, each `graphrun server` with
// `flags` and `env`, logs in TestTmpDir()/NAME_JOB.log; stopped when
// destroyed.
struct PsAndWorker {
  std::vector<ChildProcess> all;  // ps, worker
  ClusterSpec spec;
  ~PsAndWorker() { StopProcesses(all, 5000); }
  absl::Status Start(const std::string& name, const std::vector<std::string>& flags,
                     const std::vector<std::string>& env) {
    ClusterSpec placeholder;
    placeholder.AddTask("ps", "127.0.0.1:0");
    placeholder.AddTask("worker", "127.0.0.1:0");
    for (const char* job : {"ps", "worker"}) {
      ChildProcess c;
      c.task = TaskName(job, 0);
      c.log_file = absl::StrCat(TestTmpDir(), "/", name, "_", job, ".log");
      std::vector<std::string> args = {"server",
                                       "--cluster=" + placeholder.ToJson(),
                                       absl::StrCat("--job=", job),
                                       "--task=0",
                                       "--inter_op_threads=2",
                                       "--intra_op_threads=1"};
      args.insert(args.end(), flags.begin(), flags.end());
      absl::Status s = SpawnTask(GraphrunBinary(), args, env, c);
      if (!s.ok()) return s;
      all.push_back(c);
    }
    if (absl::Status s = CollectPorts(all, 60000); !s.ok()) return s;
    spec.AddTask("ps", absl::StrCat("127.0.0.1:", all[0].port));
    spec.AddTask("worker", absl::StrCat("127.0.0.1:", all[1].port));
    return SendCluster(all, spec);
  }
  ChildProcess& ps() { return all[0]; }
  ChildProcess& worker() { return all[1]; }
  std::string target() const { return absl::StrCat("grpc://", *spec.Address("worker", 0)); }
};

// 4 MiB of floats (`value` each) made on the PS and summed ("sum") on the
// worker: the tensor crosses between the tasks every step.
inline tensorflow::GraphDef CrossTaskGraph(float value) {
  tensorflow::GraphDef def;
  google::protobuf::TextFormat::ParseFromString(absl::StrCat(R"(
node { name: "dims" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } }
    int_val: 1048576 } } } }
node { name: "v" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: )",
                                                             value, R"( } } } }
node { name: "big" op: "Fill" input: "dims" input: "v" device: "/job:ps/task:0"
  attr { key: "T" value { type: DT_FLOAT } } attr { key: "index_type" value { type: DT_INT32 } } }
node { name: "axis" op: "Const" device: "/job:worker/task:0"
  attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 0 } } } }
node { name: "sum" op: "Sum" input: "big" input: "axis" device: "/job:worker/task:0"
  attr { key: "T" value { type: DT_FLOAT } } attr { key: "Tidx" value { type: DT_INT32 } }
  attr { key: "keep_dims" value { b: false } } })"),
                                                &def);
  return def;
}

}  // namespace test
}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_TESTS_DISTRIBUTED_PS_WORKER_TESTLIB_H_
