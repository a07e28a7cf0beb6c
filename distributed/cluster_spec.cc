#include "distributed/cluster_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "graph/status.h"
#include "util/file_read.h"
#include "util/json.h"

namespace graphrun {
namespace distributed {
namespace {

// A job's task indices stop here (a sparse job's holes cost memory).
constexpr int kMaxTaskIndex = 100000;

bool ValidJobName(const std::string& job) {
  if (job.empty()) return false;
  for (char c : job) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

absl::Status CheckAddress(const std::string& where, const std::string& address) {
  int port = 0;
  if (!ParseHostPort(address, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": address '", address, "' is not host:port"));
  }
  return absl::OkStatus();
}

const char* KindName(const JsonValue& v) {
  switch (v.kind()) {
    case JsonValue::Kind::kNull:
      return "null";
    case JsonValue::Kind::kBool:
      return "a boolean";
    case JsonValue::Kind::kNumber:
      return "a number";
    case JsonValue::Kind::kString:
      return "a string";
    case JsonValue::Kind::kArray:
      return "an array";
    case JsonValue::Kind::kObject:
      return "an object";
  }
  return "?";
}

// InvalidArgument naming the first key that appears twice in an object.
absl::Status CheckNoDuplicateKeys(const JsonValue& v, const std::string& what) {
  std::set<std::string> seen;
  for (const auto& [key, value] : v.members()) {
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": duplicate key '", key, "'"));
    }
  }
  return absl::OkStatus();
}

// `sparse`: a TF_CONFIG sparseCluster (empty jobs, indices with gaps).
absl::StatusOr<ClusterSpec> FromJsonValue(const JsonValue& v, const std::string& what,
                                          bool sparse = false) {
  if (!v.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected an object of jobs, got ", KindName(v)));
  }
  GR_RETURN_IF_ERROR(CheckNoDuplicateKeys(v, what));
  ClusterSpec spec;
  for (const auto& [job, tasks] : v.members()) {
    std::string where = absl::StrCat(what, ": job '", job, "'");
    if (!ValidJobName(job)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": job names are letters, digits, '_' and '-'"));
    }
    std::map<int, std::string> addrs;
    if (tasks.is_array()) {
      for (size_t i = 0; i < tasks.items().size(); ++i) {
        const JsonValue& a = tasks.items()[i];
        std::string tw = absl::StrCat(where, " task ", i);
        if (!a.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat(tw, ": expected a \"host:port\" string, got ", KindName(a)));
        }
        absl::Status s = CheckAddress(tw, a.string_value());
        if (!s.ok()) return s;
        addrs[static_cast<int>(i)] = a.string_value();
      }
    } else if (tasks.is_object()) {
      GR_RETURN_IF_ERROR(CheckNoDuplicateKeys(tasks, where));
      for (const auto& [index, a] : tasks.members()) {
        int i = 0;
        if (!absl::SimpleAtoi(index, &i) || i < 0 || i > kMaxTaskIndex) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": task index '", index, "' is not a number in 0..", kMaxTaskIndex));
        }
        std::string tw = absl::StrCat(where, " task ", i);
        if (!a.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat(tw, ": expected a \"host:port\" string, got ", KindName(a)));
        }
        absl::Status s = CheckAddress(tw, a.string_value());
        if (!s.ok()) return s;
        addrs[i] = a.string_value();
      }
      int expect = 0;
      for (const auto& [i, a] : addrs) {
        if (i != expect && !sparse) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": task indices must be 0..N-1, task ", expect, " is missing"));
        }
        expect = i + 1;
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected an array of \"host:port\", got ", KindName(tasks)));
    }
    if (addrs.empty()) {
      if (sparse) continue;  // TFJob writes "worker": {} for a PS
      return absl::InvalidArgumentError(absl::StrCat(where, ": has no tasks"));
    }
    for (const auto& [i, a] : addrs) spec.SetTask(job, i, a);
  }
  if (sparse) spec.MarkSparse();
  return spec;
}

}  // namespace

bool ParseHostPort(absl::string_view address, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  // The host: printable, no spaces (a NUL cut "127.0.0.1\0:0" short, and
  // gRPC then listened on its default port, 443).
  for (char c : address.substr(0, colon)) {
    if (c <= ' ' || c > '~') return false;
  }
  // The port: 1 to 5 digits, nothing else (SimpleAtoi took "+0" and " 5").
  const absl::string_view digits = address.substr(colon + 1);
  if (digits.empty() || digits.size() > 5) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(digits, port) && *port <= 65535;
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromJson(absl::string_view json, bool sparse) {
  auto v = ParseJson(json);
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster spec: malformed JSON: ", v.status().message()));
  }
  return FromJsonValue(*v, "cluster spec", sparse);
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromFlag(const std::string& value) {
  if (!absl::StartsWith(value, "@")) return FromJson(value);
  std::string path = value.substr(1);
  auto text = ReadFileCapped(path, 64 << 20);  // a cluster of millions of tasks fits
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("cluster spec file: ", text.status().message()));
  }
  auto spec = FromJson(*text);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

