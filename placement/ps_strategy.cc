#include "placement/ps_strategy.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/node_def_util.h"
#include "placement/balanced_strategy.h"

namespace graphrun {
namespace placement {

const std::set<std::string>& DefaultPsOps() {
  static const std::set<std::string>* const kOps = new std::set<std::string>{
      "Variable",
      "VariableV2",
      "AutoReloadVariable",
      "VarHandleOp",
      "MutableHashTable",
      "MutableHashTableV2",
      "MutableHashTableOfTensors",
      "MutableHashTableOfTensorsV2",
      "MutableDenseHashTable",
      "MutableDenseHashTableV2",
  };
  return *kOps;
}

VariableInfo GetVariableInfo(const tensorflow::NodeDef& node) {
  VariableInfo info;
  PartialShape shape;
  DataType dtype = DT_INVALID;
  if (GetAttr(node, "shape", &shape).ok()) info.shape = shape;
  if (GetAttr(node, "dtype", &dtype).ok()) info.dtype = dtype;
  const int64_t n = info.shape.num_elements();
  const int size = info.dtype == DT_INVALID ? 0 : DataTypeSize(BaseType(info.dtype));
  int64_t bytes = 0;
  if (n >= 0 && size > 0 && !__builtin_mul_overflow(n, int64_t{size}, &bytes)) info.bytes = bytes;
  return info;
}

namespace {

class RoundRobinStrategy : public PsStrategy {
 public:
  explicit RoundRobinStrategy(int num_tasks) : num_tasks_(num_tasks) {}
  int Choose(const tensorflow::NodeDef&, const PartialShape&, DataType) override {
    const int task = next_;
    next_ = (next_ + 1) % num_tasks_;
    return task;
  }

 private:
  int num_tasks_;
  int next_ = 0;
};

class GreedyBytesStrategy : public PsStrategy {
 public:
  explicit GreedyBytesStrategy(int num_tasks) : loads_(num_tasks, 0) {}
  int Choose(const tensorflow::NodeDef& node, const PartialShape&, DataType) override {
    int task = 0;  // numpy.argmin: the first minimum
    for (int i = 1; i < static_cast<int>(loads_.size()); ++i) {
      if (loads_[i] < loads_[task]) task = i;
    }
    const int64_t bytes = GetVariableInfo(node).bytes;
    loads_[task] += bytes > 0 ? bytes : 0;
    return task;
  }

 private:
  std::vector<int64_t> loads_;
};

class FixedMapStrategy : public PsStrategy {
 public:
  FixedMapStrategy(std::map<std::string, int> tasks, int num_tasks)
      : tasks_(std::move(tasks)), fallback_(num_tasks) {}
  int Choose(const tensorflow::NodeDef& node, const PartialShape& shape, DataType dtype) override {
    auto it = tasks_.find(node.name());
    if (it != tasks_.end()) return it->second;
    return fallback_.Choose(node, shape, dtype);
  }

 private:
  std::map<std::string, int> tasks_;
  RoundRobinStrategy fallback_;
};

}  // namespace

std::unique_ptr<PsStrategy> NewRoundRobinStrategy(int num_tasks) {
  return std::make_unique<RoundRobinStrategy>(num_tasks);
}
std::unique_ptr<PsStrategy> NewGreedyBytesStrategy(int num_tasks) {
  return std::make_unique<GreedyBytesStrategy>(num_tasks);
}
std::unique_ptr<PsStrategy> NewFixedMapStrategy(std::map<std::string, int> tasks, int num_tasks) {
  return std::make_unique<FixedMapStrategy>(std::move(tasks), num_tasks);
}

absl::Status PsStrategyRegistry::Register(const std::string& name, Factory factory) {
  if (name.empty() || !factory) {
    return absl::InvalidArgumentError("PS strategy needs a name and a factory");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (per_node_.count(name) || whole_graph_.count(name)) {
    return absl::AlreadyExistsError(absl::StrCat("PS strategy '", name, "' already registered"));
  }
  per_node_[name] = std::move(factory);
  return absl::OkStatus();
}

absl::Status PsStrategyRegistry::RegisterGraphStrategy(const std::string& name,
                                                       GraphFactory factory) {
  if (name.empty() || !factory) {
    return absl::InvalidArgumentError("PS strategy needs a name and a factory");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (per_node_.count(name) || whole_graph_.count(name)) {
    return absl::AlreadyExistsError(absl::StrCat("PS strategy '", name, "' already registered"));
  }
  whole_graph_[name] = std::move(factory);
  return absl::OkStatus();
}

bool PsStrategyRegistry::Contains(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return per_node_.count(name) || whole_graph_.count(name);
}

bool PsStrategyRegistry::IsGraphStrategy(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return whole_graph_.count(name) > 0;
}

std::vector<std::string> PsStrategyRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> names;
  for (const auto& [n, f] : per_node_) names.insert(n);
  for (const auto& [n, f] : whole_graph_) names.insert(n);
  return {names.begin(), names.end()};
}

absl::StatusOr<std::unique_ptr<PsStrategy>> PsStrategyRegistry::Create(const std::string& name,
                                                                       int num_tasks) const {
  if (num_tasks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PS strategy '", name, "': need at least one PS task, got ", num_tasks));
  }
  Factory factory;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = per_node_.find(name);
    if (it != per_node_.end()) {
      factory = it->second;
    } else if (whole_graph_.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("PS strategy '", name,
                       "' works on the whole graph (a pass before partitioning), not per node"));
    }
  }
  if (!factory) {
    return absl::NotFoundError(
        absl::StrCat("unknown PS strategy '", name, "'; known: ", absl::StrJoin(Names(), ", ")));
  }
  return factory(num_tasks);
}

absl::StatusOr<std::unique_ptr<GraphPsStrategy>> PsStrategyRegistry::CreateGraphStrategy(
    const std::string& name) const {
  GraphFactory factory;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = whole_graph_.find(name);
    if (it != whole_graph_.end()) {
      factory = it->second;
    } else if (per_node_.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("PS strategy '", name, "' is per node, not a whole-graph strategy"));
    }
  }
  if (!factory) {
    return absl::NotFoundError(
        absl::StrCat("unknown PS strategy '", name, "'; known: ", absl::StrJoin(Names(), ", ")));
  }
  return factory();
}

void RegisterBuiltinPsStrategies(PsStrategyRegistry& r) {
  (void)r.Register("round_robin", NewRoundRobinStrategy);
  (void)r.Register("greedy_bytes", NewGreedyBytesStrategy);
  (void)r.RegisterGraphStrategy("balanced", [] { return NewBalancedStrategy(); });
}

PsStrategyRegistry& PsStrategyRegistry::Default() {
  static PsStrategyRegistry* const kRegistry = [] {
    auto* r = new PsStrategyRegistry();
    RegisterBuiltinPsStrategies(*r);
    return r;
  }();
  return *kRegistry;
}

}  // namespace placement
}  // namespace graphrun
