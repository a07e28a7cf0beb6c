// Credentials end to end, with real task processes (`graphrun server`, a
// PS and a worker) and certificates made by `graphrun tls init`:
//   - mutual TLS: a client with a host certificate of the cluster CA runs
//     steps whose tensors cross from the PS to the worker (gRPC and data
//     channel, both TLS); a client without certificates, and one with a
//     certificate of another CA, are refused and learn nothing (no task
//     name); the cluster keeps serving;
//   - a token: the same with the right token, a wrong one and none;
//   - --allowed_dirs: SaveV2 and RestoreV2 on the PS work in the allowed
//     directory and are PermissionDenied (naming the node and the path)
//     anywhere else, and the server keeps serving.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/launcher_link.h"
#include "distributed/process_util.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "tests/distributed/ps_worker_testlib.h"
#include "util/tls_credentials.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;

using test::TestTmpDir;
std::string Graphrun() { return test::GraphrunBinary(); }
std::string TmpDir() { return TestTmpDir(); }

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `graphrun ARGS...` to completion (bounded); its exit code.
int RunGraphrun(const std::vector<std::string>& args, const std::string& log) {
  auto pid = SpawnProcess(Graphrun(), args, {}, log);
  if (!pid.ok()) return -1;
  for (int i = 0; i < 600; ++i) {
    int st = 0;
    if (waitpid(*pid, &st, WNOHANG) == *pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    usleep(50000);
  }
  kill(*pid, SIGKILL);
  waitpid(*pid, nullptr, 0);
  return -1;
}

// A session on the worker's master with `so`'s credentials; runs one step.
absl::Status RunStep(const std::string& target, SessionOptions so, float* sum = nullptr) {
  RegisterGrpcSession();
  so.target = target;
  auto s = NewSession(so);
  if (!s.ok()) return s.status();
  if (absl::Status c = (*s)->Create(test::CrossTaskGraph(2.5f)); !c.ok()) return c;
  auto r = (*s)->Run({}, {"sum"}, {});
  if (!r.ok()) return r.status();
  if (sum != nullptr) *sum = (*r)[0].scalar<float>();
  return absl::OkStatus();
}

TEST(SecureClusterTest, MutualTlsServesTheClusterAndRefusesStrangers) {
  const std::string certs = TmpDir() + "/secure_cluster_certs";
  const std::string other = TmpDir() + "/secure_cluster_other_ca";
  ASSERT_EQ(RunGraphrun({"tls", "init", certs, "--hosts=127.0.0.1,client"}, TmpDir() + "/tls1.log"),
            0)
      << ReadAll(TmpDir() + "/tls1.log");
  ASSERT_EQ(RunGraphrun({"tls", "init", other, "--hosts=127.0.0.1"}, TmpDir() + "/tls2.log"), 0);
  // Keys are the user's alone.
  struct stat st;
  ASSERT_EQ(stat((certs + "/127.0.0.1.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);

  test::PsAndWorker cluster;
  ASSERT_TRUE(cluster
                  .Start("secure_tls",
                         {"--tls_ca=" + certs + "/ca.crt", "--tls_cert=" + certs + "/127.0.0.1.crt",
                          "--tls_key=" + certs + "/127.0.0.1.key"},
                         {})
                  .ok());
  SessionOptions good;
  good.tls =
      LoadTlsCredentials(certs + "/ca.crt", certs + "/client.crt", certs + "/client.key").value();
  float sum = 0;
  absl::Status s = RunStep(cluster.target(), good, &sum);
  ASSERT_TRUE(s.ok()) << s << "\n" << ReadAll(cluster.all[1].log_file);
  EXPECT_EQ(sum, 2.5f * 1048576);

  // No certificate at all: the handshake fails; nothing about the cluster
  // comes back.
  s = RunStep(cluster.target(), SessionOptions());
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(std::string(s.message()).find("/job:"), std::string::npos) << s;
  // A certificate of another CA.
  SessionOptions stranger;
  stranger.tls =
      LoadTlsCredentials(other + "/ca.crt", other + "/127.0.0.1.crt", other + "/127.0.0.1.key")
          .value();
  s = RunStep(cluster.target(), stranger);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(std::string(s.message()).find("/job:"), std::string::npos) << s;
  // Through the CLI, as a user would: refused, exit 1.
  const std::string graph = TmpDir() + "/secure_const.pbtxt";
  std::ofstream(graph) << R"(node { name: "c" op: "Const"
    attr { key: "dtype" value { type: DT_FLOAT } }
    attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } })";
  EXPECT_EQ(
      RunGraphrun({"run", graph, "--fetch=c", "--target=" + cluster.target(), "--timeout_ms=5000"},
                  TmpDir() + "/secure_cli_stranger.log"),
      1);
  EXPECT_EQ(RunGraphrun({"run", graph, "--fetch=c", "--target=" + cluster.target(),
                         "--tls_ca=" + certs + "/ca.crt", "--tls_cert=" + certs + "/client.crt",
                         "--tls_key=" + certs + "/client.key"},
                        TmpDir() + "/secure_cli_client.log"),
            0)
      << ReadAll(TmpDir() + "/secure_cli_client.log");
  // The cluster still serves its own.
  s = RunStep(cluster.target(), good, &sum);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(sum, 2.5f * 1048576);
}

TEST(SecureClusterTest, TokenServesTheClusterAndRefusesStrangers) {
  const std::string token_file = TmpDir() + "/secure_token";
  std::ofstream(token_file) << "  the-cluster-token\n";
  test::PsAndWorker cluster;
  ASSERT_TRUE(cluster.Start("secure_token", {"--auth_token_file=" + token_file}, {}).ok());
  SessionOptions good;
  good.auth_token = "the-cluster-token";
  float sum = 0;
  absl::Status s = RunStep(cluster.target(), good, &sum);
  ASSERT_TRUE(s.ok()) << s << "\n" << ReadAll(cluster.all[1].log_file);
  EXPECT_EQ(sum, 2.5f * 1048576);

  SessionOptions wrong;
  wrong.auth_token = "a-guess";
  for (const SessionOptions& so : {wrong, SessionOptions()}) {
    s = RunStep(cluster.target(), so);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_EQ(std::string(s.message()).find("/job:"), std::string::npos) << s;
  }
  s = RunStep(cluster.target(), good, &sum);
  EXPECT_TRUE(s.ok()) << s;
}

// A SaveV2 of one float on the PS into `prefix`, or a RestoreV2 of it.
tensorflow::GraphDef CheckpointGraph(const std::string& prefix, bool restore) {
  tensorflow::GraphDef def;
  const std::string ps = "/job:ps/task:0";
  std::string text = absl::StrCat(R"(
node { name: "prefix" op: "Const" device: ")",
                                  ps, R"("
  attr { key: "dtype" value { type: DT_STRING } }
  attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { } string_val: ")",
                                  prefix,
                                  R"(" } } } }
