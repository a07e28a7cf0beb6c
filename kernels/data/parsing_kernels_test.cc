// ParseExample / ParseExampleV2 on serialized tf.Example protos.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/proto/example.pb.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

std::string Serialize(int64_t age, std::vector<std::string> tags, std::vector<float> score) {
  tensorflow::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  if (age >= 0) f["age"].mutable_int64_list()->add_value(age);
  for (const auto& t : tags) f["tags"].mutable_bytes_list()->add_value(t);
  for (float s : score) f["score"].mutable_float_list()->add_value(s);
  return e.SerializeAsString();
}

tensorflow::AttrValue Shapes(std::vector<std::vector<int64_t>> shapes) {
  tensorflow::AttrValue v;
  for (const auto& s : shapes) {
    auto* p = v.mutable_list()->add_shape();
    for (int64_t d : s) p->add_dim()->set_size(d);
  }
  return v;
}

// V2 with dense "age" (int64 scalar, required) and "score" (float [2],
// default zeros), sparse "tags" (string).
OpTester V2(std::vector<std::string> serialized) {
  OpTester t("ParseExampleV2");
  t.Attr("Tdense", std::vector<DataType>{DT_INT64, DT_FLOAT})
      .Attr("num_sparse", int64_t{1})
      .Attr("sparse_types", std::vector<DataType>{DT_STRING})
      .Attr("ragged_value_types", std::vector<DataType>{})
      .Attr("ragged_split_types", std::vector<DataType>{})
      .Attr("dense_shapes", Shapes({{}, {2}}))
      .Input(Tensor::FromVector<std::string>(serialized))
      .Input(Tensor::FromVector<std::string>({}))
      .Input(Tensor::FromVector<std::string>({"tags"}))
      .Input(Tensor::FromVector<std::string>({"age", "score"}))
      .Input(Tensor::FromVector<std::string>({}))
      .Input(Tensor(DT_INT64, TensorShape({0})))
      .Input(Tensor::FromVector<float>({0, 0}));
  return t;
}

void Expect(const Tensor& want, const Tensor& got) { EXPECT_EQ(TensorDiff(want, got), ""); }

TEST(ParseExampleTest, DenseSparseAndDefaults) {
  OpTester t = V2({Serialize(30, {"a", "b"}, {0.5, 1.5}), Serialize(40, {"c"}, {})});
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 5u);
  Expect(Tensor::FromVector<int64_t>({0, 0, 0, 1, 1, 0}, TensorShape({3, 2})), (*out)[0]);
  Expect(Tensor::FromVector<std::string>({"a", "b", "c"}), (*out)[1]);
  Expect(Tensor::FromVector<int64_t>({2, 2}), (*out)[2]);
  Expect(Tensor::FromVector<int64_t>({30, 40}), (*out)[3]);
  Expect(Tensor::FromVector<float>({0.5, 1.5, 0, 0}, TensorShape({2, 2})), (*out)[4]);
}

