// CanonicalizeGraphDef (graph/function_lowering.h): TensorFlow's
// versioning rules, lowering, and the rules for undeclared attrs and legacy
// Placeholder shapes, applied to every GraphDef a user hands in.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "graph/function_lowering.h"
#include "graph/graph.h"
#include "graph/status.h"

namespace graphrun {

using tensorflow::GraphDef;
using tensorflow::NodeDef;

bool HasLegacyUnknownPlaceholderShape(const tensorflow::NodeDef& node,
                                      const tensorflow::VersionDef& versions) {
  if (versions.producer() < 1 || versions.producer() > 21) return false;
  if (node.op() != "Placeholder" && node.op() != "PlaceholderV2") return false;
  auto it = node.attr().find("shape");
  return it != node.attr().end() && it->second.has_shape() && it->second.shape().dim_size() == 0 &&
         !it->second.shape().unknown_rank();
}

absl::StatusOr<GraphDef> CanonicalizeGraphDef(
    const GraphDef& def, const OpRegistry& registry, std::vector<std::string>* warnings,
    const LoweringOptions& lowering_options,
    absl::flat_hash_map<std::string, std::string>* origin_out) {
  const tensorflow::VersionDef& v = def.versions();
  if (v.min_consumer() > kGraphDefConsumerVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GraphDef min consumer version ", v.min_consumer(), " is above graphrun's version ",
        kGraphDefConsumerVersion, " (the graph was written by a newer TensorFlow; producer ",
        v.producer(), ")"));
  }
  for (int bad : v.bad_consumers()) {
    if (bad == kGraphDefConsumerVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat("GraphDef disallows consumer version ", bad, ", graphrun's version"));
    }
  }
  GraphDef out;
  absl::flat_hash_map<std::string, std::string> origin;
  const bool lowering = NeedsLowering(def);
  if (lowering) {
    GR_ASSIGN_OR_RETURN(LoweredGraph lowered, LowerFunctionCalls(def, registry, lowering_options));
    out = std::move(lowered.graph_def);
    origin = std::move(lowered.origin);
  } else {
    out = def;
  }
  for (NodeDef& n : *out.mutable_node()) {
    if (HasLegacyUnknownPlaceholderShape(n, v)) {
      (*n.mutable_attr())["shape"].mutable_shape()->set_unknown_rank(true);
    }
    const OpRegistrationData* reg = registry.LookUp(n.op());
    if (reg == nullptr) continue;
    std::vector<std::string> drop;
    for (const auto& [k, v] : n.attr()) {
      if (!k.empty() && k[0] == '_') continue;
      bool declared = false;
      for (const auto& a : reg->op_def.attr()) declared = declared || a.name() == k;
      if (!declared) drop.push_back(k);
    }
    std::sort(drop.begin(), drop.end());
    for (const std::string& k : drop) {
      n.mutable_attr()->erase(k);
      if (warnings != nullptr) {
        warnings->push_back(absl::StrCat("node '", n.name(), "' (op ", n.op(), "): dropped attr '",
                                         k, "', which the op does not declare"));
      }
    }
  }
  if (lowering) {
    ImportOptions no_shapes;
    no_shapes.infer_shapes = false;
    GR_RETURN_IF_ERROR(
        AnnotateLoweringError(GraphFromGraphDef(out, registry, no_shapes).status(), origin));
  }
  if (origin_out != nullptr) {
    for (auto& [node, where] : origin) origin_out->try_emplace(node, std::move(where));
  }
  return out;
}

absl::Status MergeFunctionLibrary(const tensorflow::FunctionDefLibrary& add,
                                  tensorflow::FunctionDefLibrary* into) {
  absl::flat_hash_map<std::string, const tensorflow::FunctionDef*> functions;
  for (const auto& f : into->function()) functions.emplace(f.signature().name(), &f);
  absl::flat_hash_map<std::string, std::string> gradients;
  for (const auto& g : into->gradient()) gradients.emplace(g.function_name(), g.gradient_func());
  std::vector<const tensorflow::FunctionDef*> new_functions;
  absl::flat_hash_set<std::string> in_add;
  for (const auto& f : add.function()) {
    if (!in_add.insert(f.signature().name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("function '", f.signature().name(), "': defined twice in the library"));
    }
    auto [it, added] = functions.emplace(f.signature().name(), &f);
    if (added) {
      new_functions.push_back(&f);
    } else if (!google::protobuf::util::MessageDifferencer::Equals(*it->second, f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("function '", f.signature().name(), "' is already defined, differently"));
    }
  }
  std::vector<const tensorflow::GradientDef*> new_gradients;
  for (const auto& g : add.gradient()) {
    auto [it, added] = gradients.emplace(g.function_name(), g.gradient_func());
    if (added) {
      new_gradients.push_back(&g);
    } else if (it->second != g.gradient_func()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the gradient of function '", g.function_name(), "' is already '",
                       it->second, "', not '", g.gradient_func(), "'"));
    }
  }
  for (const auto* f : new_functions) *into->add_function() = *f;
  for (const auto* g : new_gradients) *into->add_gradient() = *g;
  return absl::OkStatus();
}

bool CallsLibrary(const tensorflow::GraphDef& nodes,
                  const tensorflow::FunctionDefLibrary& library) {
  if (library.function_size() == 0) return false;
  absl::flat_hash_set<std::string> names;
  for (const auto& f : library.function()) names.insert(f.signature().name());
  for (const NodeDef& n : nodes.node()) {
    if (names.contains(n.op())) return true;
    for (const auto& [k, v] : n.attr()) {
      if (v.has_func() && names.contains(v.func().name())) return true;
      for (const auto& f : v.list().func()) {
        if (names.contains(f.name())) return true;
      }
    }
  }
  return false;
}

absl::StatusOr<GraphDef> CanonicalizeGraphDefForSession(
    const GraphDef& def, const OpRegistry& registry, const LoweringOptions& lowering,
    absl::flat_hash_map<std::string, std::string>* origin) {
  std::vector<std::string> warnings;
  GR_ASSIGN_OR_RETURN(GraphDef out,
                      CanonicalizeGraphDef(def, registry, &warnings, lowering, origin));
  for (const std::string& w : warnings) std::cerr << "graphrun: warning: " << w << "\n";
  return out;
}

}  // namespace graphrun
