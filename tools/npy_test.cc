#include "tools/npy.h"

#include <complex>
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/memory_budget.h"
#include "gtest/gtest.h"
#include "tools/file_util.h"

namespace graphrun {
namespace tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Runfile(const std::string& rel) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/" + rel;
}

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

// An .npy file per the format spec: magic, version, little-endian header
// length, the dict, then the data.
std::string MakeNpy(const std::string& dict, const std::string& data, int major = 1) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const std::string header = dict + "\n";
  const size_t len = header.size();
  out += static_cast<char>(len & 0xFF);
  out += static_cast<char>((len >> 8) & 0xFF);
  if (major >= 2) out += std::string(2, '\0');
  return out + header + data;
}

std::vector<int64_t> Dims(const Tensor& t) {
  auto d = t.shape().dim_sizes();
  return std::vector<int64_t>(d.begin(), d.end());
}

TEST(NpyTest, ReadsNumpyWrittenFixtures) {
  auto f = ReadNpyFile(Runfile("tools/testdata/float32_2x3.npy"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->dtype(), DT_FLOAT);
  EXPECT_THAT(Dims(*f), ElementsAre(2, 3));
  EXPECT_THAT(f->flat<float>(), ElementsAre(0, 0.5f, 1, 1.5f, -2, 3.25f));

  auto i = ReadNpyFile(Runfile("tools/testdata/int64_3.npy"));
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->dtype(), DT_INT64);
  EXPECT_THAT(i->flat<int64_t>(), ElementsAre(std::numeric_limits<int64_t>::min(), 0,
                                              std::numeric_limits<int64_t>::max()));

  auto b = ReadNpyFile(Runfile("tools/testdata/bool_scalar_v2.npy"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dtype(), DT_BOOL);
  EXPECT_EQ(b->dims(), 0);
  EXPECT_TRUE(b->scalar<bool>());
}

TEST(NpyTest, HandBuiltHeaders) {
  std::string data("\x01\x00\x02\x00\x03\x00", 6);
  auto t =
      ParseNpy(MakeNpy("{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", data), "a.npy");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DT_INT16);
  EXPECT_THAT(t->flat<int16_t>(), ElementsAre(1, 2, 3));

  // Key order and quoting are free; version 3.0 has the 4-byte length.
  auto u = ParseNpy(
      MakeNpy("{\"shape\": (1, 2), \"fortran_order\": False, \"descr\": \"|u1\"}", "\xff\x07", 3),
      "b.npy");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->dtype(), DT_UINT8);
  EXPECT_THAT(Dims(*u), ElementsAre(1, 2));
  EXPECT_THAT(u->flat<uint8_t>(), ElementsAre(255, 7));
}

TEST(NpyTest, EveryDtypeRoundTrips) {
  const std::vector<Tensor> tensors = {
      Tensor::FromVector<float>({1.5f, -2}, TensorShape({2, 1})),
      Tensor::FromVector<double>({0.1}),
      Tensor::FromVector<int32_t>({-7, 8, 9}),
      Tensor::FromVector<int64_t>({1LL << 40}),
      Tensor::FromVector<uint8_t>({0, 200}),
      Tensor::FromVector<int8_t>({-100}),
      Tensor::FromVector<int16_t>({-300}),
      Tensor::FromVector<uint16_t>({60000}),
      Tensor::FromVector<bool>({true, false, true}),
      Tensor::Scalar<float>(42),
      Tensor(DT_FLOAT, TensorShape({0, 4})),
      Tensor::FromVector<std::complex<float>>({{1.5f, -2.0f}, {0.0f, 3.0f}}),
      Tensor::FromVector<std::complex<double>>({{0.1, -1e300}}),
  };
  for (const Tensor& t : tensors) {
    auto bytes = EncodeNpy(t);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    // Data starts on a 64-byte boundary.
    const size_t header_len =
        static_cast<unsigned char>((*bytes)[8]) | (static_cast<unsigned char>((*bytes)[9]) << 8);
    EXPECT_EQ((10 + header_len) % 64, 0u) << t.DebugString();
    EXPECT_EQ((*bytes)[10 + header_len - 1], '\n');
    auto back = ParseNpy(*bytes, "rt.npy");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->DebugString(100), t.DebugString(100));
  }
}

