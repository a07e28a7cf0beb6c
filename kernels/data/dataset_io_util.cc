#include "kernels/data/dataset_io_util.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"

namespace graphrun {
namespace data {

absl::StatusOr<std::string> ReadFileBytes(const std::string& filename) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(filename.c_str(), "rb"), &std::fclose);
  if (f == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot open '", filename, "': ", std::strerror(errno)));
  }
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) out.append(buf, n);
  if (std::ferror(f.get())) {
    return absl::DataLossError(absl::StrCat("error reading '", filename, "'"));
  }
  return out;
}

bool IsGzip(absl::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

absl::StatusOr<std::string> Gunzip(absl::string_view compressed, const std::string& filename) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("gzip file '", filename, "': ", what));
  };
  std::string out;
  size_t pos = 0;
  // One iteration per gzip member (gzip allows concatenation).
  while (pos < compressed.size()) {
    z_stream z;
    std::memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return error("zlib init failed");
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data() + pos));
    const size_t avail = compressed.size() - pos;
    if (avail > std::numeric_limits<uInt>::max()) {
      inflateEnd(&z);
      return error("file too large");
    }
    z.avail_in = static_cast<uInt>(avail);
    int rc = Z_OK;
    char buf[1 << 16];
    while (rc != Z_STREAM_END) {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof(buf);
      rc = inflate(&z, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END) {
        std::string msg = z.msg != nullptr ? z.msg : "";
        inflateEnd(&z);
        if (rc == Z_BUF_ERROR) return error("truncated compressed data");
        return error(absl::StrCat("corrupt compressed data (zlib error ", rc,
                                  msg.empty() ? "" : ": ", msg, ")"));
      }
      out.append(buf, sizeof(buf) - z.avail_out);
      if (rc != Z_STREAM_END && z.avail_in == 0 && z.avail_out != 0) {
        inflateEnd(&z);
        return error("truncated compressed data");
      }
    }
    pos += avail - z.avail_in;
    inflateEnd(&z);
    // Trailing zero padding after the last member is tolerated.
    if (pos < compressed.size() && !IsGzip(compressed.substr(pos))) break;
  }
  return out;
}

namespace {

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

absl::StatusOr<DataType> IdxType(unsigned char code) {
  switch (code) {
    case 0x08:
      return DT_UINT8;
    case 0x09:
      return DT_INT8;
    case 0x0B:
      return DT_INT16;
    case 0x0C:
      return DT_INT32;
    case 0x0D:
      return DT_FLOAT;
    case 0x0E:
      return DT_DOUBLE;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown IDX type code 0x", absl::Hex(code, absl::kZeroPad2)));
  }
}

// Converts `n` big-endian elements of `size` bytes at `src` to host order.
void CopyFromBigEndian(const char* src, char* dst, int64_t n, int size) {
  if (size == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int b = 0; b < size; ++b) dst[i * size + b] = src[i * size + size - 1 - b];
  }
}

}  // namespace

absl::StatusOr<Tensor> ParseIdx(absl::string_view bytes, const std::string& filename) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("IDX file '", filename, "': ", what));
  };
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4) return error(absl::StrCat("too short (", bytes.size(), " bytes)"));
  if (u[0] != 0 || u[1] != 0) {
    return error(absl::StrCat("bad magic 0x", absl::Hex(BigEndian32(u), absl::kZeroPad8),
                              " (expected 0x00000801, 0x00000803, …)"));
  }
  auto dtype = IdxType(u[2]);
  if (!dtype.ok()) return error(dtype.status().message());
  const int ndims = u[3];
  if (ndims < 1 || ndims > 8) return error(absl::StrCat("unsupported rank ", ndims));
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (bytes.size() < header) {
    return error(absl::StrCat("truncated header: ", bytes.size(), " bytes, need ", header));
  }
  const int elem_size = DataTypeSize(*dtype);
  const uint64_t data_bytes = bytes.size() - header;
  TensorShape shape;
  uint64_t num = 1;
  for (int i = 0; i < ndims; ++i) {
    const uint64_t d = BigEndian32(u + 4 + 4 * i);
    shape.AddDim(static_cast<int64_t>(d));
    // Every product stays <= data_bytes (< 2^63), so nothing overflows.
    if (d != 0 && num > data_bytes / elem_size / d) {
      return error(absl::StrCat("dims ", shape.DebugString(), "… need more than the ", data_bytes,
                                " data bytes present (truncated or bad dims)"));
    }
    num *= d;
  }
  if (num * elem_size != data_bytes) {
    return error(absl::StrCat("dims ", shape.DebugString(), " need ", num * elem_size,
                              " data bytes, file has ", data_bytes,
                              num * elem_size > data_bytes ? " (truncated)" : ""));
  }
  Tensor t(*dtype, shape);
  CopyFromBigEndian(bytes.data() + header, t.raw_data(), static_cast<int64_t>(num), elem_size);
  return t;
}

absl::StatusOr<Tensor> ReadIdxFile(const std::string& filename) {
  auto bytes = ReadFileBytes(filename);
  if (!bytes.ok()) return bytes.status();
  if (IsGzip(*bytes)) {
    auto raw = Gunzip(*bytes, filename);
    if (!raw.ok()) return raw.status();
    return ParseIdx(*raw, filename);
  }
  return ParseIdx(*bytes, filename);
}

}  // namespace data
}  // namespace graphrun
