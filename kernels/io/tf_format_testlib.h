// Test helpers that read and write TensorFlow's checkpoint formats by their
// definition, independently of graphrun's reader and writer: LevelDB's
// table layout (footer, block handles, block trailers with masked CRC32C,
// prefix-compressed records) and protobuf's wire format by field number.
// For checkpoint_tf_format_test and checkpoint_tf_v1_test.
#ifndef GRAPHRUN_KERNELS_IO_TF_FORMAT_TESTLIB_H_
#define GRAPHRUN_KERNELS_IO_TF_FORMAT_TESTLIB_H_

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/io/checkpoint_util.h"

namespace graphrun {
namespace tf_format {

inline std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}
// $TEST_TMPDIR/name, created.
inline std::string TempDir(const std::string& name) {
  std::string d = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  ::mkdir(d.c_str(), 0755);
  return d;
}

// --- decoding ---------------------------------------------------------------

inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t Fixed32(const std::string& s, size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(s[at])) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3])) << 24;
}
inline uint64_t Varint(const std::string& s, size_t* pos) {
  uint64_t v = 0;
  for (int shift = 0; *pos < s.size(); shift += 7) {
    uint8_t b = static_cast<uint8_t>(s[(*pos)++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return v;
}

// A block's contents after checking its trailer (uncompressed blocks only).
inline std::string Block(const std::string& file, uint64_t offset, uint64_t size) {
  EXPECT_LE(offset + size + 5, file.size());
  if (offset + size + 5 > file.size()) return "";
  EXPECT_EQ(file[offset + size], '\0') << "compression type";
  uint32_t crc = checkpoint::Crc32c(0, file.data() + offset, size + 1);
  EXPECT_EQ(Fixed32(file, offset + size + 1), Mask(crc)) << "block trailer CRC";
  return file.substr(offset, size);
}

// The records of a block, undoing prefix compression.
inline std::vector<std::pair<std::string, std::string>> Records(const std::string& block) {
  const uint32_t restarts = Fixed32(block, block.size() - 4);
  const size_t end = block.size() - 4 - 4 * restarts;
  EXPECT_EQ(Fixed32(block, end), 0u) << "first restart point";
  std::vector<std::pair<std::string, std::string>> out;
  std::string key;
  for (size_t pos = 0; pos < end;) {
    uint64_t shared = Varint(block, &pos), non_shared = Varint(block, &pos);
    uint64_t value_len = Varint(block, &pos);
    key = key.substr(0, shared) + block.substr(pos, non_shared);
    pos += non_shared;
    out.emplace_back(key, block.substr(pos, value_len));
    pos += value_len;
  }
  return out;
}

// Every record of a whole table file, in file order: the footer (two
// handles padded to 40 bytes, the magic number), an empty metaindex, the
// index block whose keys are each data block's last key.
inline std::vector<std::pair<std::string, std::string>> TableRecords(const std::string& file) {
  std::vector<std::pair<std::string, std::string>> records;
  EXPECT_GE(file.size(), 48u);
  if (file.size() < 48) return records;
  EXPECT_EQ(Fixed32(file, file.size() - 8), 0x8b80fb57u);
  EXPECT_EQ(Fixed32(file, file.size() - 4), 0xdb477524u);
  size_t pos = file.size() - 48;
  uint64_t meta_off = Varint(file, &pos), meta_size = Varint(file, &pos);
  uint64_t index_off = Varint(file, &pos), index_size = Varint(file, &pos);
  EXPECT_TRUE(Records(Block(file, meta_off, meta_size)).empty());
  for (const auto& [last_key, handle] : Records(Block(file, index_off, index_size))) {
    size_t p = 0;
    uint64_t off = Varint(handle, &p), size = Varint(handle, &p);
    auto block = Records(Block(file, off, size));
    EXPECT_EQ(block.back().first, last_key);
    records.insert(records.end(), block.begin(), block.end());
  }
  return records;
}

// A protobuf message as field number -> raw values (varints as numbers in
// decimal text, length-delimited and fixed32 as bytes).
inline std::multimap<int, std::string> Fields(const std::string& msg) {
  std::multimap<int, std::string> f;
  for (size_t pos = 0; pos < msg.size();) {
    uint64_t tag = Varint(msg, &pos);
    int field = static_cast<int>(tag >> 3), wire = static_cast<int>(tag & 7);
    if (wire == 0) {
      f.emplace(field, std::to_string(Varint(msg, &pos)));
    } else if (wire == 2) {
      uint64_t n = Varint(msg, &pos);
      f.emplace(field, msg.substr(pos, n));
      pos += n;
    } else if (wire == 5) {
      f.emplace(field, msg.substr(pos, 4));
      pos += 4;
    } else {
      ADD_FAILURE() << "unexpected wire type " << wire;
      break;
    }
  }
  return f;
}
inline std::string One(const std::multimap<int, std::string>& f, int field) {
  EXPECT_EQ(f.count(field), 1u) << "field " << field;
  auto it = f.find(field);
  return it == f.end() ? "" : it->second;
}
inline std::vector<std::string> All(const std::multimap<int, std::string>& f, int field) {
  std::vector<std::string> v;
  for (auto [a, b] = f.equal_range(field); a != b; ++a) v.push_back(a->second);
  return v;
}
// TensorShapeProto (dim = 2, Dim.size = 1) -> sizes.
inline std::vector<int64_t> Dims(const std::string& shape) {
  std::vector<int64_t> d;
  for (const std::string& dim : All(Fields(shape), 2)) {
    auto f = Fields(dim);
    d.push_back(f.count(1) ? std::stoll(One(f, 1)) : 0);
  }
  return d;
}
// TensorSliceProto (extent = 1; Extent.start = 1, Extent.length = 2) ->
// {start, length} per dimension, {0, -1} for an empty (whole) extent.
inline std::vector<std::pair<int64_t, int64_t>> Extents(const std::string& slice) {
  std::vector<std::pair<int64_t, int64_t>> v;
  for (const std::string& e : All(Fields(slice), 1)) {
    auto f = Fields(e);
    v.emplace_back(f.count(1) ? std::stoll(One(f, 1)) : 0, f.count(2) ? std::stoll(One(f, 2)) : -1);
  }
  return v;
}

// --- encoding ---------------------------------------------------------------

inline void PutVarint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}
inline void PutFixed32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace tf_format
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_IO_TF_FORMAT_TESTLIB_H_
