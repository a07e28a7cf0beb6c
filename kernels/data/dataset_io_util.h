// File access for the input pipeline: whole-file reads, gzip decoding
// (zlib) and the IDX format of MNIST / Fashion-MNIST.
//
// IDX: a 4-byte magic 0x00 0x00 <type> <ndims>, then ndims big-endian
// uint32 dimensions, then the data, big-endian, row-major. Types:
// 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
// 0x0E float64. MNIST images are 0x00000803 [N, 28, 28] uint8, labels
// 0x00000801 [N] uint8.
//
// Every error names the file; malformed input is an error, never a crash.
// Thread-safe (no shared state).
#ifndef GRAPHRUN_KERNELS_DATA_DATASET_IO_UTIL_H_
#define GRAPHRUN_KERNELS_DATA_DATASET_IO_UTIL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/tensor.h"

namespace graphrun {
namespace data {

// The file's bytes. NotFound when it cannot be opened, DataLoss when a
// read fails; both name the file.
absl::StatusOr<std::string> ReadFileBytes(const std::string& filename);

// True when `bytes` starts with the gzip magic 1f 8b.
bool IsGzip(absl::string_view bytes);

// Decompresses gzip data (concatenated members too). InvalidArgument naming
// `filename` for corrupt or truncated data.
absl::StatusOr<std::string> Gunzip(absl::string_view compressed, const std::string& filename);

// Decodes IDX bytes into a tensor of the file's dtype and dims. Rejects a
// bad magic, an unknown type code, zero or more than 8 dims, dims whose
// byte size overflows, and data longer or shorter than the dims say:
// InvalidArgument naming `filename`.
absl::StatusOr<Tensor> ParseIdx(absl::string_view bytes, const std::string& filename);

// Reads an IDX file, gzipped (detected by its magic) or raw.
absl::StatusOr<Tensor> ReadIdxFile(const std::string& filename);

}  // namespace data
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_DATA_DATASET_IO_UTIL_H_