TEST(NpyTest, EncodesExactlyTheSpecHeader) {
  auto bytes = EncodeNpy(Tensor::FromVector<int32_t>({1, 2, 3}));
  ASSERT_TRUE(bytes.ok());
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }";
  // 10 + 57-byte dict + '\n' rounds up to 128 bytes: header length 118.
  ASSERT_EQ(dict.size(), 57u);
  std::string want("\x93NUMPY\x01\x00\x76\x00", 10);
  want += dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  want += std::string("\x01\0\0\0\x02\0\0\0\x03\0\0\0", 12);
  EXPECT_EQ(*bytes, want);
  auto scalar = EncodeNpy(Tensor::Scalar<double>(1));
  ASSERT_TRUE(scalar.ok());
  EXPECT_THAT(*scalar, HasSubstr("{'descr': '<f8', 'fortran_order': False, 'shape': (), }"));
  // numpy's complex128 is '<c16' (three characters of code).
  auto c = EncodeNpy(Tensor::FromVector<std::complex<double>>({{1, 2}}));
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(*c, HasSubstr("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }"));
}

TEST(NpyTest, FileRoundTrip) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}));
  const std::string path = TempPath("rt.npy");
  ASSERT_TRUE(WriteNpyFile(path, t).ok());
  auto back = ReadNpyFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->DebugString(), "Tensor<float, [2,2]: 1 2 3 4>");
}

TEST(NpyTest, MalformedFilesNameTheFile) {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"hello", "bad.npy: not an .npy file (bad magic)"},
      {std::string("\x93NUMPY\x04\x00\x00\x00", 10), "bad.npy: unsupported format version 4.0"},
      {std::string("\x93NUMPY\x01\x00\x50\x00{", 11), "bad.npy: truncated header"},
      {MakeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", "12345678"),
       "bad.npy: fortran_order arrays are not supported"},
      {MakeNpy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", "12345678"),
       "bad.npy: big-endian dtype '>f4' is not supported"},
      {MakeNpy("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", "12345678"),
       "bad.npy: unsupported dtype '<U3'"},
      {MakeNpy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", "12345678"),
       "bad.npy: unsupported dtype '|O'"},
      {MakeNpy(f4, "1234567"), "bad.npy: data is 7 bytes but <f4 shape [2] needs 8"},
      {MakeNpy("{'descr': '<f4', 'shape': (2,), }", "12345678"),
       "bad.npy: bad header at offset 34: needs 'descr', 'fortran_order' and 'shape'"},
      {MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", ""),
       "bad.npy: bad header at offset 51: shape entries must be non-negative integers"},
      {MakeNpy("{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }", "\x02"),
       "bad.npy: bool element 0 has byte value 2"},
  };
  for (const Case& c : cases) {
    auto t = ParseNpy(c.bytes, "bad.npy");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(t.status().message(), c.message);
  }
}

TEST(NpyTest, MissingFileAndUnwritableDtype) {
  auto t = ReadNpyFile(TempPath("does_not_exist.npy"));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("does_not_exist.npy: cannot open"));
  auto s = WriteNpyFile(TempPath("s.npy"), Tensor::FromVector<std::string>({"a"}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("s.npy: cannot write a string tensor as .npy"));
}

// A feed file is one tensor: larger than the per-allocation cap (or
// endless, as /dev/zero) it is ResourceExhausted naming the file, before
// or instead of its tensor being made (it was allocated unchecked, and the
// next allocation, of another node, took the blame).
TEST(NpyTest, FilesOverTheMemoryCapAreRefused) {
  SetMemoryLimits(int64_t{64} << 20, int64_t{1} << 20);
  auto zero = ReadNpyFile("/dev/zero");
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kResourceExhausted) << zero.status();
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("/dev/zero: it holds more than"));
  // 512 KiB of data fits the file bound (cap + 1 MiB for the header) but
  // its tensor is over the 256 KiB cap set next.
  const std::string path = TempPath("big.npy");
  ASSERT_TRUE(WriteStringToFile(path, MakeNpy("{'descr': '|u1', 'fortran_order': False, "
                                              "'shape': (524288,), }",
                                              std::string(524288, '\1')))
                  .ok());
  SetMemoryLimits(int64_t{64} << 20, int64_t{256} << 10);
  auto big = ReadNpyFile(path);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_THAT(std::string(big.status().message()), HasSubstr(path + ": "));
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("[524288]"));
  SetMemoryLimits(0, 0);
  auto fits = ReadNpyFile(path);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->NumElements(), 524288);
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
