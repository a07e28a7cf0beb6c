#include "graph/tensor.h"

#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "graph/memory_budget.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

tensorflow::TensorProto P(const std::string& text) {
  tensorflow::TensorProto p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

TEST(TensorTest, DecodesTensorContent) {
  float v[3] = {1.0f, -0.0f, 2.5f};
  tensorflow::TensorProto p;
  p.set_dtype(tensorflow::DT_FLOAT);
  p.mutable_tensor_shape()->add_dim()->set_size(3);
  p.set_tensor_content(std::string(reinterpret_cast<char*>(v), sizeof(v)));
  auto t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->base<float>()[0], 1.0f);
  EXPECT_TRUE(std::signbit(t->base<float>()[1]));
  EXPECT_EQ(t->base<float>()[2], 2.5f);
}

TEST(TensorTest, SplatFillsShapeWithLastValue) {
  auto t = Tensor::FromProto(
      P("dtype: DT_INT32 tensor_shape { dim { size: 2 } dim { size: 2 } } int_val: 7 int_val: 8"));
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(std::vector<int32_t>(t->base<int32_t>(), t->base<int32_t>() + 4),
              ::testing::ElementsAre(7, 8, 8, 8));
}

TEST(TensorTest, EmptyContentIsZeros) {
  auto t = Tensor::FromProto(P("dtype: DT_DOUBLE tensor_shape { dim { size: 3 } }"));
  ASSERT_TRUE(t.ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t->base<double>()[i], 0.0);
}

TEST(TensorTest, Int64IsExact) {
  auto t = Tensor::FromProto(P("dtype: DT_INT64 tensor_shape {} int64_val: 9223372036854775807"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->scalar<int64_t>(), INT64_MAX);
}

TEST(TensorTest, HalfAndBfloat16Decode) {
  // 1.5 in half is 0x3E00; -2 in bfloat16 is 0xC000.
  auto h = Tensor::FromProto(P("dtype: DT_HALF tensor_shape {} half_val: 15872"));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(HalfToFloat(h->scalar<uint16_t>()), 1.5f);
  auto b = Tensor::FromProto(P("dtype: DT_BFLOAT16 tensor_shape {} half_val: 49152"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(BFloat16ToFloat(b->scalar<uint16_t>()), -2.0f);
  EXPECT_EQ(FloatToHalf(1.5f), 0x3E00);
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xC000);
}

TEST(TensorTest, StringsAndBool) {
  auto s = Tensor::FromProto(
      P("dtype: DT_STRING tensor_shape { dim { size: 2 } } string_val: 'a' string_val: 'bc'"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->base<std::string>()[1], "bc");
  EXPECT_EQ(s->TotalBytes(), 3);
  auto b = Tensor::FromProto(P("dtype: DT_BOOL tensor_shape { dim { size: 2 } } bool_val: true"));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->base<bool>()[1]);
}

TEST(TensorTest, RejectsInconsistentProtos) {
  auto too_many = Tensor::FromProto(
      P("dtype: DT_FLOAT tensor_shape { dim { size: 1 } } float_val: 1 float_val: 2"));
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_content = Tensor::FromProto(
      P("dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: 'abc'"));
  EXPECT_EQ(bad_content.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_content.status().message(), HasSubstr("3 bytes"));
  auto negative = Tensor::FromProto(P("dtype: DT_FLOAT tensor_shape { dim { size: -1 } }"));
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  auto huge = Tensor::FromProto(
      P("dtype: DT_FLOAT tensor_shape { dim { size: 4611686018427387904 } dim { size: 4 } }"));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  auto unknown = Tensor::FromProto(P("dtype: DT_QINT8 tensor_shape {}"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  // A number that is no type is named as given, not as a reference type.
  tensorflow::TensorProto bogus = P("tensor_shape {}");
  bogus.set_dtype(static_cast<DataType>(999));
  auto no_type = Tensor::FromProto(bogus);
  EXPECT_EQ(no_type.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_type.status().message(), HasSubstr("unsupported dtype DT_UNKNOWN_999"));
  EXPECT_EQ(DataTypeString(static_cast<DataType>(999)), "unknown_type_999");
  EXPECT_EQ(DataTypeString(MakeRefType(DT_FLOAT)), "float_ref");
  // Complex values come in (real, imaginary) pairs.
  auto odd = Tensor::FromProto(P("dtype: DT_COMPLEX64 tensor_shape {} scomplex_val: 1"));
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  auto many =
      Tensor::FromProto(P("dtype: DT_COMPLEX128 tensor_shape {} dcomplex_val: [1, 2, 3, 4]"));
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  // TensorFlow's limit of 254 dimensions.
  std::string dims;
  for (int i = 0; i < 254; ++i) dims += "dim { size: 1 } ";
  EXPECT_TRUE(Tensor::FromProto(P("dtype: DT_FLOAT tensor_shape { " + dims + "}")).ok());
  auto deep = Tensor::FromProto(P("dtype: DT_FLOAT tensor_shape { " + dims + "dim { size: 1 } }"));
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(deep.status().message(),
              HasSubstr("shape has 255 dimensions, more than the 254 a tensor may have"));
}

// A string tensor's tensor_content in TensorFlow's encoding: the lengths
// as varints, then the bytes.
TEST(TensorTest, StringTensorContentDecodes) {
  tensorflow::TensorProto p = P("dtype: DT_STRING tensor_shape { dim { size: 3 } }");
  p.set_tensor_content(
      std::string("\x02\x00\x03"
                  "abxyz",
                  8));
  auto t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->base<std::string>()[0], "ab");
  EXPECT_EQ(t->base<std::string>()[1], "");
  EXPECT_EQ(t->base<std::string>()[2], "xyz");
  p.set_tensor_content("\x05\x80");  // element 1's varint never ends
  auto bad = Tensor::FromProto(p);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("TensorProto tensor_content of a string [3] tensor: the length of "
                        "element 1 is cut off or malformed"));
  p.set_tensor_content(
      std::string("\x01\x01\x01"
                  "abcd",
                  7));
  EXPECT_THAT(Tensor::FromProto(p).status().message(),
              HasSubstr("the lengths add up to 3 bytes but 4 follow them"));
}

// A string repeated by the splat rule counts by its contents: refused
// before the copies are made.
TEST(TensorTest, StringSplatsAreChargedFirst) {
  SetMemoryLimits(int64_t{8} << 20, int64_t{8} << 20);
  tensorflow::TensorProto p = P("dtype: DT_STRING tensor_shape { dim { size: 300 } }");
  p.add_string_val(std::string(100000, 'a'));
  auto t = Tensor::FromProto(p);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(t.status().message(),
              HasSubstr("TensorProto: the string contents of a [300] string tensor"));
  p.mutable_tensor_shape()->mutable_dim(0)->set_size(30);
  auto ok = Tensor::FromProto(p);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->buffer()->contents_bytes(), 3000000);
  SetMemoryLimits(0, 0);
}

TEST(TensorTest, ComplexFromProtoSplatsTheLastValue) {
  auto c = Tensor::FromProto(
      P("dtype: DT_COMPLEX64 tensor_shape { dim { size: 3 } } scomplex_val: [1, 2, 3, 4]"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->SummarizeValue(10), "(1,2) (3,4) (3,4)");
  auto z = Tensor::FromProto(P("dtype: DT_COMPLEX128 tensor_shape { dim { size: 2 } }"));
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->SummarizeValue(10), "(0,0) (0,0)");
}

TEST(TensorTest, RoundTripsThroughBothEncodings) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  tensorflow::TensorProto a, b;
  t.AsProtoTensorContent(&a);
  t.AsProtoField(&b);
  for (const auto* p : {&a, &b}) {
    auto r = Tensor::FromProto(*p);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->shape(), t.shape());
    for (int i = 0; i < 6; ++i) EXPECT_EQ(r->base<float>()[i], i + 1.0f);
  }
}

