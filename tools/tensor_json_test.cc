#include "tools/tensor_json.h"

#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int64_t> Dims(const Tensor& t) {
  auto d = t.shape().dim_sizes();
  return std::vector<int64_t>(d.begin(), d.end());
}

TEST(TensorToJsonTest, Float) {
  Tensor t = Tensor::FromVector<float>({1, 2.5f, 0.1f, -3}, TensorShape({2, 2}));
  EXPECT_EQ(TensorToJson(t),
            R"({"dtype": "DT_FLOAT", "shape": [2, 2], "values": [1, 2.5, 0.1, -3]})");
}

TEST(TensorToJsonTest, NonFiniteFloatsAreStrings) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor t = Tensor::FromVector<float>({std::nanf(""), inf, -inf});
  EXPECT_EQ(TensorToJson(t),
            R"({"dtype": "DT_FLOAT", "shape": [3], "values": ["NaN", "Infinity", "-Infinity"]})");
  Tensor d = Tensor::FromVector<double>({0.1 + 0.2, -std::numeric_limits<double>::infinity()});
  EXPECT_EQ(TensorValuesToJson(d), R"([0.30000000000000004, "-Infinity"])");
}

TEST(TensorToJsonTest, ScalarsIntsBoolsStrings) {
  EXPECT_EQ(TensorToJson(Tensor::Scalar<int32_t>(45)),
            R"({"dtype": "DT_INT32", "shape": [], "values": [45]})");
  EXPECT_EQ(TensorValuesToJson(Tensor::FromVector<int64_t>(
                {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()})),
            "[9223372036854775807, -9223372036854775808]");
  EXPECT_EQ(TensorValuesToJson(Tensor::FromVector<uint64_t>({18446744073709551615ull})),
            "[18446744073709551615]");
  EXPECT_EQ(TensorValuesToJson(Tensor::FromVector<uint8_t>({0, 255})), "[0, 255]");
  EXPECT_EQ(TensorValuesToJson(Tensor::FromVector<int8_t>({-128, 127})), "[-128, 127]");
  EXPECT_EQ(TensorToJson(Tensor::FromVector<bool>({true, false})),
            R"({"dtype": "DT_BOOL", "shape": [2], "values": [true, false]})");
  EXPECT_EQ(TensorToJson(Tensor::FromVector<std::string>({"a\"b", "\n"})),
            R"({"dtype": "DT_STRING", "shape": [2], "values": ["a\"b", "\n"]})");
  EXPECT_EQ(TensorToJson(Tensor(DT_FLOAT, TensorShape({0, 3}))),
            R"({"dtype": "DT_FLOAT", "shape": [0, 3], "values": []})");
}

TEST(TensorFromJsonTest, NestedArraysToFloat) {
  auto t = TensorFromJsonText("[[1, 2], [3, 4.5]]", DT_FLOAT);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DT_FLOAT);
  EXPECT_THAT(Dims(*t), ElementsAre(2, 2));
  EXPECT_THAT(t->flat<float>(), ElementsAre(1, 2, 3, 4.5f));
}

TEST(TensorFromJsonTest, Scalars) {
  auto f = TensorFromJsonText("3.5", DT_DOUBLE);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->dims(), 0);
  EXPECT_EQ(f->scalar<double>(), 3.5);
  auto b = TensorFromJsonText("true", DT_BOOL);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->scalar<bool>());
  auto s = TensorFromJsonText(R"("s\n")", DT_STRING);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->scalar<std::string>(), "s\n");
}

TEST(TensorFromJsonTest, RefDtypeFeedsItsBaseType) {
  auto t = TensorFromJsonText("[1]", MakeRefType(DT_INT32));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->dtype(), DT_INT32);
}

