// Checkpoint ops, as TensorFlow's Saver graphs use them: SaveV2/RestoreV2
// (one shard each), MergeV2Checkpoints (builds the single index of a sharded
// save), and the string ops that name shards (ShardedFilename,
// ShardedFilespec, StringJoin), and the first format's ops that a V1 Saver
// builds (Save, SaveSlices, Restore, RestoreSlice). Names, args, attrs and
// defaults are TensorFlow's, and so are the formats
// (docs/checkpoint_format.md).
#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"
#include "graph/status.h"

namespace graphrun {
namespace {

// Inputs 1 and 2 (tensor_names, shape_and_slices) are vectors of one
// length; `n` (when >= 0) is that length.
absl::Status NamesAndSlices(ShapeContext& c, int64_t n) {
  for (int i : {1, 2}) {
    GR_ASSIGN_OR_RETURN(PartialShape s, c.WithRank(i, 1));
    if (n >= 0 && s.dim(0) >= 0 && s.dim(0) != n) {
      return c.Error(absl::StrCat("input ", i, " has ", s.dim(0), " elements, expected ", n));
    }
  }
  return absl::OkStatus();
}

absl::Status SaveV2Shape(ShapeContext& c) {
  GR_RETURN_IF_ERROR(c.WithRank(0, 0).status());
  return NamesAndSlices(c, c.num_inputs() - 3);
}

absl::Status RestoreV2Shape(ShapeContext& c) {
  GR_RETURN_IF_ERROR(c.WithRank(0, 0).status());
  GR_RETURN_IF_ERROR(NamesAndSlices(c, c.num_outputs()));
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, PartialShape::Unknown());
  return absl::OkStatus();
}

// Save(filename, tensor_names[N], data...) and SaveSlices(filename,
// tensor_names[N], shapes_and_slices[N], data...).
absl::Status SaveV1Shape(ShapeContext& c, int first_data) {
  GR_RETURN_IF_ERROR(c.WithRank(0, 0).status());
  const int64_t n = c.num_inputs() - first_data;
  for (int i = 1; i < first_data; ++i) {
    GR_ASSIGN_OR_RETURN(PartialShape s, c.WithRank(i, 1));
    if (s.dim(0) >= 0 && s.dim(0) != n) {
      return c.Error(absl::StrCat("input ", i, " has ", s.dim(0), " elements for ", n, " tensors"));
    }
  }
  return absl::OkStatus();
}

// Restore and RestoreSlice: scalar string inputs, a tensor of unknown shape.
absl::Status RestoreV1Shape(ShapeContext& c) {
  for (int i = 0; i < c.num_inputs(); ++i) GR_RETURN_IF_ERROR(c.WithRank(i, 0).status());
  c.set_output(0, PartialShape::Unknown());
  return absl::OkStatus();
}

// Broadcast of scalars against inputs of one shape.
absl::Status StringJoinShape(ShapeContext& c) {
  PartialShape out({});
  for (int i = 0; i < c.num_inputs(); ++i) {
    const PartialShape& s = c.input(i);
    if (s.known_rank() && s.rank() == 0) continue;
    if (out.known_rank() && out.rank() == 0) {
      out = s;
      continue;
    }
    auto m = out.Merge(s);
    if (!m.ok()) {
      return c.Error(absl::StrCat("inputs must be scalars or of one shape: ", out.DebugString(),
                                  " vs ", s.DebugString()));
    }
    out = *m;
  }
  c.set_output(0, out);
  return absl::OkStatus();
}

}  // namespace

