#include "util/json.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

TEST(JsonTest, ParsesAndSerializesEveryKind) {
  auto v = ParseJson(R"( {"a": [1, -2.5e3, true, false, null], "b": {"c": "d"}} )");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->Serialize(), R"({"a": [1, -2.5e3, true, false, null], "b": {"c": "d"}})");
  ASSERT_NE(v->Find("b"), nullptr);
  EXPECT_EQ(v->Find("b")->Find("c")->string_value(), "d");
  EXPECT_EQ(v->Find("zz"), nullptr);
}

TEST(JsonTest, NumbersKeepTheirText) {
  auto v = ParseJson("9223372036854775807");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->is_number());
  EXPECT_EQ(v->number_text(), "9223372036854775807");
}

TEST(JsonTest, StringEscapes) {
  auto v = ParseJson(R"("a\"b\\c\/d\n\t\u0041\u00e9\ud83d\ude00")");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->string_value(), "a\"b\\c/d\n\tA\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(JsonQuote("q\"\\\n\x01\xC3\xA9"), "\"q\\\"\\\\\\n\\u0001\xC3\xA9\"");
}

TEST(JsonTest, Errors) {
  for (const char* bad : {"", "[1,", "[1 2]", "{\"a\" 1}", "01", "1.", "-", "\"abc", "tru", "[1]x",
                          "{1: 2}", "\"\\x\"", "\"\\ud800\"", "\"a\nb\""}) {
    auto v = ParseJson(bad);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(v.status().message(), HasSubstr("invalid JSON at offset")) << bad;
  }
  EXPECT_EQ(ParseJson("[1 2]").status().message(),
            "invalid JSON at offset 3: expected ',' or ']' in array");
}

TEST(JsonTest, DeepNestingIsRejectedNotCrashed) {
  std::string deep(100000, '[');
  EXPECT_THAT(ParseJson(deep).status().message(), HasSubstr("nesting too deep"));
}

TEST(JsonTest, ShortestFloats) {
  EXPECT_EQ(FormatFloatShortest(0.1f), "0.1");
  EXPECT_EQ(FormatFloatShortest(1.0f), "1");
  EXPECT_EQ(FormatFloatShortest(-2.5f), "-2.5");
  EXPECT_EQ(FormatFloatShortest(1e-7f), "1e-07");
  EXPECT_EQ(FormatFloatShortest(16777216.0f), "16777216");
  EXPECT_EQ(FormatFloatShortest(3.14159274f), "3.1415927");
  EXPECT_EQ(FormatFloatShortest(std::numeric_limits<float>::max()), "3.4028235e+38");
  EXPECT_EQ(FormatDoubleShortest(0.1), "0.1");
  EXPECT_EQ(FormatDoubleShortest(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatDoubleShortest(1e300), "1e+300");
  // Between 1 and 1e16: fixed notation, not the shorter exponent form.
  EXPECT_EQ(FormatFloatShortest(10.0f), "10");
  EXPECT_EQ(FormatFloatShortest(-150.0f), "-150");
  EXPECT_EQ(FormatFloatShortest(1e6f), "1000000");
  EXPECT_EQ(FormatFloatShortest(1250.5f), "1250.5");
  EXPECT_EQ(FormatDoubleShortest(3e15), "3000000000000000");
  EXPECT_EQ(FormatDoubleShortest(1e16), "1e+16");
  EXPECT_EQ(FormatDoubleShortest(0.0001), "0.0001");
}

}  // namespace
}  // namespace graphrun
