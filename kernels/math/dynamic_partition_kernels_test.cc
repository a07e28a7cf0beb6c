// DynamicPartition and DynamicStitch: TensorFlow's documented examples,
// row slices of any rank and type, the order rules (partition order kept,
// later stitch writes win), the round trip, the errors naming the node,
// and both shape functions.
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/ops/all_ops.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

template <typename T>
Tensor TS(std::vector<T> v, TensorShape s) {
  return Tensor::FromVector<T>(v, s);
}
Tensor I32(std::vector<int32_t> v, TensorShape s) { return TS<int32_t>(std::move(v), s); }

void ExpectTensor(const Tensor& expected, const Tensor& actual) {
  EXPECT_EQ(TensorDiff(expected, actual), "");
}

template <typename T>
void ExpectError(const absl::StatusOr<T>& r, const std::string& substr) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(substr));
}

absl::StatusOr<std::vector<Tensor>> Partition(const Tensor& data, const Tensor& partitions,
                                              int64_t num_partitions) {
  OpTester t("DynamicPartition", "dp");
  t.Attr("T", data.dtype()).Attr("num_partitions", num_partitions);
  t.Input(data).Input(partitions);
  return t.Run();
}

absl::StatusOr<Tensor> Stitch(const std::vector<Tensor>& indices, const std::vector<Tensor>& data) {
  OpTester t("DynamicStitch", "ds");
  t.Attr("N", static_cast<int64_t>(indices.size())).Attr("T", data[0].dtype());
  for (const Tensor& i : indices) t.Input(i);
  for (const Tensor& d : data) t.Input(d);
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  return out[0];
}

TEST(DynamicPartitionTest, VectorPartitionsKeepOrder) {
  auto out = Partition(I32({10, 20, 30, 40, 50}, {5}), I32({0, 0, 1, 1, 0}, {5}), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  ExpectTensor(I32({10, 20, 50}, {3}), (*out)[0]);
  ExpectTensor(I32({30, 40}, {2}), (*out)[1]);
}

TEST(DynamicPartitionTest, ScalarPartitionTakesTheWholeTensor) {
  auto out = Partition(I32({10, 20}, {2}), Tensor::Scalar<int32_t>(1), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({0, 2}));
  ExpectTensor(I32({10, 20}, {1, 2}), (*out)[1]);
}

TEST(DynamicPartitionTest, MatrixPartitionsMoveRowSlices) {
  // data [2, 2, 2]: the slice data[i, j, :] goes to partitions[i, j].
  Tensor data = TS<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  auto out = Partition(data, I32({2, 0, 2, 2}, {2, 2}), 4);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  ExpectTensor(TS<float>({3, 4}, {1, 2}), (*out)[0]);
  EXPECT_EQ((*out)[1].shape(), TensorShape({0, 2}));
  ExpectTensor(TS<float>({1, 2, 5, 6, 7, 8}, {3, 2}), (*out)[2]);
  EXPECT_EQ((*out)[3].shape(), TensorShape({0, 2}));
}

TEST(DynamicPartitionTest, Strings) {
  auto out = Partition(Tensor::FromVector<std::string>({"a", "bb", "ccc"}), I32({1, 0, 1}, {3}), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[1].NumElements(), 2);
  EXPECT_EQ((*out)[0].flat<std::string>()[0], "bb");
  EXPECT_EQ((*out)[1].flat<std::string>()[0], "a");
  EXPECT_EQ((*out)[1].flat<std::string>()[1], "ccc");
}

TEST(DynamicPartitionTest, ErrorsNameTheNode) {
  auto high = Partition(I32({1, 2, 3}, {3}), I32({0, 2, 1}, {3}), 2);
  ExpectError(high, "node 'dp'");
  ExpectError(high, "partitions[1] = 2 is not in [0, 2)");
  ExpectError(Partition(I32({1, 2, 3, 4}, {2, 2}), I32({0, 0, -1, 0}, {2, 2}), 2),
              "partitions[1,0] = -1 is not in [0, 2)");
  auto shape = Partition(I32({1, 2, 3}, {3}), I32({0, 1}, {2}), 2);
  ExpectError(shape, "node 'dp'");
  ExpectError(shape, "data.shape must start with partitions.shape");
  // num_partitions >= 1 is checked against the op's definition.
  EXPECT_FALSE(Partition(I32({1}, {1}), I32({0}, {1}), 0).ok());
}

// TensorFlow's documented example: scalar, vector and matrix indices.
TEST(DynamicStitchTest, DocumentedExample) {
  auto merged = Stitch({Tensor::Scalar<int32_t>(6), I32({4, 1}, {2}), I32({5, 2, 0, 3}, {2, 2})},
                       {I32({61, 62}, {2}), I32({41, 42, 11, 12}, {2, 2}),
                        I32({51, 52, 21, 22, 1, 2, 31, 32}, {2, 2, 2})});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ExpectTensor(I32({1, 2, 11, 12, 21, 22, 31, 32, 41, 42, 51, 52, 61, 62}, {7, 2}), *merged);
}

TEST(DynamicStitchTest, LaterWritesWinAndGapsAreZero) {
  // Index 0 twice in input 0 (the later one wins), index 1 in both inputs
  // (input 1 wins); rows 3 and 4 are named by nobody.
  auto merged = Stitch({I32({0, 1, 0}, {3}), I32({1, 5}, {2})},
                       {TS<double>({1, 2, 3}, {3}), TS<double>({9, 8}, {2})});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ExpectTensor(TS<double>({3, 9, 0, 0, 0, 8}, {6}), *merged);
}

TEST(DynamicStitchTest, EmptyIndicesGiveNoRows) {
  auto merged =
      Stitch({I32({}, {0}), I32({}, {0})}, {TS<float>({}, {0, 3}), TS<float>({}, {0, 3})});
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->shape(), TensorShape({0, 3}));
}