TEST(TensorFromJsonTest, NonFiniteStrings) {
  auto t = TensorFromJsonText(R"(["NaN", "Infinity", "-Infinity", 1e-45])", DT_FLOAT);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(std::isnan(t->flat<float>()[0]));
  EXPECT_EQ(t->flat<float>()[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(t->flat<float>()[2], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(t->flat<float>()[3], 1e-45f);
  EXPECT_THAT(TensorFromJsonText(R"(["nan"])", DT_FLOAT).status().message(),
              HasSubstr("value \"nan\" cannot be float"));
}

TEST(TensorFromJsonTest, Int64IsExact) {
  auto t =
      TensorFromJsonText("[9223372036854775807, -9223372036854775808, 9007199254740993]", DT_INT64);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->flat<int64_t>(),
              ElementsAre(std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                          9007199254740993LL));
  auto u = TensorFromJsonText("18446744073709551615", DT_UINT64);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scalar<uint64_t>(), 18446744073709551615ull);
}

TEST(TensorFromJsonTest, IntegralExponentFormsAreAccepted) {
  auto t = TensorFromJsonText("[1e3, 2.0, -0]", DT_INT32);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->flat<int32_t>(), ElementsAre(1000, 2, 0));
  // Exact, never through a double: 2^53 + 1 written with a fraction or an
  // exponent, and INT64_MAX with a fraction.
  auto big = TensorFromJsonText(
      "[9007199254740993.0, 90071992547409930e-1, 9223372036854775807.000, "
      "-92233720368547758.08e2]",
      DT_INT64);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_THAT(big->flat<int64_t>(), ElementsAre(9007199254740993LL, 9007199254740993LL,
                                                std::numeric_limits<int64_t>::max(),
                                                std::numeric_limits<int64_t>::min()));
  auto zero = TensorFromJsonText("[-0, 0e5, -0.0]", DT_UINT64);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_THAT(zero->flat<uint64_t>(), ElementsAre(0u, 0u, 0u));
}

TEST(TensorFromJsonTest, IntErrors) {
  EXPECT_EQ(TensorFromJsonText("[1.5]", DT_INT32).status().message(),
            "value 1.5 cannot be int32: not an integer");
  EXPECT_EQ(TensorFromJsonText("2147483648", DT_INT32).status().message(),
            "value 2147483648 cannot be int32: out of range");
  EXPECT_EQ(TensorFromJsonText("-1", DT_UINT8).status().message(),
            "value -1 cannot be uint8: out of range");
  EXPECT_EQ(TensorFromJsonText("256", DT_UINT8).status().message(),
            "value 256 cannot be uint8: out of range");
  EXPECT_EQ(TensorFromJsonText("9223372036854775808", DT_INT64).status().message(),
            "value 9223372036854775808 cannot be int64: out of range");
  EXPECT_EQ(TensorFromJsonText("9.3e18", DT_INT64).status().message(),
            "value 9.3e18 cannot be int64: out of range");
  EXPECT_EQ(TensorFromJsonText("\"3\"", DT_INT32).status().message(),
            "value \"3\" cannot be int32: not an integer");
  // 2^53 + 0.1 and 123456789012345678.9: not integers (a double would
  // have rounded them to one).
  EXPECT_EQ(TensorFromJsonText("90071992547409931e-1", DT_INT64).status().message(),
            "value 90071992547409931e-1 cannot be int64: not an integer");
  EXPECT_EQ(TensorFromJsonText("1234567890123456789e-1", DT_INT64).status().message(),
            "value 1234567890123456789e-1 cannot be int64: not an integer");
  EXPECT_EQ(TensorFromJsonText("9223372036854775808.0", DT_INT64).status().message(),
            "value 9223372036854775808.0 cannot be int64: out of range");
  EXPECT_EQ(TensorFromJsonText("1e400", DT_INT64).status().message(),
            "value 1e400 cannot be int64: out of range");
}