node { name: "names" op: "Const" device: ")",
                                  ps, R"("
  attr { key: "dtype" value { type: DT_STRING } }
  attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { dim { size: 1 } }
    string_val: "w" } } } }
node { name: "slices" op: "Const" device: ")",
                                  ps, R"("
  attr { key: "dtype" value { type: DT_STRING } }
  attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { dim { size: 1 } }
    string_val: "" } } } }
node { name: "w" op: "Const" device: ")",
                                  ps, R"("
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 4.5 } } } })");
  if (restore) {
    absl::StrAppend(&text, R"(
node { name: "restore" op: "RestoreV2" input: "prefix" input: "names" input: "slices"
  device: ")",
                    ps, R"(" attr { key: "dtypes" value { list { type: DT_FLOAT } } } })");
  } else {
    absl::StrAppend(&text, R"(
node { name: "save" op: "SaveV2" input: "prefix" input: "names" input: "slices" input: "w"
  device: ")",
                    ps, R"(" attr { key: "dtypes" value { list { type: DT_FLOAT } } } })");
  }
  google::protobuf::TextFormat::ParseFromString(text, &def);
  return def;
}

// A session on the cluster at `target` with the cluster's token, holding
// `def`.
absl::StatusOr<std::unique_ptr<Session>> TokenSession(const std::string& target,
                                                      const tensorflow::GraphDef& def) {
  RegisterGrpcSession();
  SessionOptions so;
  so.target = target;
  so.auth_token = "the-cluster-token";
  auto s = NewSession(so);
  if (!s.ok()) return s.status();
  if (absl::Status c = (*s)->Create(def); !c.ok()) return c;
  return std::move(*s);
}

