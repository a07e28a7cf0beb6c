// Tensors as JSON, the CLI's data format for feeds and fetches.
//
// Output form (one object, values flattened in row-major order):
//   {"dtype": "DT_FLOAT", "shape": [2, 2], "values": [1, 2.5, "NaN", -3]}
// Floats print as the shortest decimal that reads back exactly; NaN and
// infinities (not JSON numbers) as the strings "NaN", "Infinity",
// "-Infinity"; 64-bit integers exactly; bools as true/false; strings
// JSON-escaped; half/bfloat16 as their float value.
//
// Input form (a feed): a scalar or nested arrays, e.g. `[[1, 2], [3, 4]]`,
// `3.5`, `true`, `"s"`, converted to the dtype the graph expects. Floats
// also accept the strings "NaN", "Infinity", "-Infinity"; integer dtypes
// accept integral numbers in range only; bools accept true/false and 0/1.
#ifndef GRAPHRUN_TOOLS_TENSOR_JSON_H_
#define GRAPHRUN_TOOLS_TENSOR_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/tensor.h"
#include "graph/types.h"
#include "util/json.h"

namespace graphrun {
namespace tools {

// The output object above. DT_RESOURCE values print as their debug strings.
// REQUIRES: t.IsInitialized().
std::string TensorToJson(const Tensor& t);

// Just the "values" array, e.g. `[1, 2, "NaN"]`.
std::string TensorValuesToJson(const Tensor& t);

// Builds a tensor of `dtype` from a scalar or nested arrays. InvalidArgument
// for ragged arrays, empty nested arrays of unknown inner shape, values that
// do not fit the dtype, or dtypes that cannot be fed from JSON (resource,
// variant).
absl::StatusOr<Tensor> TensorFromJson(const JsonValue& value, DataType dtype);

// ParseJson + TensorFromJson.
absl::StatusOr<Tensor> TensorFromJsonText(absl::string_view text, DataType dtype);

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_TENSOR_JSON_H_