void RegisterIoOps(OpRegistry& r) {
  r.Add(OpDefBuilder("SaveV2")
            .Input("prefix: string")
            .Input("tensor_names: string")
            .Input("shape_and_slices: string")
            .Input("tensors: dtypes")
            .Attr("dtypes: list(type)")
            .SetIsStateful()
            .SetShapeFn(SaveV2Shape)
            .Doc("Saves tensors (or slices of them, per shape_and_slices) as a "
                 "one-shard checkpoint at `prefix`."));
  r.Add(OpDefBuilder("RestoreV2")
            .Input("prefix: string")
            .Input("tensor_names: string")
            .Input("shape_and_slices: string")
            .Output("tensors: dtypes")
            .Attr("dtypes: list(type) >= 1")
            .SetIsStateful()
            .SetShapeFn(RestoreV2Shape)
            .Doc("Restores tensors (or slices) from the checkpoint at `prefix`, "
                 "assembling them from however they were sliced and sharded."));
  r.Add(OpDefBuilder("MergeV2Checkpoints")
            .Input("checkpoint_prefixes: string")
            .Input("destination_prefix: string")
            .Attr("delete_old_dirs: bool = true")
            .Attr("allow_missing_files: bool = false")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Merges one-shard checkpoints into a sharded one with one index."));
  r.Add(OpDefBuilder("Save")
            .Input("filename: string")
            .Input("tensor_names: string")
            .Input("data: T")
            .Attr("T: list(type)")
            .SetIsStateful()
            .SetShapeFn([](ShapeContext& c) { return SaveV1Shape(c, 2); })
            .Doc("Saves whole tensors as the TensorFlow V1 checkpoint file `filename`."));
  r.Add(OpDefBuilder("SaveSlices")
            .Input("filename: string")
            .Input("tensor_names: string")
            .Input("shapes_and_slices: string")
            .Input("data: T")
            .Attr("T: list(type)")
            .SetIsStateful()
            .SetShapeFn([](ShapeContext& c) { return SaveV1Shape(c, 3); })
            .Doc("Saves tensors or slices (\"4 10 0,2:-\"; \"\" is the whole tensor) as the "
                 "TensorFlow V1 checkpoint file `filename`."));
  r.Add(OpDefBuilder("Restore")
            .Input("file_pattern: string")
            .Input("tensor_name: string")
            .Output("tensor: dt")
            .Attr("dt: type")
            .Attr("preferred_shard: int = -1")
            .SetIsStateful()
            .SetShapeFn(RestoreV1Shape)
            .Doc("Restores a tensor from the V1 checkpoint files `file_pattern` matches."));
  r.Add(OpDefBuilder("RestoreSlice")
            .Input("file_pattern: string")
            .Input("tensor_name: string")
            .Input("shape_and_slice: string")
            .Output("tensor: dt")
            .Attr("dt: type")
            .Attr("preferred_shard: int = -1")
            .SetIsStateful()
            .SetShapeFn(RestoreV1Shape)
            .Doc("Restores a slice of a tensor from the V1 checkpoint files `file_pattern` "
                 "matches."));
  r.Add(OpDefBuilder("ShardedFilename")
            .Input("basename: string")
            .Input("shard: int32")
            .Input("num_shards: int32")
            .Output("filename: string")
            .SetShapeFn(shape_fns::Scalar)
            .Doc("\"basename-00001-of-00002\"."));
  r.Add(OpDefBuilder("ShardedFilespec")
            .Input("basename: string")
            .Input("num_shards: int32")
            .Output("filename: string")
            .SetShapeFn(shape_fns::Scalar)
            .Doc("\"basename-?????"
                 "-of-00002\"."));
  r.Add(OpDefBuilder("StringJoin")
            .Input("inputs: N * string")
            .Output("output: string")
            .Attr("N: int >= 0")
            .Attr("separator: string = ''")
            .SetShapeFn(StringJoinShape)
            .Doc("Joins strings element-wise; scalars broadcast."));
  // TensorFlow 2's savers test the checkpoint prefix with a static regex
  // ("^s3://.*") to pick the temporary shards' suffix.
  r.Add(OpDefBuilder("StaticRegexFullMatch")
            .Input("input: string")
            .Output("output: bool")
            .Attr("pattern: string")
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("Whether each string matches `pattern` (RE2 syntax) as a whole."));
  r.Add(OpDefBuilder("RegexFullMatch")
            .Input("input: string")
            .Input("pattern: string")
            .Output("output: bool")
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("Whether each string matches the scalar `pattern` (RE2 syntax) as a whole."));
}

}  // namespace graphrun
