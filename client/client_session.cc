#include "client/client_session.h"

#include "absl/strings/str_cat.h"
#include "graph/status.h"

namespace graphrun {
namespace client {

ClientSession::ClientSession(const Scope& scope, const SessionOptions& options) : scope_(scope) {
  auto s = NewSession(options);
  if (s.ok()) {
    session_ = std::move(*s);
  } else {
    start_status_ = s.status();
  }
}

ClientSession::~ClientSession() {
  if (session_) session_->Close().IgnoreError();
}

absl::Status ClientSession::ExtendIfNeeded() const {
  GR_RETURN_IF_ERROR(start_status_);
  GR_RETURN_IF_ERROR(scope_.status());
  std::lock_guard<std::mutex> lock(mu_);
  const Graph& graph = *scope_.graph();
  const auto& functions = graph.library().function();
  if (created_ && sent_node_ids_ == graph.num_node_ids() && sent_functions_ == functions.size()) {
    return absl::OkStatus();
  }
  tensorflow::GraphDef all;
  graph.ToGraphDef(&all);
  tensorflow::GraphDef delta;
  *delta.mutable_versions() = all.versions();
  for (const auto& nd : all.node()) {
    Node* n = graph.FindNode(nd.name());
    if (n != nullptr && n->id() >= sent_node_ids_) *delta.add_node() = nd;
  }
  // Functions the graph's library gained (an import's, for its call
  // frames): the library only grows, so the new ones are at its end.
  for (int i = sent_functions_; i < functions.size(); ++i) {
    *delta.mutable_library()->add_function() = functions[i];
  }
  if (!created_) {
    GR_RETURN_IF_ERROR(session_->Create(delta));
    created_ = true;
  } else if (delta.node_size() > 0 || delta.library().function_size() > 0) {
    GR_RETURN_IF_ERROR(session_->Extend(delta));
  }
  sent_node_ids_ = graph.num_node_ids();
  sent_functions_ = functions.size();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> ClientSession::Run(const std::vector<Output>& fetches) const {
  return Run(FeedType(), fetches, {}, tensorflow::RunOptions(), nullptr);
}

absl::StatusOr<std::vector<Tensor>> ClientSession::Run(const FeedType& feeds,
                                                       const std::vector<Output>& fetches) const {
  return Run(feeds, fetches, {}, tensorflow::RunOptions(), nullptr);
}

absl::StatusOr<std::vector<Tensor>> ClientSession::Run(
    const FeedType& feeds, const std::vector<Output>& fetches,
    const std::vector<Operation>& targets) const {
  return Run(feeds, fetches, targets, tensorflow::RunOptions(), nullptr);
}

absl::StatusOr<std::vector<Tensor>> ClientSession::Run(const FeedType& feeds,
                                                       const std::vector<Output>& fetches,
                                                       const std::vector<Operation>& targets,
                                                       const tensorflow::RunOptions& options,
                                                       tensorflow::RunMetadata* metadata) const {
  GR_RETURN_IF_ERROR(ExtendIfNeeded());
  NamedTensorList feed_list;
  for (const auto& [out, value] : feeds) {
    if (out.node() == nullptr) return absl::InvalidArgumentError("feed of a null Output");
    if (!value.status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", out.name(), "': ", value.status.message()));
    }
    Tensor t = value.tensor;
    DataType want = BaseType(out.type());
    if (t.dtype() != want) {
      auto cast = internal::CastLiteral(t, want);
      if (!cast.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("feed '", out.name(), "': ", cast.status().message()));
      }
      t = *cast;
    }
    feed_list.emplace_back(out.name(), std::move(t));
  }
  std::vector<std::string> fetch_names, target_names;
  for (const Output& o : fetches) {
    if (o.node() == nullptr) return absl::InvalidArgumentError("fetch of a null Output");
    fetch_names.push_back(o.name());
  }
  for (const Operation& op : targets) {
    if (op.node() == nullptr) return absl::InvalidArgumentError("target is a null Operation");
    target_names.push_back(op.name());
  }
  return session_->Run(options, feed_list, fetch_names, target_names, metadata);
}

}  // namespace client
}  // namespace graphrun
