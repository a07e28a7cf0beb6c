// What a Worker (and its GraphMgr) share: the task's identity, devices,
// registries, pools and the way to reach peers. Not owned by the worker.
#ifndef GRAPHRUN_DISTRIBUTED_WORKER_ENV_H_
#define GRAPHRUN_DISTRIBUTED_WORKER_ENV_H_

#include <string>

#include "graph/op_registry.h"
#include "kernels/kernel_registry.h"
#include "kernels/thread_pool.h"
#include "runtime/device.h"

namespace graphrun {
namespace distributed {

class WorkerCacheInterface;
class RemoteCollectives;

struct WorkerEnv {
  std::string task;                 // "/job:ps/replica:0/task:0"
  DeviceMgr* device_mgr = nullptr;  // this task's devices
  const OpRegistry* op_registry = nullptr;
  const KernelRegistry* kernel_registry = nullptr;
  ThreadPool* inter_op_pool = nullptr;           // runs executor closures
  WorkerCacheInterface* worker_cache = nullptr;  // peers (and this task)
  RemoteCollectives* collectives = nullptr;      // null: no collectives
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_WORKER_ENV_H_
