#include "client/loop/saver.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/ops.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_util.h"

namespace graphrun {
namespace client {

namespace {

// How one variable is checkpointed: under `name`, with `save_spec` as
// SaveV2's shape_and_slices entry and `restore_spec` as RestoreV2's.
struct SaveEntry {
  const Variable* var = nullptr;
  std::string name;
  std::string save_spec;
  std::string restore_spec;
  const SaveSliceInfo* slice = nullptr;  // null: saved whole
};

// The variable's own slice info, else the one it inherits as a slot of a
// part "<full>/part_k": a variable "<part>/<rest>" of the part's shape
// (Adam's "w/part_0/Adam") is slice "<full>/<rest>" with the same box
// (TensorFlow's slot_creator names it "w/Adam/part_0" with full name
// "w/Adam"). Returns the name to save under.
std::string SaveName(const Variable& v, const std::vector<const Variable*>& parts,
                     const SaveSliceInfo** slice) {
  *slice = v.save_slice_info();
  if (*slice != nullptr) return (*slice)->full_name;
  const Variable* owner = nullptr;
  for (const Variable* p : parts) {
    if (v.name().size() > p->name().size() + 1 && absl::StartsWith(v.name(), p->name()) &&
        v.name()[p->name().size()] == '/' && v.shape() == p->shape() &&
        (owner == nullptr || p->name().size() > owner->name().size())) {
      owner = p;
    }
  }
  if (owner == nullptr) return v.name();
  *slice = owner->save_slice_info();
  return absl::StrCat((*slice)->full_name, v.name().substr(owner->name().size()));
}

checkpoint::TensorSlice Box(const SaveSliceInfo& info) {
  checkpoint::TensorSlice box;
  for (size_t d = 0; d < info.var_offset.size(); ++d) {
    box.AddDim(info.var_offset[d], info.var_shape[d]);
  }
  return box;
}

// The entries of `vars`. InvalidArgument naming the variables when two
// save the same name inconsistently: one whole, different full shapes or
// dtypes, or overlapping slices.
absl::StatusOr<std::vector<SaveEntry>> SaveEntries(const std::vector<Variable>& vars) {
  std::vector<const Variable*> parts;
  for (const Variable& v : vars) {
    if (v.save_slice_info() != nullptr) parts.push_back(&v);
  }
  std::vector<SaveEntry> entries;
  std::map<std::string, std::vector<size_t>> by_name;
  for (const Variable& v : vars) {
    SaveEntry e;
    e.var = &v;
    e.name = SaveName(v, parts, &e.slice);
    if (e.slice != nullptr) {
      e.save_spec = e.restore_spec = e.slice->Spec();
    } else if (v.shape().fully_defined() && v.shape().rank() > 0) {
      // The full shape with every dimension whole: the reader then checks
      // the saved shape (InvalidArgument naming the tensor).
      e.restore_spec =
          absl::StrCat(absl::StrJoin(v.shape().dims(), " "), " ",
                       absl::StrJoin(std::vector<std::string>(v.shape().rank(), "-"), ":"));
    }
    for (size_t j : by_name[e.name]) {
      const SaveEntry& o = entries[j];
      std::string problem;
      if (e.slice == nullptr || o.slice == nullptr) {
        problem = "one of them is not a slice";
      } else if (e.slice->full_shape != o.slice->full_shape) {
        problem = absl::StrCat("full shapes ", e.slice->full_shape.DebugString(), " and ",
                               o.slice->full_shape.DebugString(), " differ");
      } else if (e.var->dtype() != o.var->dtype()) {
        problem = "dtypes differ";
      } else if (Box(*e.slice).Overlaps(Box(*o.slice))) {
        problem = absl::StrCat("slices ", e.slice->Spec(), " and ", o.slice->Spec(), " overlap");
      }
      if (!problem.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("Saver: variables '", o.var->name(),
                                                       "' and '", v.name(), "' both save '", e.name,
                                                       "': ", problem));
      }
    }
    by_name[e.name].push_back(entries.size());
    entries.push_back(std::move(e));
  }
  return entries;
}

Tensor StringVector(const std::vector<std::string>& v) {
  Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) t.base<std::string>()[i] = v[i];
  return t;
}

}  // namespace

