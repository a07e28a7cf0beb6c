#include "placement/placer.h"

#include <cstdint>
#include <cstdio>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/status.h"
#include "placement/device_spec.h"

namespace graphrun {
namespace placement {
namespace {

// Union-find with path halving and union by size: near-constant per call.
class UnionFind {
 public:
  explicit UnionFind(int n) : parent_(n), size_(n, 1) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }
  int Find(int x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  void Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return;
    if (size_[a] < size_[b]) std::swap(a, b);
    parent_[b] = a;
    size_[a] += size_[b];
  }

 private:
  std::vector<int> parent_;
  std::vector<int> size_;
};

std::string NodeText(const Node& n) {
  return absl::StrCat("node '", n.name(), "' (op ", n.op(), ")");
}

class Placer {
 public:
  Placer(Graph* graph, const std::vector<DeviceInfo>& devices, const PlacerOptions& options)
      : graph_(graph), devices_(devices), options_(options) {}

  absl::Status Run() {
    GR_RETURN_IF_ERROR(InitDevices());
    GR_RETURN_IF_ERROR(BuildGroups());
    for (size_t g = 0; g + 1 < group_start_.size(); ++g) {
      GR_RETURN_IF_ERROR(
          PlaceGroup(&members_[group_start_[g]], group_start_[g + 1] - group_start_[g]));
    }
    if (options_.log_device_placement) {
      for (Node* n : graph_->nodes()) {
        auto soft = soft_reason_.find(n);
        std::string line = absl::StrCat(
            n->name(), " (", n->op(), "): ", n->assigned_device(),
            soft == soft_reason_.end() ? "" : absl::StrCat(" (soft placement: ", soft->second, ")"),
            "\n");
        std::fputs(line.c_str(), stderr);
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status InitDevices() {
    if (devices_.empty()) {
      return absl::InvalidArgumentError("placement needs at least one device");
    }
    if (devices_.size() > 1000000) {
      return absl::InvalidArgumentError("too many devices");
    }
    absl::flat_hash_map<std::string, int> type_ids;
    absl::flat_hash_set<std::string> seen;
    for (const DeviceInfo& d : devices_) {
      absl::StatusOr<DeviceSpec> spec = DeviceSpec::Parse(d.name);
      if (!spec.ok()) return spec.status();
      if (!spec->IsCompleteSpec()) {
        return absl::InvalidArgumentError(
            absl::StrCat("device '", d.name,
                         "' is not a full device name "
                         "(/job:NAME/replica:N/task:N/device:TYPE:N)"));
      }
      if (!d.device_type.empty() && d.device_type != *spec->type) {
        return absl::InvalidArgumentError(absl::StrCat("device '", d.name, "' has device_type '",
                                                       d.device_type, "' but its name says '",
                                                       *spec->type, "'"));
      }
      if (!seen.insert(spec->ToString()).second) {
        return absl::InvalidArgumentError(absl::StrCat("device '", d.name, "' is listed twice"));
      }
      auto [it, inserted] = type_ids.emplace(*spec->type, static_cast<int>(types_.size()));
      if (inserted) types_.push_back(*spec->type);
      device_type_.push_back(it->second);
      specs_.push_back(*std::move(spec));
    }
    if (types_.size() > 64) {
      return absl::InvalidArgumentError("more than 64 device types");
    }
    all_types_ = types_.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << types_.size()) - 1;
    for (const std::string& t : types_) {
      type_priority_.push_back(options_.device_type_priority ? options_.device_type_priority(t)
                                                             : 0);
      uniform_priority_ &= type_priority_.back() == type_priority_.front();
    }
    if (options_.default_device.empty()) {
      default_ = specs_[0];
    } else {
      absl::StatusOr<DeviceSpec> d = DeviceSpec::Parse(options_.default_device);
      if (!d.ok()) {
        return AnnotateStatus(d.status(), "default_device: ");
      }
      default_ = *std::move(d);
    }
    return absl::OkStatus();
  }

  // Joins ref/resource edges and "_class" colocation, then lays the groups
  // out contiguously in members_ (each in node-id order, groups ordered by
  // their first node).
  absl::Status BuildGroups() {
    const int n_ids = graph_->num_node_ids();
    UnionFind uf(n_ids);
    absl::flat_hash_map<std::string, int> missing;  // "loc:@x", no node x
    std::vector<Node*> nodes = graph_->nodes();
    for (Node* n : nodes) {
      for (const Edge* e : n->in_edges()) {
        if (e->IsControlEdge() || e->dst_input >= n->num_inputs()) continue;
        DataType t = n->input_type(e->dst_input);
        if (IsRefType(t) || t == DT_RESOURCE) uf.Union(e->src->id(), n->id());
      }
      auto it = n->def().attr().find("_class");
      if (it == n->def().attr().end()) continue;
      for (const std::string& c : it->second.list().s()) {
        if (!absl::StartsWith(c, "loc:@")) continue;
        absl::string_view other = absl::string_view(c).substr(5);
        if (Node* o = graph_->FindNode(other)) {
          uf.Union(n->id(), o->id());
        } else {
          auto [m, inserted] = missing.emplace(std::string(other), n->id());
          if (!inserted) uf.Union(n->id(), m->second);
        }
      }
    }
    // Counting sort of nodes by group.
    std::vector<int> group_of_root(n_ids, -1);
    std::vector<int> group_of(n_ids, -1);
    std::vector<int> count;
    for (Node* n : nodes) {
      int r = uf.Find(n->id());
      if (group_of_root[r] < 0) {
        group_of_root[r] = static_cast<int>(count.size());
        count.push_back(0);
      }
      group_of[n->id()] = group_of_root[r];
      ++count[group_of_root[r]];
    }
    group_start_.assign(count.size() + 1, 0);
    for (size_t g = 0; g < count.size(); ++g) {
      group_start_[g + 1] = group_start_[g] + count[g];
    }
    std::vector<int> fill(group_start_.begin(), group_start_.end() - 1);
    members_.resize(nodes.size());
    for (Node* n : nodes) members_[fill[group_of[n->id()]]++] = n;
    return absl::OkStatus();
  }

  absl::StatusOr<const DeviceSpec*> Requested(const Node& n) {
    const std::string& r = n.requested_device();
    auto it = parsed_.find(r);
    if (it == parsed_.end()) {
      absl::StatusOr<DeviceSpec> s = DeviceSpec::Parse(r);
      if (!s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(NodeText(n), ": bad requested device: ", s.status().message()));
      }
      it = parsed_.emplace(r, *std::move(s)).first;
    }
    return &it->second;
  }

  // The device types with a kernel for `n`, as a bit mask over types_.
  uint64_t KernelTypes(const Node& n) const {
    if (!options_.supports_device) return all_types_;
    uint64_t mask = 0;
    for (size_t t = 0; t < types_.size(); ++t) {
      if (options_.supports_device(n, types_[t])) mask |= uint64_t{1} << t;
    }
    return mask;
  }

  std::string TypeList(uint64_t mask) const {
    std::vector<std::string> out;
    for (size_t t = 0; t < types_.size(); ++t) {
      if (mask >> t & 1) out.push_back(types_[t]);
    }
    return out.empty() ? "none" : absl::StrJoin(out, ", ");
  }

  // The device that `constraint` specifies, whose type is in `mask`, of the
  // highest type priority and then first in list order; -1 if none.
  int FindDevice(const DeviceSpec& constraint, uint64_t mask) const {
    int best = -1;
    for (size_t i = 0; i < specs_.size(); ++i) {
      if ((mask >> device_type_[i] & 1) && constraint.IsSpecificationOf(specs_[i]) &&
          (best < 0 || type_priority_[device_type_[i]] > type_priority_[device_type_[best]])) {
        best = static_cast<int>(i);
        if (uniform_priority_) break;
      }
    }
    return best;
  }

  // Rule 3: a device satisfying `req` with a type in `mask`, preferring the
  // default device's fields; -1 if none. Memoised: a graph has few distinct
  // (request, kernel types) pairs.
  int Choose(const DeviceSpec& req, uint64_t mask) {
    std::string key = absl::StrCat(req.ToString(), "#", mask);
    auto it = choice_.find(key);
    if (it != choice_.end()) return it->second;
    DeviceSpec tries[4];
    tries[0] = default_;
    tries[1] = default_.TaskPart();
    tries[2].type = default_.type;
    int found = -1;
    for (DeviceSpec& t : tries) {
      t.MergeFrom(req);
      found = FindDevice(t, mask);
      if (found >= 0) break;
    }
    choice_.emplace(std::move(key), found);
    return found;
  }

  std::string AvailableDevices() const {
    constexpr size_t kMaxListed = 16;
    std::vector<std::string> names;
    for (size_t i = 0; i < devices_.size() && i < kMaxListed; ++i) {
      names.push_back(devices_[i].name);
    }
    std::string out = absl::StrJoin(names, ", ");
    if (devices_.size() > kMaxListed) {
      absl::StrAppend(&out, ", … (", devices_.size() - kMaxListed, " more)");
    }
    return out;
  }

  absl::Status PlaceGroup(Node* const* members, int size) {
    DeviceSpec req;
    // The member that set each field of `req`, for messages.
    const Node* src_job = nullptr;
    const Node* src_replica = nullptr;
    const Node* src_task = nullptr;
    const Node* src_type = nullptr;
    const Node* src_id = nullptr;
    const Node* first_requester = nullptr;
    uint64_t mask = all_types_;
    for (int k = 0; k < size; ++k) {
      const Node& m = *members[k];
      if (!m.requested_device().empty()) {
        GR_ASSIGN_OR_RETURN(const DeviceSpec* s, Requested(m));
        if (first_requester == nullptr && !s->empty()) first_requester = &m;
        const Node* conflict = nullptr;
        auto merge = [&](auto& field, const auto& value, const Node*& src) {
          if (!value) return;
          if (!field) {
            field = value;
            src = &m;
          } else if (*field != *value && conflict == nullptr) {
            conflict = src;
          }
        };
        merge(req.job, s->job, src_job);
        merge(req.replica, s->replica, src_replica);
        merge(req.task, s->task, src_task);
        merge(req.type, s->type, src_type);
        merge(req.id, s->id, src_id);
        if (conflict != nullptr && !options_.allow_soft_placement) {
          return absl::InvalidArgumentError(absl::StrCat(
              NodeText(m), " requests device '", m.requested_device(), "' but is colocated with ",
              NodeText(*conflict), " which requests device '", conflict->requested_device(),
              "'; colocated nodes (ref/resource edges or _class loc:@) must "
              "share one device (allow_soft_placement keeps the first "
              "node's request)"));
        }
      }
      uint64_t kernels = KernelTypes(m);
      if ((mask & kernels) == 0) {
        if (k == 0 || kernels == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(NodeText(m), ": no kernel on any available device type (",
                           TypeList(all_types_), ")"));
        }
        return absl::InvalidArgumentError(
            absl::StrCat(NodeText(m), " is colocated with ", NodeText(*members[0]),
                         " but no device type has kernels for all of their colocation "
                         "group (",
                         NodeText(m), " supports ", TypeList(kernels), "; the others support ",
                         TypeList(mask), ")"));
      }
      mask &= kernels;
    }

    int chosen = Choose(req, mask);
    if (chosen < 0 && options_.allow_soft_placement) {
      chosen = Choose(req.TaskPart(), mask);
      if (chosen < 0) chosen = Choose(DeviceSpec(), mask);
      if (chosen >= 0 && options_.log_device_placement) {
        absl::Status why = NoDeviceError(members, size, req, first_requester);
        for (int k = 0; k < size; ++k) soft_reason_[members[k]] = std::string(why.message());
      }
    }
    if (chosen < 0) return NoDeviceError(members, size, req, first_requester);

    const std::string& name = devices_[chosen].name;
    for (int k = 0; k < size; ++k) members[k]->set_assigned_device(name);
    return absl::OkStatus();
  }