// Stitching a partition of data by the partition of its positions gives
// data back: how embedding_lookup routes ids through the parts.
TEST(DynamicStitchTest, UndoesDynamicPartition) {
  std::vector<float> values;
  for (int i = 0; i < 24; ++i) values.push_back(0.5f * static_cast<float>(i) - 3.0f);
  Tensor data = TS<float>(values, {8, 3});
  Tensor partitions = I32({2, 0, 1, 2, 2, 0, 1, 1}, {8});
  auto parts = Partition(data, partitions, 3);
  auto positions = Partition(I32({0, 1, 2, 3, 4, 5, 6, 7}, {8}), partitions, 3);
  ASSERT_TRUE(parts.ok() && positions.ok());
  auto merged = Stitch(*positions, *parts);
  ASSERT_TRUE(merged.ok()) << merged.status();
  ExpectTensor(data, *merged);
}

TEST(DynamicStitchTest, ErrorsNameTheNode) {
  auto negative =
      Stitch({I32({0, 1}, {2}), I32({-3}, {1})}, {TS<float>({1, 2}, {2}), TS<float>({3}, {1})});
  ExpectError(negative, "node 'ds'");
  ExpectError(negative, "indices[1][0] = -3 is negative");
  // data[1] does not start with indices[1]'s shape.
  auto prefix = Stitch({I32({0}, {1}), I32({1, 2}, {2})},
                       {TS<float>({1, 2}, {1, 2}), TS<float>({3, 4, 5}, {3, 1})});
  ExpectError(prefix, "node 'ds'");
  ExpectError(prefix, "data[1].shape = [3,1]");
  // Rows of different widths.
  auto rows = Stitch({I32({0}, {1}), I32({1}, {1})},
                     {TS<float>({1, 2}, {1, 2}), TS<float>({3, 4, 5}, {1, 3})});
  ExpectError(rows, "need data[1].shape = indices[1].shape + data[0].shape[1:]");
  auto first = Stitch({I32({0, 1}, {2})}, {TS<float>({1, 2, 3}, {3})});
  ExpectError(first, "data[0].shape = [3] does not start with indices[0].shape = [2]");
}

// ---------------------------------------------------------------------------
// Shape functions.