TEST(TensorFromJsonTest, OtherErrors) {
  EXPECT_EQ(TensorFromJsonText("1e39", DT_FLOAT).status().message(),
            "value 1e39 cannot be float: out of range");
  // Beyond half's 65504 (65520 rounds to infinity) and bfloat16's range.
  EXPECT_EQ(TensorFromJsonText("1e5", DT_HALF).status().message(),
            "value 1e5 cannot be half: out of range");
  EXPECT_EQ(TensorFromJsonText("65520", DT_HALF).status().message(),
            "value 65520 cannot be half: out of range");
  EXPECT_TRUE(TensorFromJsonText("[65504, \"Infinity\"]", DT_HALF).ok());
  EXPECT_EQ(TensorFromJsonText("3.4e38", DT_BFLOAT16).status().message(),
            "value 3.4e38 cannot be bfloat16: out of range");
  EXPECT_EQ(TensorFromJsonText("2", DT_BOOL).status().message(),
            "value 2 cannot be bool: expected true or false");
  EXPECT_EQ(TensorFromJsonText("1", DT_STRING).status().message(),
            "value 1 cannot be string: not a string");
  EXPECT_EQ(TensorFromJsonText("1", DT_RESOURCE).status().message(),
            "cannot build a resource tensor from JSON");
  EXPECT_EQ(TensorFromJsonText("1", static_cast<DataType>(150)).status().message(),
            "cannot build a unknown_type_50_ref tensor from JSON");
}

TEST(TensorFromJsonTest, RaggedArrays) {
  auto r = TensorFromJsonText("[[1, 2], [3]]", DT_FLOAT);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "ragged array: expected 2 elements at depth 1, got 1");
  EXPECT_EQ(TensorFromJsonText("[[1, 2], 3]", DT_FLOAT).status().message(),
            "ragged array: expected an array of 2 at depth 1, got 3");
  EXPECT_EQ(TensorFromJsonText("[1, [2]]", DT_FLOAT).status().message(),
            "ragged array: expected a scalar at depth 1, got an array");
}

TEST(TensorFromJsonTest, EmptyArrays) {
  auto t = TensorFromJsonText("[]", DT_FLOAT);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(Dims(*t), ElementsAre(0));
  auto t2 = TensorFromJsonText("[[], []]", DT_INT32);
  ASSERT_TRUE(t2.ok());
  EXPECT_THAT(Dims(*t2), ElementsAre(2, 0));
}

// Complex values are [real, imag] pairs, as TensorToJson prints them.
TEST(TensorFromJsonTest, ComplexPairs) {
  auto c = TensorFromJsonText("[[1.5, -2], [0, \"Infinity\"]]", DT_COMPLEX64);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(Dims(*c), ElementsAre(2));
  EXPECT_EQ(c->base<std::complex<float>>()[0], std::complex<float>(1.5f, -2.0f));
  EXPECT_EQ(c->base<std::complex<float>>()[1].imag(), std::numeric_limits<float>::infinity());
  EXPECT_EQ(TensorToJson(*c),
            "{\"dtype\": \"DT_COMPLEX64\", \"shape\": [2], \"values\": [[1.5, -2], [0, "
            "\"Infinity\"]]}");
  auto scalar = TensorFromJsonText("[0.1, 3]", DT_COMPLEX128);
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->dims(), 0);
  EXPECT_EQ(scalar->base<std::complex<double>>()[0], std::complex<double>(0.1, 3.0));
  EXPECT_THAT(std::string(TensorFromJsonText("[1, 2, 3]", DT_COMPLEX64).status().message()),
              HasSubstr("a complex64 value is a [real, imag] pair or nested arrays of them, got"));
  EXPECT_EQ(TensorFromJsonText("2", DT_COMPLEX128).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TensorFromJsonText("[1, true]", DT_COMPLEX64).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorJsonTest, RoundTripIsExact) {
  Tensor t =
      Tensor::FromVector<float>({0.1f, 1.0f / 3, 3.4028235e38f, 1.4e-45f, -0.0f}, TensorShape({5}));
  auto back = TensorFromJsonText(TensorValuesToJson(t), DT_FLOAT);
  ASSERT_TRUE(back.ok()) << back.status();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(std::signbit(back->flat<float>()[i]), std::signbit(t.flat<float>()[i]));
    EXPECT_EQ(back->flat<float>()[i], t.flat<float>()[i]) << i;
  }
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
