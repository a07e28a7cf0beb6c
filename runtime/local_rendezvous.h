// An in-process Rendezvous for one step: a table from key to either a sent
// value waiting for its Recv, or a Recv waiting for its value.
//
// Thread-safe.
#ifndef GRAPHRUN_RUNTIME_LOCAL_RENDEZVOUS_H_
#define GRAPHRUN_RUNTIME_LOCAL_RENDEZVOUS_H_

#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "kernels/framework/rendezvous.h"

namespace graphrun {

class LocalRendezvous : public Rendezvous {
 public:
  LocalRendezvous() = default;
  ~LocalRendezvous() override;

  absl::Status Send(const ParsedKey& key, const Args& args, const Tensor& value,
                    bool is_dead) override;
  void RecvAsync(const ParsedKey& key, const Args& args, DoneCallback done) override;
  void StartAbort(const absl::Status& status) override;

 private:
  struct Item {
    bool has_value = false;
    Tensor value;
    bool is_dead = false;
    DoneCallback waiter;
    CancellationManager* cm = nullptr;
    CancellationToken token = 0;
  };
  std::mutex mu_;
  absl::Status abort_status_;
  absl::flat_hash_map<std::string, Item> table_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_LOCAL_RENDEZVOUS_H_