TEST(ParseExampleTest, BadExamplesNameTheExampleAndKey) {
  auto error = [](std::vector<std::string> s) {
    OpTester t = V2(std::move(s));
    return t.Run().status();
  };
  absl::Status s = error({Serialize(30, {}, {}), Serialize(-1, {}, {})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("example 1, key 'age': required (data type int64)"));
  s = error({Serialize(30, {}, {1, 2, 3})});
  EXPECT_THAT(s.message(), HasSubstr("example 0, key 'score': 3 values but the shape [2] needs 2"));
  tensorflow::Example e;
  (*e.mutable_features()->mutable_feature())["age"].mutable_float_list()->add_value(1);
  s = error({e.SerializeAsString()});
  EXPECT_THAT(s.message(), HasSubstr("example 0, key 'age': data type float but expected int64"));
  s = error({std::string("\xff\xff\xff", 3)});
  EXPECT_THAT(s.message(), HasSubstr("example 0: could not parse a tf.Example"));
}

// Ragged "tags" (string, int64 splits) and "score" (float, int32 splits)
// besides dense "age": the values of each example in turn, and row splits
// that bound each example's part; an example without the key has an empty
// row. A scalar input: the one example's values, no row splits.
OpTester Ragged(const Tensor& serialized) {
  OpTester t("ParseExampleV2");
  t.Attr("Tdense", std::vector<DataType>{DT_INT64})
      .Attr("num_sparse", int64_t{0})
      .Attr("sparse_types", std::vector<DataType>{})
      .Attr("ragged_value_types", std::vector<DataType>{DT_STRING, DT_FLOAT})
      .Attr("ragged_split_types", std::vector<DataType>{DT_INT64, DT_INT32})
      .Attr("dense_shapes", Shapes({{}}))
      .Input(serialized)
      .Input(Tensor::FromVector<std::string>({}))
      .Input(Tensor::FromVector<std::string>({}))
      .Input(Tensor::FromVector<std::string>({"age"}))
      .Input(Tensor::FromVector<std::string>({"tags", "score"}))
      .Input(Tensor::FromVector<int64_t>({-1}));
  return t;
}

TEST(ParseExampleTest, RaggedFeaturesGiveValuesAndRowSplits) {
  OpTester t = Ragged(Tensor::FromVector<std::string>(
      {Serialize(30, {"a", "b"}, {0.5}), Serialize(40, {}, {}), Serialize(-1, {"c"}, {1, 2, 3})}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 5u);  // dense, 2 ragged values, 2 row splits
  Expect(Tensor::FromVector<int64_t>({30, 40, -1}), (*out)[0]);
  Expect(Tensor::FromVector<std::string>({"a", "b", "c"}), (*out)[1]);
  Expect(Tensor::FromVector<float>({0.5, 1, 2, 3}), (*out)[2]);
  Expect(Tensor::FromVector<int64_t>({0, 2, 2, 3}), (*out)[3]);
  Expect(Tensor::FromVector<int32_t>({0, 1, 1, 4}), (*out)[4]);

  OpTester single = Ragged(Tensor::Scalar<std::string>(Serialize(7, {"x", "y"}, {})));
  out = single.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  Expect(Tensor::Scalar<int64_t>(7), (*out)[0]);
  Expect(Tensor::FromVector<std::string>({"x", "y"}), (*out)[1]);
  EXPECT_EQ((*out)[2].shape(), TensorShape({0}));
  EXPECT_EQ((*out)[3].shape(), TensorShape({0}));
  EXPECT_EQ((*out)[4].dtype(), DT_INT32);

  tensorflow::Example e;
  (*e.mutable_features()->mutable_feature())["score"].mutable_int64_list()->add_value(1);
  OpTester bad =
      Ragged(Tensor::FromVector<std::string>({Serialize(1, {}, {}), e.SerializeAsString()}));
  EXPECT_THAT(bad.Run().status().message(),
              HasSubstr("example 1, key 'score': data type int64 but expected float"));
}

// A variable-length dense key (tf.io.FixedLenSequenceFeature, shape
// [-1, 2]): each example's values as rows of 2, padded to the longest with
// the default (-1), or zeros without one; a count that is not whole rows
// names the example and the key.
TEST(ParseExampleTest, VariableLengthDenseFeaturesArePadded) {
  auto parse = [](std::vector<std::string> serialized, Tensor def) {
    OpTester t("ParseExampleV2");
    t.Attr("Tdense", std::vector<DataType>{DT_FLOAT})
        .Attr("num_sparse", int64_t{0})
        .Attr("sparse_types", std::vector<DataType>{})
        .Attr("ragged_value_types", std::vector<DataType>{})
        .Attr("ragged_split_types", std::vector<DataType>{})
        .Attr("dense_shapes", Shapes({{-1, 2}}))
        .Input(Tensor::FromVector<std::string>(serialized))
        .Input(Tensor::FromVector<std::string>({}))
        .Input(Tensor::FromVector<std::string>({}))
        .Input(Tensor::FromVector<std::string>({"score"}))
        .Input(Tensor::FromVector<std::string>({}))
        .Input(def);
    return t.Run();
  };
  const std::vector<std::string> batch = {Serialize(1, {}, {1, 2, 3, 4}), Serialize(2, {}, {}),
                                          Serialize(3, {}, {5, 6})};
  auto out = parse(batch, Tensor::FromVector<float>({-1}));
  ASSERT_TRUE(out.ok()) << out.status();
  Expect(
      Tensor::FromVector<float>({1, 2, 3, 4, -1, -1, -1, -1, 5, 6, -1, -1}, TensorShape({3, 2, 2})),
      (*out)[0]);
  out = parse(batch, Tensor(DT_FLOAT, TensorShape({0})));
  ASSERT_TRUE(out.ok()) << out.status();
  Expect(Tensor::FromVector<float>({1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 0, 0}, TensorShape({3, 2, 2})),
         (*out)[0]);
  auto bad = parse({Serialize(1, {}, {1, 2}), Serialize(2, {}, {1, 2, 3})},
                   Tensor::FromVector<float>({0}));
  EXPECT_THAT(bad.status().message(),
              HasSubstr("example 1, key 'score': 3 values are not rows of [2]"));
}

TEST(ParseExampleTest, V1TakesOneScalarPerKey) {
  OpTester t("ParseExample");
  t.Attr("Nsparse", int64_t{0})
      .Attr("Ndense", int64_t{1})
      .Attr("sparse_types", std::vector<DataType>{})
      .Attr("Tdense", std::vector<DataType>{DT_FLOAT})
      .Attr("dense_shapes", Shapes({{2}}))
      .Input(Tensor::FromVector<std::string>({Serialize(1, {}, {3, 4}), Serialize(2, {}, {})}))
      .Input(Tensor::FromVector<std::string>({}))
      .Input(Tensor::Scalar<std::string>("score"))
      .Input(Tensor::FromVector<float>({-1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  Expect(Tensor::FromVector<float>({3, 4, -1, -1}, TensorShape({2, 2})), (*out)[0]);
}

}  // namespace
}  // namespace graphrun
