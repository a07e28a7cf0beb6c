// ClientSession: runs the graph of a Scope in a Session (runtime/session.h).
//
// The session is created from SessionOptions (options.target "" for the
// in-process session; "grpc://host:port" is passed through to NewSession,
// which the distributed runtime serves). Every Run() first sends the nodes
// added to the scope's graph since the previous Run (Session::Create the
// first time, Extend afterwards), so building and running may alternate.
//
// Errors: a scope holding an error, a session that failed to start, or a
// failing step make Run() return that status (the scope's error names the
// op that failed to build).
//
// Thread-safety: Run() may be called from several threads, but not while
// the scope's graph is being built.
#ifndef GRAPHRUN_CLIENT_CLIENT_SESSION_H_
#define GRAPHRUN_CLIENT_CLIENT_SESSION_H_

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "client/operation.h"
#include "client/scope.h"
#include "graph/proto/config.pb.h"
#include "runtime/session.h"

namespace graphrun {
namespace client {

class ClientSession {
 public:
  // Values to feed: an Output (usually a Placeholder) -> a Tensor or literal.
  using FeedType = std::unordered_map<Output, Input::Initializer, OutputHash>;

  explicit ClientSession(const Scope& scope, const SessionOptions& options = {});
  ~ClientSession();
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;

  // Computes `fetches` (returned in order) and runs `targets` for their
  // effects, with `feeds` replacing the fed outputs' values.
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Output>& fetches) const;
  absl::StatusOr<std::vector<Tensor>> Run(const FeedType& feeds,
                                          const std::vector<Output>& fetches) const;
  absl::StatusOr<std::vector<Tensor>> Run(const FeedType& feeds, const std::vector<Output>& fetches,
                                          const std::vector<Operation>& targets) const;
  // As above with RunOptions (trace level, timeout); `metadata` (may be
  // null) receives step stats and partition graphs as the options ask.
  absl::StatusOr<std::vector<Tensor>> Run(const FeedType& feeds, const std::vector<Output>& fetches,
                                          const std::vector<Operation>& targets,
                                          const tensorflow::RunOptions& options,
                                          tensorflow::RunMetadata* metadata) const;

  // The underlying session (null if it failed to start).
  Session* session() const { return session_.get(); }

 private:
  // Sends nodes added since the last call.
  absl::Status ExtendIfNeeded() const;

  Scope scope_;
  absl::Status start_status_;
  std::unique_ptr<Session> session_;
  mutable std::mutex mu_;
  mutable int sent_node_ids_ = 0;   // node ids below this are in the session
  mutable int sent_functions_ = 0;  // the library's first functions are in the session
  mutable bool created_ = false;
};

}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_CLIENT_SESSION_H_