absl::Status RunCheckpointOp(const std::string& target, const std::string& prefix, bool restore,
                             float* restored = nullptr) {
  auto s = TokenSession(target, CheckpointGraph(prefix, restore));
  if (!s.ok()) return s.status();
  auto r = restore ? (*s)->Run({}, {"restore"}, {}) : (*s)->Run({}, {}, {"save"});
  if (!r.ok()) return r.status();
  if (restored != nullptr) *restored = (*r)[0].scalar<float>();
  return absl::OkStatus();
}

TEST(SecureClusterTest, FileOpsWorkOnlyUnderAllowedDirs) {
  const std::string allowed = TmpDir() + "/allowed_ckpt";
  const std::string elsewhere = TmpDir() + "/not_allowed";
  std::filesystem::remove_all(allowed);
  std::filesystem::remove_all(elsewhere);
  std::filesystem::create_directories(allowed);
  std::filesystem::create_directories(elsewhere);
  const std::string token_file = TmpDir() + "/secure_token_dirs";
  std::ofstream(token_file) << "the-cluster-token\n";
  test::PsAndWorker cluster;
  ASSERT_TRUE(cluster
                  .Start("secure_dirs",
                         {"--auth_token_file=" + token_file, "--allowed_dirs=" + allowed}, {})
                  .ok());
  ASSERT_TRUE(RunCheckpointOp(cluster.target(), allowed + "/model.ckpt-1", false).ok());
  EXPECT_TRUE(std::filesystem::exists(allowed + "/model.ckpt-1.index"));

  for (const std::string& bad :
       {elsewhere + "/model.ckpt-1", allowed + "/../not_allowed/model.ckpt-2"}) {
    absl::Status s = RunCheckpointOp(cluster.target(), bad, false);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("node 'save' (op SaveV2)"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("'" + bad + "'"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere));
  absl::Status s = RunCheckpointOp(cluster.target(), "/etc/passwd", true);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'restore' (op RestoreV2)"));

  // Still serving: the checkpoint saved in the allowed directory restores.
  float restored = 0;
  s = RunCheckpointOp(cluster.target(), allowed + "/model.ckpt-1", true, &restored);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(restored, 4.5f);
}

// A string Const on the PS, as pbtxt.
std::string PsString(const std::string& name, const std::vector<std::string>& values,
                     bool scalar = true) {
  std::string vals;
  for (const std::string& v : values) absl::StrAppend(&vals, " string_val: \"", v, "\"");
  return absl::StrCat(R"(node { name: ")", name, R"(" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_STRING } }
  attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { )",
                      scalar ? "" : absl::StrCat("dim { size: ", values.size(), " }"), " }", vals,
                      R"( } } } }
)");
}

std::string PsInt64(const std::string& name, int64_t v) {
  return absl::StrCat(R"(node { name: ")", name, R"(" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_INT64 } }
  attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { } int64_val: )",
                      v, R"( } } } }
)");
}

// Runs `graph` (pbtxt) on the cluster with `target` as the target node.
absl::Status RunTarget(const std::string& cluster_target, const std::string& graph,
                       const std::string& target) {
  tensorflow::GraphDef def;
  if (!google::protobuf::TextFormat::ParseFromString(graph, &def)) {
    return absl::InternalError("the test's graph does not parse");
  }
  auto s = TokenSession(cluster_target, def);
  if (!s.ok()) return s.status();
  return (*s)->Run({}, {}, {target}).status();
}