  absl::Status NoDeviceError(Node* const* members, int size, const DeviceSpec& req,
                             const Node* requester) {
    int exists = FindDevice(req, all_types_);
    if (exists >= 0) {
      // The device exists: some member has no kernel for its type.
      const std::string& type = types_[device_type_[exists]];
      const Node* culprit = members[0];
      for (int k = 0; k < size; ++k) {
        if (options_.supports_device && !options_.supports_device(*members[k], type)) {
          culprit = members[k];
          break;
        }
      }
      std::string msg =
          absl::StrCat(NodeText(*culprit), ": no kernel for device type ", type,
                       " on requested device '", req.ToString(), "' (", devices_[exists].name, ")");
      if (requester != nullptr && requester != culprit) {
        absl::StrAppend(&msg, ", requested by colocated ", NodeText(*requester));
      }
      absl::StrAppend(&msg, "; kernels exist for: ", TypeList(KernelTypes(*culprit)));
      return absl::InvalidArgumentError(msg);
    }
    const Node& n = requester != nullptr ? *requester : *members[0];
    std::string msg = absl::StrCat(NodeText(n), ": requested device '", n.requested_device(), "'");
    if (req.ToString() != n.requested_device()) {
      absl::StrAppend(&msg, " (with its colocation group: '", req.ToString(), "')");
    }
    absl::StrAppend(&msg, " matches no device; available devices: ", AvailableDevices());
    return absl::InvalidArgumentError(msg);
  }

  Graph* graph_;
  const std::vector<DeviceInfo>& devices_;
  const PlacerOptions& options_;

  std::vector<DeviceSpec> specs_;   // per device
  std::vector<int> device_type_;    // per device: index into types_
  std::vector<std::string> types_;  // distinct types, first-seen order
  uint64_t all_types_ = 0;
  DeviceSpec default_;

  std::vector<Node*> members_;    // nodes grouped by colocation group
  std::vector<int> group_start_;  // group g is [start[g], start[g+1])

  std::vector<int> type_priority_;  // per type in types_
  bool uniform_priority_ = true;
  absl::flat_hash_map<const Node*, std::string> soft_reason_;
  absl::flat_hash_map<std::string, DeviceSpec> parsed_;
  absl::flat_hash_map<std::string, int> choice_;
};

}  // namespace

absl::Status Place(Graph* graph, const std::vector<DeviceInfo>& devices,
                   const PlacerOptions& options) {
  return Placer(graph, devices, options).Run();
}

}  // namespace placement
}  // namespace graphrun
