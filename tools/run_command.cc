#include "tools/run_command.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/saved_model.h"
#include "google/protobuf/text_format.h"
#include "graph/function_lowering.h"
#include "graph/graph.h"
#include "graph/ops/all_ops.h"
#include "graph/status.h"
#include "placement/device_spec.h"
#include "runtime/session.h"
#include "tools/feeds.h"
#include "tools/file_util.h"
#include "tools/model_graph.h"
#include "tools/npy.h"
#include "tools/tensor_json.h"
#include "tools/trace.h"
#include "util/auth_token.h"

namespace graphrun {
namespace tools {
namespace {

// Text output prints every value of tensors up to this size.
constexpr int kTextMaxEntries = 1000;

absl::StatusOr<SessionOptions> MakeSessionOptions(const RunRequest& req) {
  SessionOptions options;
  options.target = req.target;
  if (!req.target.empty() && req.target != "local") {
    GR_ASSIGN_OR_RETURN(Credentials creds, LoadCredentials(req.credentials));
    options.auth_token = std::move(creds.auth_token);
    options.tls = std::move(creds.tls);
  }
  tensorflow::ConfigProto& config = options.config;
  for (const auto& [type, n] : req.device_count) (*config.mutable_device_count())[type] = n;
  config.set_allow_soft_placement(req.soft_placement);
  for (const std::string& f : req.device_filters) config.add_device_filters(f);
  config.set_log_device_placement(req.log_device_placement);
  config.set_inter_op_parallelism_threads(req.inter_op_threads);
  config.set_intra_op_parallelism_threads(req.intra_op_threads);
  config.set_operation_timeout_in_ms(req.timeout_ms);
  return options;
}

absl::Status WriteRunMetadata(const std::string& path, const tensorflow::RunMetadata& metadata) {
  std::string bytes;
  if (absl::EndsWith(path, ".pbtxt")) {
    if (!google::protobuf::TextFormat::PrintToString(metadata, &bytes)) {
      return absl::InternalError(absl::StrCat(path, ": cannot print RunMetadata"));
    }
  } else if (!metadata.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat(path, ": cannot serialize RunMetadata"));
  }
  return WriteStringToFile(path, bytes);
}

// The fetched values, labelled by `labels` (tensor names, or a
// signature's output keys).
std::string FormatOutput(const RunRequest& req, const std::vector<std::string>& labels,
                         const std::vector<Tensor>& values) {
  std::string out;
  if (req.format == OutputFormat::kJson) {
    out = "{\"fetches\": {";
    for (size_t i = 0; i < values.size(); ++i) {
      if (i) out += ", ";
      absl::StrAppend(&out, JsonQuote(labels[i]), ": ", TensorToJson(values[i]));
    }
    return out + "}}\n";
  }
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StrAppend(&out, OneLine(labels[i]), " = ", values[i].DebugString(kTextMaxEntries), "\n");
  }
  return out;
}

absl::Status SaveNpys(const RunRequest& req, const std::vector<std::string>& labels,
                      const std::vector<Tensor>& values) {
  if (req.save_npy_dir.empty()) return absl::OkStatus();
  // Signature keys are checked here (fetches were when the flags were read).
  std::map<std::string, std::string> files;
  for (const std::string& label : labels) {
    auto [it, fresh] = files.emplace(NpyFileName(label), label);
    if (!fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat("--save_npy: outputs '", OneLine(it->second), "' and '", OneLine(label),
                       "' would both be written to ", req.save_npy_dir, "/", it->first));
    }
  }
  GR_RETURN_IF_ERROR(CreateDirIfMissing(req.save_npy_dir));
  for (size_t i = 0; i < values.size(); ++i) {
    GR_RETURN_IF_ERROR(
        WriteNpyFile(absl::StrCat(req.save_npy_dir, "/", NpyFileName(labels[i])), values[i]));
  }
  return absl::OkStatus();
}

// The tensor name a signature gives `key`; InvalidArgument listing the
// signature's keys when it has no such key.
// Keys for an error line: sorted, at most 20 of them, escaped (a model may
// hold 100,000 signatures, or keys with newlines).
std::string SomeKeys(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  constexpr size_t kShown = 20;
  const size_t more = keys.size() > kShown ? keys.size() - kShown : 0;
  if (more > 0) keys.resize(kShown);
  std::string out = OneLine(absl::StrJoin(keys, ", "));
  if (more > 0) absl::StrAppend(&out, ", ... (", more, " more)");
  return out;
}

