// Rendezvous: where a Send and its Recv meet. Keys name the producing
// device and its incarnation, the consuming device, the edge, and the loop
// frame/iteration:  "src_device;src_incarnation_hex;dst_device;edge_name;frame:iter".
// The local implementation lives in runtime/; the distributed runtime adds
// a remote one behind the same interface.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_RENDEZVOUS_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "kernels/framework/cancellation.h"

namespace graphrun {

// Position inside v1 while-loop frames; root frame is {0, 0}.
struct FrameAndIter {
  uint64_t frame_id = 0;
  int64_t iter_id = 0;
  bool operator==(const FrameAndIter& o) const {
    return frame_id == o.frame_id && iter_id == o.iter_id;
  }
};

class Rendezvous {
 public:
  struct ParsedKey {
    std::string src_device;
    uint64_t src_incarnation = 0;
    std::string dst_device;
    std::string edge_name;
    FrameAndIter frame_iter;
    std::string full_key;  // the unparsed key
  };
  struct Args {
    CancellationManager* cancellation_manager = nullptr;
  };
  using DoneCallback =
      std::function<void(const absl::Status& status, const Tensor& value, bool is_dead)>;

  virtual ~Rendezvous() = default;

  static std::string CreateKey(const std::string& src_device, uint64_t src_incarnation,
                               const std::string& dst_device, const std::string& edge_name,
                               const FrameAndIter& frame_iter);
  // InvalidArgument for a malformed key.
  static absl::StatusOr<ParsedKey> ParseKey(const std::string& key);

  // Delivers `value` (or a dead token) under `key`. Never blocks.
  // InvalidArgument if the key was already sent in this rendezvous;
  // the abort status after StartAbort.
  virtual absl::Status Send(const ParsedKey& key, const Args& args, const Tensor& value,
                            bool is_dead) = 0;
  // Calls `done` once, when the value for `key` is available, or with an
  // error when aborted or cancelled.
  virtual void RecvAsync(const ParsedKey& key, const Args& args, DoneCallback done) = 0;
  // Fails every pending and future Recv with `status`.
  virtual void StartAbort(const absl::Status& status) = 0;

  // Blocking receive with an optional timeout (DeadlineExceeded).
  absl::Status Recv(const ParsedKey& key, const Args& args, Tensor* value, bool* is_dead,
                    int64_t timeout_ms = 0);
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_RENDEZVOUS_H_