int ClusterSpec::AddTask(const std::string& job, const std::string& address) {
  auto& tasks = jobs_[job];
  tasks.push_back(address);
  return static_cast<int>(tasks.size()) - 1;
}

void ClusterSpec::SetTask(const std::string& job, int index, const std::string& address) {
  auto& tasks = jobs_[job];
  if (index >= static_cast<int>(tasks.size())) {
    if (index > static_cast<int>(tasks.size())) sparse_ = true;
    tasks.resize(index + 1);
  }
  tasks[index] = address;
}

ClusterSpec ClusterSpec::KnownTo(const ClusterSpec& view) const {
  if (!view.sparse()) return *this;
  ClusterSpec out;
  out.sparse_ = true;
  for (const auto& [job, tasks] : view.jobs_) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].empty()) continue;
      absl::StatusOr<std::string> a = Address(job, static_cast<int>(i));
      if (a.ok()) out.SetTask(job, static_cast<int>(i), *a);
    }
  }
  return out;
}

int ClusterSpec::num_tasks(const std::string& job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

absl::StatusOr<std::string> ClusterSpec::Address(const std::string& job, int task) const {
  auto it = jobs_.find(job);
  if (it != jobs_.end() && task >= 0 && task < static_cast<int>(it->second.size()) &&
      !it->second[task].empty()) {
    return it->second[task];
  }
  if (sparse_ && task >= 0) {
    return absl::NotFoundError(absl::StrCat("job '", job, "' task ", task,
                                            " is not in this sparse cluster (its address is not "
                                            "known to this task)"));
  }
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("cluster has no job '", job, "'"));
  }
  return absl::NotFoundError(
      absl::StrCat("job '", job, "' has no task ", task, " (it has ", it->second.size(), ")"));
}

std::vector<std::string> ClusterSpec::TaskNames() const {
  std::vector<std::string> out;
  for (const auto& [job, tasks] : jobs_) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (!tasks[i].empty()) out.push_back(TaskName(job, static_cast<int>(i)));
    }
  }
  return out;
}

absl::StatusOr<std::string> ClusterSpec::AddressOfTask(const std::string& task_name) const {
  auto id = ParseTaskName(task_name);
  if (!id.ok()) return id.status();
  if (id->replica != 0) {
    return absl::NotFoundError(absl::StrCat("task '", task_name, "': only replica 0 exists"));
  }
  return Address(id->job, id->task);
}

std::string ClusterSpec::ToJson() const {
  std::string out = "{";
  bool first_job = true;
  for (const auto& [job, tasks] : jobs_) {
    if (!first_job) out += ", ";
    first_job = false;
    const bool holes = std::find(tasks.begin(), tasks.end(), "") != tasks.end();
    absl::StrAppend(&out, JsonQuote(job), holes ? ": {" : ": [");
    bool first = true;
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].empty()) continue;
      if (!first) out += ", ";
      first = false;
      if (holes) absl::StrAppend(&out, JsonQuote(std::to_string(i)), ": ");
      out += JsonQuote(tasks[i]);
    }
    out += holes ? "}" : "]";
  }
  return out + "}";
}

absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json) {
  auto v = ParseJson(json);
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: malformed JSON: ", v.status().message()));
  }
  if (!v->is_object()) {
    return absl::InvalidArgumentError("TF_CONFIG: expected an object");
  }
  // Python's json, which TensorFlow reads TF_CONFIG with, keeps the last of
  // two equal keys; this reader kept the first: the same TF_CONFIG made a
  // PS here and a worker there. Neither is taken.
  GR_RETURN_IF_ERROR(CheckNoDuplicateKeys(*v, "TF_CONFIG"));
  if (const JsonValue* task = v->Find("task"); task != nullptr && task->is_object()) {
    GR_RETURN_IF_ERROR(CheckNoDuplicateKeys(*task, "TF_CONFIG: task"));
  }
  TfConfig cfg;
  const JsonValue* cluster = v->Find("cluster");
  const JsonValue* sparse = v->Find("sparseCluster");
  if (cluster != nullptr && sparse != nullptr) {
    return absl::InvalidArgumentError("TF_CONFIG: both 'cluster' and 'sparseCluster' (give one)");
  }
  if (cluster == nullptr && sparse == nullptr) {
    return absl::InvalidArgumentError("TF_CONFIG: missing field 'cluster' (or 'sparseCluster')");
  }
  cfg.sparse = sparse != nullptr;
  const std::string what = cfg.sparse ? "TF_CONFIG: sparseCluster" : "TF_CONFIG: cluster";
  auto spec = FromJsonValue(cfg.sparse ? *sparse : *cluster, what, cfg.sparse);
  if (!spec.ok()) return spec.status();
  // Kubeflow's TFJob and SageMaker name the chief "master" (TF 1's name):
  // it is the chief here, under one name for every task that reads this.
  if (spec->num_tasks("master") > 0) {
    if (spec->num_tasks("chief") > 0) {
      return absl::InvalidArgumentError(
          "TF_CONFIG: cluster has both a 'chief' and a 'master' job (master is the chief)");
    }
    ClusterSpec renamed;
    for (const auto& [job, addrs] : spec->jobs()) {
      for (size_t i = 0; i < addrs.size(); ++i) {
        if (!addrs[i].empty()) {
          renamed.SetTask(job == "master" ? "chief" : job, static_cast<int>(i), addrs[i]);
        }
      }
    }
    if (spec->sparse()) renamed.MarkSparse();
    *spec = std::move(renamed);
  }
  cfg.cluster = std::move(*spec);
  // TFJob writes "environment": "cloud" (read by tf.contrib.learn <= 1.3).
  if (const JsonValue* env = v->Find("environment"); env != nullptr) {
    if (!env->is_string()) {
      return absl::InvalidArgumentError("TF_CONFIG: environment must be a string");
    }
    cfg.environment = env->string_value();
  }
  const JsonValue* task = v->Find("task");
  if (task == nullptr || !task->is_object()) {
    return absl::InvalidArgumentError("TF_CONFIG: missing object field 'task'");
  }
  const JsonValue* type = task->Find("type");
  if (type == nullptr || !type->is_string() || type->string_value().empty()) {
    return absl::InvalidArgumentError("TF_CONFIG: task.type must be a non-empty string");
  }
  cfg.task_type = type->string_value() == "master" ? "chief" : type->string_value();
  const JsonValue* index = task->Find("index");
  if (index == nullptr) {
    cfg.task_index = 0;
  } else {
    int n = -1;
    if (!index->is_number() || !absl::SimpleAtoi(index->number_text(), &n) || n < 0 ||
        n > 1000000) {
      return absl::InvalidArgumentError("TF_CONFIG: task.index must be a non-negative integer");
    }
    cfg.task_index = n;
  }
  if (cfg.sparse && cfg.task_type == "ps" && cfg.task_index > 0) {
    // TFJob (enableDynamicWorker) gives PS task i the list of its own
    // address alone.
    const JsonValue* own = sparse->Find(type->string_value());
    if (own != nullptr && own->is_array() && own->items().size() == 1) {
      const std::string job = cfg.task_type;
      const std::string address = *cfg.cluster.Address(job, 0);
      ClusterSpec moved;
      moved.MarkSparse();
      for (const auto& [j, addrs] : cfg.cluster.jobs()) {
        for (size_t i = 0; i < addrs.size(); ++i) {
          if (j != job && !addrs[i].empty()) moved.SetTask(j, static_cast<int>(i), addrs[i]);
        }
      }
      moved.SetTask(job, cfg.task_index, address);
      cfg.cluster = std::move(moved);
    }
  }
  if (cfg.task_type != "evaluator" && !cfg.cluster.Address(cfg.task_type, cfg.task_index).ok()) {
    if (cfg.sparse) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: task {type: '", cfg.task_type, "', index: ", cfg.task_index,
          "} has no address in the sparseCluster",
          cfg.task_type == "chief" ? " (TFJob's enableDynamicWorker names ps and worker tasks "
                                     "only: make worker 0 the chief)"
                                   : ""));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: task {type: '", cfg.task_type, "', index: ", cfg.task_index,
                     "} is not in the cluster (job '", cfg.task_type, "' has ",
                     cfg.cluster.num_tasks(cfg.task_type), " tasks)"));
  }
  return cfg;
}

std::string TaskName(const std::string& job, int task) {
  return absl::StrCat("/job:", job, "/replica:0/task:", task);
}

absl::StatusOr<TaskId> ParseTaskName(absl::string_view name) {
  TaskId id;
  bool has_job = false, has_task = false;
  for (absl::string_view part : absl::StrSplit(name, '/', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&part, "job:")) {
      id.job = std::string(part);
      has_job = !id.job.empty();
    } else if (absl::ConsumePrefix(&part, "replica:")) {
      if (!absl::SimpleAtoi(part, &id.replica)) has_job = false;
    } else if (absl::ConsumePrefix(&part, "task:")) {
      has_task = absl::SimpleAtoi(part, &id.task) && id.task >= 0;
    }
  }
  if (!has_job || !has_task) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a task name /job:J/replica:R/task:I"));
  }
  return id;
}

std::string TaskOfDevice(absl::string_view device) {
  size_t pos = device.find("/device:");
  return std::string(pos == absl::string_view::npos ? device : device.substr(0, pos));
}

}  // namespace distributed
}  // namespace graphrun