absl::StatusOr<std::string> SignatureTensor(
    const google::protobuf::Map<std::string, tensorflow::TensorInfo>& infos,
    const std::string& signature, const char* what, const std::string& key) {
  auto it = infos.find(key);
  if (it == infos.end()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : infos) keys.push_back(k);
    return absl::InvalidArgumentError(absl::StrCat("signature '", signature, "' has no ", what,
                                                   " '", key, "'; its ", what,
                                                   "s: ", SomeKeys(keys)));
  }
  return CanonicalTensorName(it->second.name());
}

// `graphrun run DIR`: loads the SavedModel (variables restored, init op
// run) and runs one step, by signature keys or by tensor names.
absl::Status ExecuteSavedModelRun(const RunRequest& req, std::ostream& out) {
  if (req.placement.enabled() || !req.target.empty()) {  // RunCommand said so first
    return absl::InvalidArgumentError(
        "a SavedModel runs in a local session: --ps_tasks, --cluster and --target do not apply");
  }
  GR_ASSIGN_OR_RETURN(SessionOptions options, MakeSessionOptions(req));
  GR_ASSIGN_OR_RETURN(LoadedSavedModel model, LoadSavedModel(req.graph_path, req.tags, options));
  std::vector<std::pair<std::string, std::string>> feeds = req.feeds;
  std::vector<std::string> fetches = req.fetches, labels = req.fetches;
  if (!req.signature.empty()) {
    const auto& sigs = model.meta_graph.signature_def();
    auto sig = sigs.find(req.signature);
    if (sig == sigs.end()) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : sigs) keys.push_back(k);
      return absl::NotFoundError(absl::StrCat("SavedModel '", req.graph_path,
                                              "' has no signature '", req.signature,
                                              "'; it has: ", SomeKeys(keys)));
    }
    for (auto& [key, value] : feeds) {
      GR_ASSIGN_OR_RETURN(key, SignatureTensor(sig->second.inputs(), req.signature, "input", key));
    }
    if (labels.empty()) {
      for (const auto& [k, v] : sig->second.outputs()) labels.push_back(k);
      std::sort(labels.begin(), labels.end());
    }
    fetches.clear();
    for (const std::string& key : labels) {
      GR_ASSIGN_OR_RETURN(std::string name,
                          SignatureTensor(sig->second.outputs(), req.signature, "output", key));
      fetches.push_back(name);
    }
  }
  GR_ASSIGN_OR_RETURN(tensorflow::GraphDef def, CanonicalizeGraphDef(model.meta_graph.graph_def(),
                                                                     DefaultOpRegistry(), nullptr));
  FeedResolver resolver(def);
  NamedTensorList values_in;
  for (const auto& [name, value] : feeds) {
    GR_ASSIGN_OR_RETURN(Tensor t, resolver.MakeFeed(name, value));
    values_in.emplace_back(name, std::move(t));
  }
  tensorflow::RunOptions run_options;
  run_options.set_timeout_in_ms(req.timeout_ms);
  auto values = model.session->Run(run_options, values_in, fetches, req.targets, nullptr);
  absl::Status closed = model.session->Close();
  if (!values.ok()) return values.status();
  GR_RETURN_IF_ERROR(closed);
  GR_RETURN_IF_ERROR(SaveNpys(req, labels, *values));
  out << FormatOutput(req, labels, *values);
  out.flush();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<placement::PlacementReport> PlaceOnLocalDevices(
    tensorflow::GraphDef* graph, const PlacementFlags& flags,
    const std::vector<std::string>& fetches) {
  GR_ASSIGN_OR_RETURN(placement::PlacementReport report,
                      ApplyPlacementFlags(graph, flags, fetches));
  std::map<std::string, int> index;
  for (size_t i = 0; i < report.tasks.size(); ++i) {
    index[report.tasks[i].task] = static_cast<int>(i);
  }
  for (tensorflow::NodeDef& n : *graph->mutable_node()) {
    auto it = index.find(placement::TaskOfDevice(n.device()));
    n.set_device(placement::LocalDeviceName("CPU", it == index.end() ? 0 : it->second));
  }
  return report;
}

