// The Placer: assigns every node of a Graph to one device.
//
// Devices arrive as a plain list (name + type), so placement needs no
// runtime. The rules are TensorFlow's placer's, simplified:
//
// 1. Colocation groups. Nodes are joined (union-find, so placement is linear
//    in the graph) when
//    a. a data edge feeds an input of ref type or of type DT_RESOURCE: the
//       consumer must run where the variable / resource lives (Assign on a
//       VariableV2, ReadVariableOp on a VarHandleOp, RefEnter, …). As in
//       TensorFlow the *consumer's input type* decides: a MatMul reading a
//       VariableV2's float_ref output through a plain `T` input is not
//       colocated; Partition sends the dereferenced value instead.
//    b. a "_class" attr lists "loc:@other": the node joins `other`'s group.
//       Nodes naming the same missing node are still grouped together;
//       entries not starting with "loc:@" are ignored.
//    Every node of a group gets the same device.
// 2. Requested devices. A node's NodeDef.device (full or partial) is a hard
//    constraint: the chosen device must match it. A group's constraint is
//    the field-wise merge of its members' requests. Two members requesting
//    different values of one field is InvalidArgument naming both nodes and
//    both devices — unless allow_soft_placement, where members are taken
//    in node-id order and the first member to set a field wins (later
//    conflicting fields are dropped; compatible ones still narrow).
// 3. Defaults. Unset fields are filled from default_device when a device
//    matches; otherwise, in order, from its job/replica/task only, from its
//    device type only, or not at all. Among the legal devices that remain,
//    the one of the highest device-type priority wins (an accelerator
//    before the CPU, as in TensorFlow), then the first in list order.
// 4. Kernels. supports_device(node, type) must hold for every member of a
//    group on the chosen device's type.
// 5. Soft placement. When no device matches the group's constraint and has
//    kernels for all members: with allow_soft_placement the device type and
//    id of the request are dropped (stay on the requested task, any type
//    with a kernel), then the whole request is dropped (rule 3 alone);
//    log_device_placement says so on the node's line. Without it,
//    InvalidArgument naming the node and the device — listing
//    the available devices when none matches the name, or naming the op
//    and device type when the device exists but has no kernel for it.
//
// _Arg, _Retval, Placeholder and every other op follow the same rules.
// Any assigned device a node had before Place is overwritten.
#ifndef GRAPHRUN_PLACEMENT_PLACER_H_
#define GRAPHRUN_PLACEMENT_PLACER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "graph/graph.h"

namespace graphrun {
namespace placement {

// One device a node may be placed on.
struct DeviceInfo {
  std::string name;         // full name: "/job:ps/replica:0/task:1/device:CPU:0"
  std::string device_type;  // "CPU", "GPU", …; empty = the name's type
};

struct PlacerOptions {
  // Full or partial name filling the unset fields of requests (rule 3);
  // the first device of the list when empty.
  std::string default_device;
  bool allow_soft_placement = false;
  // Prints one "name (op): device" line per node to stderr, in id order;
  // a node placed by soft placement against its request adds
  // " (soft placement: REASON)".
  bool log_device_placement = false;
  // Preference among device types (rule 3), higher first; empty: all
  // equal.
  std::function<int(const std::string& device_type)> device_type_priority;
  // Whether a kernel for `node` exists on `device_type`; the runtime plugs
  // the kernel registry in here. Empty accepts every node on every type.
  std::function<bool(const Node& node, const std::string& device_type)> supports_device;
};

// Sets Node::assigned_device() of every node of `graph` to the `name` of one
// of `devices`, following the rules above.
// Errors (InvalidArgument unless noted):
//  - `devices` empty, a device name that is not complete, a duplicate
//    device, or a device_type that disagrees with the name;
//  - default_device or a requested device that does not parse (naming the
//    node);
//  - conflicting requests inside a colocation group (naming both nodes and
//    both devices) without soft placement;
//  - a group for which no device type has kernels for all members;
//  - a request no device satisfies, without soft placement.
// On error some nodes may already be assigned.
absl::Status Place(Graph* graph, const std::vector<DeviceInfo>& devices,
                   const PlacerOptions& options = {});

}  // namespace placement
}  // namespace graphrun

#endif  // GRAPHRUN_PLACEMENT_PLACER_H_