TEST(TensorTest, SliceAndReshapeShareTheBuffer) {
  Tensor t = Tensor::FromVector<int32_t>({0, 1, 2, 3, 4, 5}, TensorShape({3, 2}));
  Tensor s = t.Slice(1, 3);
  EXPECT_EQ(s.shape(), TensorShape({2, 2}));
  EXPECT_EQ(s.base<int32_t>()[0], 2);
  EXPECT_TRUE(s.SharesBufferWith(t));
  auto r = t.Reshaped(TensorShape({6}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->SharesBufferWith(t));
  EXPECT_FALSE(t.Reshaped(TensorShape({4})).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  Tensor d = t.DeepCopy();
  EXPECT_FALSE(d.SharesBufferWith(t));
  EXPECT_EQ(d.base<int32_t>()[5], 5);
}

}  // namespace
}  // namespace graphrun

namespace graphrun {
namespace {

// From 2 MiB up, buffers are 2 MiB-aligned (huge pages), whatever their
// size; smaller ones keep the usual alignment.
TEST(TensorBufferTest, LargeBuffersAreHugePageAligned) {
  for (int64_t n : {int64_t{3} << 20, (int64_t{3} << 20) + 100, int64_t{64} << 20}) {
    Tensor t(DT_UINT8, TensorShape({n}));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % (uintptr_t{2} << 20), 0u) << n;
    std::memset(t.raw_data(), 0x5a, static_cast<size_t>(n));
    EXPECT_EQ(t.raw_data()[n - 1], 0x5a);
  }
  Tensor small(DT_FLOAT, TensorShape({1000}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.raw_data()) % TensorBuffer::kAlignment, 0u);
}

// Strings print escaped, as TensorFlow's DebugString does: one line, and
// no control characters (or terminal escapes) from the data.
TEST(TensorTest, StringsPrintEscaped) {
  Tensor t = Tensor::FromVector<std::string>({"a\nb", std::string("c\0d", 3), "\x1b[31m\"q\""});
  EXPECT_EQ(t.SummarizeValue(3), "\"a\\nb\" \"c\\000d\" \"\\033[31m\\\"q\\\"\"");
}

}  // namespace
}  // namespace graphrun
