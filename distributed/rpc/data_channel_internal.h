// Internal to distributed/rpc/data_channel*.cc: the wire format's frames
// and the helpers both ends share.
#ifndef GRAPHRUN_DISTRIBUTED_RPC_DATA_CHANNEL_INTERNAL_H_
#define GRAPHRUN_DISTRIBUTED_RPC_DATA_CHANNEL_INTERNAL_H_

#include <netdb.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "distributed/rpc/secure_stream.h"
#include "graph/tensor.h"

namespace graphrun {
namespace distributed {
namespace data_channel_internal {

constexpr uint32_t kRequestMagic = 0x51445247;   // "GRDQ"
constexpr uint32_t kResponseMagic = 0x50445247;  // "GRDP"
constexpr uint32_t kRecv = 1;
constexpr uint32_t kCancel = 2;
constexpr uint32_t kHello = 3;     // same-host reads: the server's pid and nonce, please
constexpr uint32_t kSameHost = 4;  // the probe worked: answer with addresses
constexpr uint32_t kRelease = 5;   // done reading the payload of response `id`
constexpr uint32_t kPush = 6;      // a tensor for the server's worker: PushHeader follows the key
constexpr uint32_t kDeadPayload = 1;
constexpr uint32_t kProtoPayload = 2;
constexpr uint32_t kRemotePayload = 4;  // payload = its 8-byte address in the server
constexpr uint32_t kHelloReply = 8;     // payload = HelloPayload, or none (reads off)
constexpr uint32_t kMaxDims = 64;
constexpr uint32_t kMaxMessageBytes = 1 << 20;

struct RequestHeader {
  uint32_t magic;
  uint32_t type;
  uint64_t id;
  int64_t step_id;
  uint64_t key_bytes;
};
static_assert(sizeof(RequestHeader) == 32, "packed request header");

struct ResponseHeader {
  uint32_t magic;
  uint32_t flags;
  uint64_t id;
  int32_t code;
  int32_t dtype;
  uint32_t ndims;
  uint32_t message_bytes;
  uint64_t payload_bytes;
};
static_assert(sizeof(ResponseHeader) == 40, "packed response header");

// After a kPush request's key: the tensor's dtype (fixed-size types only),
// then ndims int64 dims and payload_bytes of raw buffer.
struct PushHeader {
  int32_t dtype;
  uint32_t ndims;
  uint64_t payload_bytes;
};
static_assert(sizeof(PushHeader) == 16, "packed push header");

struct HelloPayload {
  int64_t pid;
  uint64_t nonce_address;
  std::array<char, 16> nonce;
};
static_assert(sizeof(HelloPayload) == 32, "packed hello payload");

// A server lets its clients read a payload for at most this long when it
// stops; what is still held then is never freed (the reads stay valid).
constexpr int64_t kReleaseWaitMs = 2000;

inline int64_t NowMs() { return SteadyNowMs(); }

// The bytes of a fixed-size `dtype` tensor of `dims`; an error for other
// types, negative dims and overflow.
absl::StatusOr<uint64_t> PayloadBytes(DataType dtype, const std::vector<int64_t>& dims);
// Copies `bytes` at `remote` in process `pid` into `dst` (cross-memory
// attach), in <= 1 GiB calls, resuming after partial reads.
absl::Status ReadProcessMemory(int pid, char* dst, uint64_t remote, uint64_t bytes);
absl::Status Errno(const std::string& what);
absl::Status Drain(ByteStream* stream, uint64_t n);
void SetNoDelay(int fd);
absl::StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive);

}  // namespace data_channel_internal
}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_DATA_CHANNEL_INTERNAL_H_
