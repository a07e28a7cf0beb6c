// The event file is read back by a decoder of its own (TFRecord framing,
// a bitwise CRC32C, protobuf wire format by hand): field numbers, types
// and checksums as TensorFlow's Event and Summary protos define them.
#include "client/loop/summary_writer.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace {

// Reference CRC32C, bit by bit (polynomial 0x82f63b78, reflected).
uint32_t SlowCrc32c(const std::string& s) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

template <typename T>
T Fixed(const std::string& s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

uint64_t Varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const unsigned char b = static_cast<unsigned char>(s.at(at++));
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
}

struct Field {
  int number, wire;
  uint64_t varint = 0;
  std::string bytes;  // length-delimited, or the fixed bytes
};

std::vector<Field> Fields(const std::string& msg) {
  std::vector<Field> out;
  size_t at = 0;
  while (at < msg.size()) {
    const uint64_t key = Varint(msg, at);
    Field f{static_cast<int>(key >> 3), static_cast<int>(key & 7)};
    if (f.wire == 0) {
      f.varint = Varint(msg, at);
    } else if (f.wire == 1) {
      f.bytes = msg.substr(at, 8);
      at += 8;
    } else if (f.wire == 5) {
      f.bytes = msg.substr(at, 4);
      at += 4;
    } else if (f.wire == 2) {
      const size_t n = Varint(msg, at);
      f.bytes = msg.substr(at, n);
      at += n;
    } else {
      ADD_FAILURE() << "wire type " << f.wire;
      break;
    }
    out.push_back(f);
  }
  return out;
}

TEST(SummaryWriterTest, MaskedCrcIsTensorFlows) {
  EXPECT_EQ(SlowCrc32c("123456789"), 0xe3069283u);  // CRC32C's check value
  const std::string data = "graphrun";
  EXPECT_EQ(MaskedCrc32c(data.data(), data.size()), Mask(SlowCrc32c(data)));
}

TEST(SummaryWriterTest, EventsDecodeAsTensorFlowsProtos) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/events/train";
  auto w = EventFileWriter::Create(dir);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->WriteScalars(100, {{"loss", 0.5}, {"accuracy", 0.875}}).ok());
  ASSERT_TRUE((*w)->WriteScalars(200, {{"loss", 0.25}}).ok());
  ASSERT_TRUE((*w)->Flush().ok());
  const std::string name = std::filesystem::path((*w)->filename()).filename();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;

  std::ifstream f((*w)->filename(), std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string file = ss.str();
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    ASSERT_LE(at + 12, file.size());
    const uint64_t len = Fixed<uint64_t>(file, at);
    EXPECT_EQ(Fixed<uint32_t>(file, at + 8), Mask(SlowCrc32c(file.substr(at, 8))));
    const std::string record = file.substr(at + 12, len);
    EXPECT_EQ(Fixed<uint32_t>(file, at + 12 + len), Mask(SlowCrc32c(record)));
    records.push_back(record);
    at += 12 + len + 4;
  }
  ASSERT_EQ(records.size(), 3u);
  // Event 1: wall_time (1, double) and file_version (3).
  std::vector<Field> first = Fields(records[0]);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].number, 1);
  EXPECT_EQ(first[0].wire, 1);
  EXPECT_GT(Fixed<double>(first[0].bytes, 0), 1.7e9);
  EXPECT_EQ(first[1].number, 3);
  EXPECT_EQ(first[1].bytes, "brain.Event:2");
  // Event 2: step (2) = 100 and summary (5) with two values.
  std::vector<Field> second = Fields(records[1]);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[1].number, 2);
  EXPECT_EQ(second[1].varint, 100u);
  EXPECT_EQ(second[2].number, 5);
  std::map<std::string, float> values;
  for (const Field& v : Fields(second[2].bytes)) {
    EXPECT_EQ(v.number, 1);  // Summary.value
    std::vector<Field> parts = Fields(v.bytes);
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].number, 1);  // tag
    EXPECT_EQ(parts[1].number, 2);  // simple_value, a float
    EXPECT_EQ(parts[1].wire, 5);
    values[parts[0].bytes] = Fixed<float>(parts[1].bytes, 0);
  }
  EXPECT_EQ(values, (std::map<std::string, float>{{"accuracy", 0.875f}, {"loss", 0.5f}}));
  std::vector<Field> third = Fields(records[2]);
  EXPECT_EQ(third[1].varint, 200u);
}

TEST(SummaryWriterTest, UnwritableDirectoryIsFailedPrecondition) {
  auto w = EventFileWriter::Create("/proc/no_such_dir/summaries");
  EXPECT_EQ(w.status().code(), absl::StatusCode::kFailedPrecondition) << w.status();
}

}  // namespace
}  // namespace client
}  // namespace graphrun