// The other file-touching ops on a server: MergeV2Checkpoints (sources and
// destination), the IDX and fixed-length-record dataset readers and a
// file-backed CacheDataset. Outside --allowed_dirs each is PermissionDenied
// naming the node and the path, and touches nothing; inside, the path is
// let through (a missing file is then NotFound, a merge succeeds); the
// server keeps serving throughout.
TEST(SecureClusterTest, MergeAndDatasetReadersWorkOnlyUnderAllowedDirs) {
  const std::string allowed = TmpDir() + "/allowed_readers";
  const std::string elsewhere = TmpDir() + "/readers_elsewhere";
  std::filesystem::remove_all(allowed);
  std::filesystem::remove_all(elsewhere);
  std::filesystem::create_directories(allowed);
  std::filesystem::create_directories(elsewhere);
  // A file outside that a confined graph must not read.
  std::ofstream(elsewhere + "/secret.idx") << "not for graphs";
  const std::string token_file = TmpDir() + "/secure_token_readers";
  std::ofstream(token_file) << "the-cluster-token\n";
  test::PsAndWorker cluster;
  ASSERT_TRUE(cluster
                  .Start("secure_readers",
                         {"--auth_token_file=" + token_file, "--allowed_dirs=" + allowed}, {})
                  .ok());
  const std::string t = cluster.target();
  ASSERT_TRUE(RunCheckpointOp(t, allowed + "/part-0", false).ok());

  auto merge = [&](const std::string& source, const std::string& dest) {
    return RunTarget(t,
                     PsString("sources", {source}, false) + PsString("dest", {dest}) +
                         R"(node { name: "merge" op: "MergeV2Checkpoints" input: "sources"
  input: "dest" device: "/job:ps/task:0" })",
                     "merge");
  };
  auto idx = [&](const std::string& file) {
    return RunTarget(t, PsString("file", {file}) + R"(node { name: "idx" op: "IdxDataset"
  input: "file" device: "/job:ps/task:0" })",
                     "idx");
  };
  auto fixed = [&](const std::string& file) {
    return RunTarget(t,
                     PsString("files", {file}, false) + PsInt64("header", 0) +
                         PsInt64("record", 4) + PsInt64("footer", 0) + PsInt64("buffer", 0) +
                         R"(node { name: "records" op: "FixedLengthRecordDataset" input: "files"
  input: "header" input: "record" input: "footer" input: "buffer" device: "/job:ps/task:0" })",
                     "records");
  };
  auto cache = [&](const std::string& file) {
    return RunTarget(t,
                     PsString("items", {"a", "b"}, false) + PsString("file", {file}) +
                         R"(node { name: "slices" op: "TensorSliceDataset" input: "items"
  device: "/job:ps/task:0"
  attr { key: "Toutput_types" value { list { type: DT_STRING } } }
  attr { key: "output_shapes" value { list { shape { } } } } }
node { name: "cache" op: "CacheDataset" input: "slices" input: "file" device: "/job:ps/task:0"
  attr { key: "output_types" value { list { type: DT_STRING } } }
  attr { key: "output_shapes" value { list { shape { } } } } })",
                     "cache");
  };
  struct Refused {
    absl::Status status;
    std::string node, path;
  };
  const std::vector<Refused> refused = {
      {merge(allowed + "/part-0", elsewhere + "/merged"), "node 'merge' (op MergeV2Checkpoints)",
       elsewhere + "/merged"},
      {merge(elsewhere + "/part-0", allowed + "/merged"), "node 'merge' (op MergeV2Checkpoints)",
       elsewhere + "/part-0"},
      {idx(elsewhere + "/secret.idx"), "node 'idx' (op IdxDataset)", elsewhere + "/secret.idx"},
      {idx("/etc/passwd"), "node 'idx' (op IdxDataset)", "/etc/passwd"},
      {fixed(elsewhere + "/secret.idx"), "node 'records' (op FixedLengthRecordDataset)",
       elsewhere + "/secret.idx"},
      {cache(elsewhere + "/cache"), "node 'cache' (op CacheDataset)", elsewhere + "/cache"},
  };
  for (const Refused& r : refused) {
    std::cout << r.status << "\n";
    EXPECT_EQ(r.status.code(), absl::StatusCode::kPermissionDenied) << r.status;
    EXPECT_THAT(std::string(r.status.message()), HasSubstr(r.node)) << r.status;
    EXPECT_THAT(std::string(r.status.message()), HasSubstr("'" + r.path + "'")) << r.status;
  }
  // Nothing was written outside (the secret alone is there).
  int outside = 0;
  for (const auto& e : std::filesystem::directory_iterator(elsewhere)) outside += !e.path().empty();
  EXPECT_EQ(outside, 1);
  // Inside, the same ops get past the check: a missing file is NotFound,
  // a merge of the saved shard succeeds.
  absl::Status missing = idx(allowed + "/missing.idx");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  absl::Status merged = merge(allowed + "/part-0", allowed + "/merged");
  EXPECT_TRUE(merged.ok()) << merged;
  EXPECT_TRUE(std::filesystem::exists(allowed + "/merged.index"));
  absl::Status cached = cache(allowed + "/cache");
  EXPECT_TRUE(cached.ok()) << cached;
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