absl::StatusOr<std::vector<PartialShape>> InferShapes(
    const std::string& op, const std::map<std::string, tensorflow::AttrValue>& attrs,
    std::vector<PartialShape> inputs, int num_outputs, std::vector<const Tensor*> values = {}) {
  const OpRegistrationData* reg = DefaultOpRegistry().LookUp(op);
  if (reg == nullptr) return absl::NotFoundError(op);
  tensorflow::NodeDef def;
  def.set_name("shape_node");
  def.set_op(op);
  for (const auto& [k, v] : attrs) (*def.mutable_attr())[k] = v;
  values.resize(inputs.size(), nullptr);
  ShapeContext c(def, reg->op_def, std::move(inputs), values, num_outputs);
  GR_RETURN_IF_ERROR(reg->shape_fn(c));
  return c.TakeOutputs();
}

TEST(DynamicPartitionShapeTest, RowsUnknownRestFromData) {
  const std::map<std::string, tensorflow::AttrValue> attrs = {
      {"num_partitions", MakeAttr(int64_t{3})}, {"T", MakeAttr(DT_FLOAT)}};
  auto s =
      InferShapes("DynamicPartition", attrs, {PartialShape({-1, 3, 4}), PartialShape({5, -1})}, 3);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 3u);
  for (const PartialShape& o : *s) EXPECT_EQ(o, PartialShape({-1, 4}));
  auto unknown = InferShapes("DynamicPartition", attrs, {PartialShape({4, 2}), PartialShape()}, 3);
  ASSERT_TRUE(unknown.ok());
  EXPECT_FALSE((*unknown)[0].known_rank());
  auto bad = InferShapes("DynamicPartition", attrs, {PartialShape({4, 2}), PartialShape({5})}, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("node 'shape_node'"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("does not start with"));
}

TEST(DynamicStitchShapeTest, ConstantIndicesGiveTheRowCount) {
  const std::map<std::string, tensorflow::AttrValue> attrs = {{"N", MakeAttr(int64_t{2})},
                                                              {"T", MakeAttr(DT_FLOAT)}};
  Tensor i0 = I32({0, 4}, {2});
  Tensor i1 = I32({2}, {1});
  auto known = InferShapes(
      "DynamicStitch", attrs,
      {PartialShape({2}), PartialShape({1}), PartialShape({2, -1}), PartialShape({1, 7})}, 1,
      {&i0, &i1});
  ASSERT_TRUE(known.ok()) << known.status();
  EXPECT_EQ((*known)[0], PartialShape({5, 7}));
  auto dynamic = InferShapes(
      "DynamicStitch", attrs,
      {PartialShape({-1}), PartialShape({-1}), PartialShape({-1, 7}), PartialShape({-1, 7})}, 1);
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  EXPECT_EQ((*dynamic)[0], PartialShape({-1, 7}));
  auto bad = InferShapes(
      "DynamicStitch", attrs,
      {PartialShape({-1}), PartialShape({-1}), PartialShape({-1, 7}), PartialShape({-1, 6})}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("node 'shape_node'"));
}

TEST(UniqueTest, FirstAppearanceOrderAndPositions) {
  OpTester t("Unique", "u");
  t.Attr("T", DT_INT64).Attr("out_idx", DT_INT32);
  t.Input(Tensor::FromVector<int64_t>({7, 3, 7, 7, -2, 3}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensor(Tensor::FromVector<int64_t>({7, 3, -2}), (*out)[0]);
  ExpectTensor(Tensor::FromVector<int32_t>({0, 1, 0, 0, 2, 1}), (*out)[1]);

  OpTester wide("Unique", "u64");
  wide.Attr("T", DT_INT32).Attr("out_idx", DT_INT64);
  wide.Input(Tensor::FromVector<int32_t>({}));
  auto empty = wide.Run();
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].NumElements(), 0);
  EXPECT_EQ((*empty)[1].dtype(), DT_INT64);

  OpTester matrix("Unique", "um");
  matrix.Attr("T", DT_INT32).Input(I32({1, 2, 3, 4}, TensorShape({2, 2})));
  ExpectError(matrix.Run(), "node 'um'");
}

}  // namespace
}  // namespace graphrun