namespace {
absl::Status ExecuteGraphRun(const RunRequest& req, tensorflow::GraphDef def, std::ostream& out);
}  // namespace

absl::Status ExecuteRun(const RunRequest& req, std::ostream& out) {
  if (IsSavedModelDir(req.graph_path)) return ExecuteSavedModelRun(req, out);
  if (!req.signature.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--signature: '", req.graph_path, "' is not a SavedModel directory (no saved_model.pb)"));
  }
  absl::flat_hash_map<std::string, std::string> origin;
  GR_ASSIGN_OR_RETURN(tensorflow::GraphDef def, ReadModelGraph(req.graph_path, std::cerr, &origin));
  // The session gets the lowered graph: its errors name inlined nodes'
  // functions through `origin`.
  return AnnotateLoweringError(ExecuteGraphRun(req, std::move(def), out), origin);
}

namespace {

absl::Status ExecuteGraphRun(const RunRequest& req, tensorflow::GraphDef def, std::ostream& out) {
  NamedTensorList feeds;
  FeedResolver resolver(def);
  for (const auto& [name, value] : req.feeds) {
    GR_ASSIGN_OR_RETURN(Tensor t, resolver.MakeFeed(name, value));
    feeds.emplace_back(name, std::move(t));
  }

  GR_ASSIGN_OR_RETURN(SessionOptions session_options, MakeSessionOptions(req));
  if (req.placement.enabled()) {
    std::vector<std::string> step = req.fetches;
    step.insert(step.end(), req.targets.begin(), req.targets.end());
    GR_ASSIGN_OR_RETURN(placement::PlacementReport report,
                        PlaceOnLocalDevices(&def, req.placement, step));
    auto& count = (*session_options.config.mutable_device_count())["CPU"];
    count = std::max<int32_t>(count, static_cast<int32_t>(report.tasks.size()));
    if (!req.placement_report_path.empty()) {
      GR_RETURN_IF_ERROR(
          WriteStringToFile(req.placement_report_path, placement::ReportToJson(report)));
    }
  }
  GR_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, NewSession(session_options));
  GR_RETURN_IF_ERROR(session->Create(def));

  tensorflow::RunOptions run_options;
  run_options.set_timeout_in_ms(req.timeout_ms);
  const bool want_metadata = !req.trace_path.empty() || !req.run_metadata_path.empty();
  if (want_metadata) run_options.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
  if (!req.run_metadata_path.empty()) run_options.set_output_partition_graphs(true);
  tensorflow::RunMetadata metadata;
  auto values = session->Run(run_options, feeds, req.fetches, req.targets,
                             want_metadata ? &metadata : nullptr);
  // Close even when the step failed; the step's error is the one to report.
  absl::Status closed = session->Close();
  if (!values.ok()) return values.status();
  GR_RETURN_IF_ERROR(closed);
  if (values->size() != req.fetches.size()) {
    return absl::InternalError(absl::StrCat("session returned ", values->size(), " tensors for ",
                                            req.fetches.size(), " fetches"));
  }

  GR_RETURN_IF_ERROR(SaveNpys(req, req.fetches, *values));
  if (!req.trace_path.empty()) {
    GR_RETURN_IF_ERROR(
        WriteStringToFile(req.trace_path, StepStatsToChromeTrace(metadata.step_stats(), &def)));
  }
  if (!req.run_metadata_path.empty()) {
    GR_RETURN_IF_ERROR(WriteRunMetadata(req.run_metadata_path, metadata));
  }
  out << FormatOutput(req, req.fetches, *values);
  out.flush();
  return absl::OkStatus();
}

}  // namespace

int RunCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  auto req = ParseRunArgs(args);
  if (req.ok() && IsSavedModelDir(req->graph_path) &&
      (req->placement.enabled() || !req->target.empty())) {
    req = absl::InvalidArgumentError(
        "a SavedModel runs in a local session: --ps_tasks, --cluster and --target do not apply");
  }
  if (!req.ok()) {
    err << StatusToLine(req.status()) << "\n";
    return kExitUsage;
  }
  absl::Status s = ExecuteRun(*req, out);
  if (!s.ok()) {
    err << StatusToLine(s) << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace tools
}  // namespace graphrun