absl::StatusOr<Saver> Saver::Create(const Scope& root, const std::vector<Variable>& vars,
                                    const SaverOptions& options) {
  if (vars.empty()) return absl::InvalidArgumentError("Saver: no variables to save");
  GR_RETURN_IF_ERROR(root.status());
  std::set<std::string> names;
  for (const Variable& v : vars) {
    if (v.handle().node() == nullptr) {
      return absl::InvalidArgumentError("Saver: a variable failed to build");
    }
    if (!names.insert(v.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("Saver: variable '", v.name(), "' listed twice"));
    }
  }
  GR_ASSIGN_OR_RETURN(std::vector<SaveEntry> entries, SaveEntries(vars));
  // Group by the device the variable's handle asked for: one shard each.
  std::map<std::string, std::vector<const SaveEntry*>> groups;
  for (const SaveEntry& e : entries) groups[e.var->op().node()->requested_device()].push_back(&e);
  Scope s = root.NewSubScope("save");
  Saver saver;
  saver.options_ = options;
  saver.num_shards_ = static_cast<int>(groups.size());
  saver.filename_ = ops::Placeholder(s.WithOpName("filename"), DT_STRING,
                                     ops::Placeholder::Shape(PartialShape({})));
  Output num_shards =
      ops::Const(s.WithOpName("num_shards"), Tensor::Scalar<int32_t>(saver.num_shards_));
  Output tmp_base =
      ops::StringJoin(s.WithOpName("tmp_base"), {saver.filename_, std::string("_temp/part")});
  std::vector<Output> shard_prefixes;
  std::vector<Operation> shard_saves, restores;
  int k = 0;
  for (const auto& [device, members] : groups) {
    Scope ds = s.WithDevice(device);
    std::vector<std::string> tnames, save_specs, restore_specs;
    std::vector<Input> tensors;
    std::vector<DataType> dtypes;
    for (const SaveEntry* e : members) {
      tnames.push_back(e->name);
      save_specs.push_back(e->save_spec);
      restore_specs.push_back(e->restore_spec);
      tensors.push_back(e->var->Read(ds.ColocateWith(e->var->op())));
      dtypes.push_back(e->var->dtype());
    }
    Output names_c =
        ops::Const(ds.WithOpName(absl::StrCat("tensor_names_", k)), StringVector(tnames));
    Output slices_c =
        ops::Const(ds.WithOpName(absl::StrCat("shape_and_slices_", k)), StringVector(save_specs));
    Output restore_slices_c = ops::Const(
        ds.WithOpName(absl::StrCat("restore_shape_and_slices_", k)), StringVector(restore_specs));
    Output prefix = ops::ShardedFilename(ds.WithOpName(absl::StrCat("sharded_filename_", k)),
                                         tmp_base, Tensor::Scalar<int32_t>(k), num_shards);
    auto save = ops::SaveV2(ds.WithOpName(absl::StrCat("SaveV2_", k)), prefix, names_c, slices_c,
                            InputList(tensors));
    shard_prefixes.push_back(prefix);
    shard_saves.push_back(save.operation);

    auto restore = ops::RestoreV2(ds.WithOpName(absl::StrCat("RestoreV2_", k)), saver.filename_,
                                  names_c, restore_slices_c, dtypes);
    std::vector<Operation> shard_restores;
    for (size_t i = 0; i < members.size(); ++i) {
      const Variable* v = members[i]->var;
      shard_restores.push_back(v->Assign(ds.ColocateWith(v->op()), restore.tensors[i]));
      saver.shard_of_[v->name()] = k;
    }
    restores.insert(restores.end(), shard_restores.begin(), shard_restores.end());
    saver.shard_devices_.push_back(device);
    saver.shard_restores_.push_back(ops::NoOp(ds.WithOpName(absl::StrCat("restore_shard_", k))
                                                  .WithControlDependencies(shard_restores))
                                        .operation);
    ++k;
  }
  Scope merge_scope = s.WithDevice(groups.begin()->first).WithControlDependencies(shard_saves);
  Output prefixes =
      ops::Pack(merge_scope.WithOpName("prefixes"),
                InputList(std::vector<Input>(shard_prefixes.begin(), shard_prefixes.end())));
  saver.save_op_ =
      ops::MergeV2Checkpoints(merge_scope.WithOpName("merge"), prefixes, saver.filename_).operation;
  saver.restore_op_ =
      ops::NoOp(s.WithOpName("restore_all").WithControlDependencies(restores)).operation;
  GR_RETURN_IF_ERROR(root.status());
  return saver;
}

absl::StatusOr<std::string> Saver::Save(const ClientSession& session, const std::string& dir,
                                        int64_t global_step) const {
  std::string prefix = absl::StrCat(dir, "/", options_.basename, "-", global_step);
  GR_RETURN_IF_ERROR(session.Run({{filename_, prefix}}, {}, {save_op_}).status());
  GR_RETURN_IF_ERROR(checkpoint::UpdateCheckpointState(dir, prefix, options_.max_to_keep));
  return prefix;
}

absl::Status Saver::Restore(const ClientSession& session, const std::string& prefix) const {
  return session.Run({{filename_, prefix}}, {}, {restore_op_}).status();
}

absl::StatusOr<std::vector<std::string>> Saver::RestoreShardsOf(
    const ClientSession& session, const std::string& prefix,
    const std::vector<std::string>& variables) const {
  std::set<int> shards;
  for (const std::string& name : variables) {
    auto it = shard_of_.find(name);
    if (it == shard_of_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Saver: no variable '", name, "' among the saved variables"));
    }
    shards.insert(it->second);
  }
  std::vector<Operation> targets;
  std::vector<std::string> devices;
  for (int k : shards) {
    targets.push_back(shard_restores_[k]);
    devices.push_back(shard_devices_[k]);
  }
  if (targets.empty()) return devices;
  GR_RETURN_IF_ERROR(session.Run({{filename_, prefix}}, {}, targets).status());
  std::sort(devices.begin(), devices.end());
  return devices;
}

absl::Status Saver::MarkFinal(const std::string& dir, const std::string& prefix) {
  return checkpoint::MarkFinalCheckpoint(dir, prefix);
}

bool Saver::IsFinal(const std::string& dir) {
  auto state = checkpoint::ReadCheckpointState(dir);
  return state.ok() && state->final;
}

absl::StatusOr<std::string> Saver::LatestCheckpoint(const std::string& dir) {
  return checkpoint::LatestCheckpoint(dir);
}

int64_t Saver::StepOfPrefix(const std::string& prefix) {
  size_t dash = prefix.rfind('-');
  int64_t step;
  if (dash == std::string::npos || !absl::SimpleAtoi(prefix.substr(dash + 1), &step)) return -1;
  return step;
}

tensorflow::SaverDef Saver::ToSaverDef() const {
  tensorflow::SaverDef d;
  d.set_filename_tensor_name(filename_.name());
  d.set_restore_op_name(restore_op_.name());
  d.set_max_to_keep(options_.max_to_keep);
  d.set_sharded(true);
  d.set_version(tensorflow::SaverDef::V2);
  return d;
}

}  // namespace client
}  // namespace graphrun
