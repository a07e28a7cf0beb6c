// Partitioned variables: TensorFlow's tf.get_variable(..., partitioner=...)
// and PartitionedVariable, for resource variables split along axis 0.
//
// A PartitionedVariable "w" of shape [N, ...] in K parts is K resource
// Variables "w/part_0" .. "w/part_{K-1}" of shapes [n_k, ...] with
// TensorFlow's sizes (placement::ShardSizes: the first N % K parts get one
// row more). Each part is its own VarHandleOp, so the scope's device
// functions place each part on its own (ReplicaDeviceSetter spreads them
// over the PS tasks in creation order). Each part carries SaveSliceInfo
// {full name "w", full shape, rows [offset, offset + n_k)}, so the Saver
// writes it as a slice of "w": the checkpoint restores into any number of
// parts, or into a plain Variable "w", and vice versa.
//
// Reading:
//  * Read() is ConcatV2 (axis 0) of the parts' reads, each read colocated
//    with its part and the concat built where the reader's scope puts it.
//    Its gradient (ConcatV2's SplitV) gives every part its own rows, so an
//    optimizer updates each part next to it and keeps slots per part.
//  * Gather(ids) is embedding_lookup with partition_strategy "div", as
//    TensorFlow builds it but for any part sizes: an id's part is the
//    number of parts starting at or before it; DynamicPartition splits the
//    ids (made local to their part) and their positions by part; part k
//    gathers its own ids next to itself; DynamicStitch puts the rows back
//    in the ids' order, on the reader's side. The table never travels and
//    each id's row crosses the network once, from its own part; part k's
//    sparse gradient lists only the rows its ids named. An id outside
//    [0, N) fails the step with InvalidArgument naming the gather of part
//    0 (negative ids) or of the last part (ids >= N); the index that
//    message reports is the id minus that part's offset.
//
// Initial value: the initializer builds the FULL tensor once, under
// "w/Initializer" where the scope's devices put it (not colocated with any
// part), and SplitV hands part k its rows ("w/part_k/Assign"). The parts
// therefore hold exactly what an unpartitioned Variable "w" with the same
// initializer and seeds would hold. (TensorFlow calls the initializer per
// part instead, which differs for random and fan-dependent initializers.)
// The price: the full initial value exists once, at initialization, on one
// device.
//
// Errors (a shape that is not fully defined or of rank 0, num_parts < 1)
// are recorded on the scope, naming the variable; parts() is then empty
// and every Output null. Same thread-safety as Scope.
#ifndef GRAPHRUN_CLIENT_PARTITIONED_VARIABLE_H_
#define GRAPHRUN_CLIENT_PARTITIONED_VARIABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "client/initializers.h"
#include "client/operation.h"
#include "client/scope.h"
#include "client/variables.h"

namespace graphrun {
namespace client {

class PartitionedVariable {
 public:
  // `num_parts` parts (at most shape.dim(0)) named "<name>/part_k", where
  // <name> is the unique op name `scope` gives ("PartitionedVariable" by
  // default). Without an initializer every part must be assigned before it
  // is read. REQUIRES: `shape` fully defined with rank >= 1.
  PartitionedVariable(const Scope& scope, const PartialShape& shape, DataType dtype, int num_parts);
  PartitionedVariable(const Scope& scope, const PartialShape& shape, DataType dtype, int num_parts,
                      const Initializer& initializer);
  // Parts of the given row counts (each >= 1, summing to shape.dim(0);
  // else InvalidArgument on the scope), e.g. a placement plan's shards.
  PartitionedVariable(const Scope& scope, const PartialShape& shape, DataType dtype,
                      std::vector<int64_t> part_sizes, const Initializer& initializer);

  // The full variable's name ("w"), shape and dtype.
  const std::string& name() const { return name_; }
  const PartialShape& shape() const { return shape_; }
  DataType dtype() const { return dtype_; }
  int num_parts() const { return static_cast<int>(parts_.size()); }
  // The parts in order; what optimizers and the Saver take.
  const std::vector<Variable>& parts() const { return parts_; }
  // Part k's first row in the full variable. REQUIRES: 0 <= k < num_parts().
  int64_t part_offset(int k) const { return offsets_[k]; }

  // The full value: ConcatV2 of the parts' reads, built under
  // "<name>/Read" or, with `scope`, in it.
  Output Read() const;
  Output Read(const Scope& scope) const;
  // Rows `ids` (int32 or int64, any shape) of the full value: shape
  // ids.shape + shape[1:]. See the header comment for the ops built.
  Output Gather(const Scope& scope, const Output& ids) const;
  // Assigns a full value (an Output or literal of shape()): SplitV, one
  // AssignVariableOp per part colocated with it, grouped by a NoOp.
  Operation Assign(const Scope& scope, const Input& value) const;

 private:
  // `sizes` empty: TensorFlow's even sizes for `num_parts`.
  void Build(const Scope& scope, int num_parts, std::vector<int64_t> sizes,
             const Initializer* initializer);

  Scope scope_;  // "<name>" name scope, no control dependencies
  std::string name_;
  PartialShape shape_;
  DataType dtype_;
  std::vector<Variable> parts_;
  std::vector<int64_t> offsets_;
};

}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_PARTITIONED_VARIABLE_H_
