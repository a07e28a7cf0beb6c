// `graphrun train --export_graph`: the trained MLP as a frozen inference
// graph. In a fresh session it classifies a test set (1234 Fashion-MNIST
// test images: the evaluation's last batch is short) exactly as the
// training run's evaluation did (same count right), and
// `graphrun run` on it prints the same predictions. A resumed run at the
// same step exports the same graph as text.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/client_session.h"
#include "client/ops.h"
#include "client/trainer/trainer.h"
#include "distributed/process_util.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "tools/npy.h"
#include "tools/train_command.h"
#include "util/json.h"

namespace graphrun {
namespace tools {

using client::trainer::Train;

using distributed::SpawnProcess;
namespace {

namespace ops = client::ops;

const char kData[] = "/usr/share/datasets/fashion-mnist";

std::string TempDir(const std::string& name) {
  std::string base = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string dir = base + "/" + name + "_XXXXXX";
  return mkdtemp(dir.data());
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// `n` records of the test set in `dir`, read with the engine's own IDX
// dataset: images uint8 [n, 28, 28], labels uint8 [n].
std::pair<Tensor, Tensor> TestSet(const std::string& dir, int64_t n) {
  client::Scope root = client::Scope::NewRootScope();
  std::vector<Tensor> out;
  const std::string stems[] = {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  const std::vector<PartialShape> shapes = {PartialShape({28, 28}), PartialShape({})};
  for (int k = 0; k < 2; ++k) {
    std::string file = dir + "/" + stems[k];
    if (!std::filesystem::exists(file)) file += ".gz";
    const PartialShape& shape = shapes[k];
    const std::vector<DataType> u8 = {DT_UINT8};
    auto ds = ops::IdxDataset(root, file, ops::IdxDataset::OutputTypes(u8).OutputShapes({shape}));
    std::vector<int64_t> dims = {n};
    for (int64_t d : shape.dims()) dims.push_back(d);
    auto batched = ops::BatchDatasetV2(root, ds, n, true, u8, {PartialShape(dims)});
    auto it = ops::IteratorV2(root, u8, {PartialShape(dims)});
    auto make = ops::MakeIterator(root, batched, it);
    auto next = ops::IteratorGetNext(root, it, u8, {PartialShape(dims)});
    client::ClientSession session(root);
    EXPECT_TRUE(session.Run({}, {}, {make.operation}).ok());
    auto r = session.Run({next[0]});
    EXPECT_TRUE(r.ok()) << r.status();
    out.push_back(r.ok() ? (*r)[0] : Tensor());
  }
  return {out[0], out[1]};
}

// An uncompressed IDX file of `t` (uint8): magic, big-endian dims, bytes.
void WriteIdx(const std::string& path, const Tensor& t) {
  std::string bytes = {0, 0, 0x08, static_cast<char>(t.shape().dims())};
  for (int64_t d : t.shape().dim_sizes()) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(d >> shift));
  }
  bytes.append(reinterpret_cast<const char*>(t.base<uint8_t>()), t.NumElements());
  std::ofstream(path, std::ios::binary) << bytes;
}

// The first `n` records of a tensor.
Tensor Head(const Tensor& t, int64_t n) {
  std::vector<int64_t> dims(t.shape().dim_sizes().begin(), t.shape().dim_sizes().end());
  const int64_t row = t.NumElements() / dims[0];
  dims[0] = n;
  Tensor out(t.dtype(), TensorShape(dims));
  std::memcpy(out.base<uint8_t>(), t.base<uint8_t>(), n * row);
  return out;
}

// Runs `graphrun` with `args`; its stdout+stderr and exit code.
std::pair<int, std::string> Graphrun(const std::vector<std::string>& args, const std::string& dir) {
  const std::string log = dir + "/graphrun_run.log";
  auto pid = SpawnProcess(std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/tools/graphrun",
                          args, {}, log);
  if (!pid.ok()) return {-1, std::string(pid.status().message())};
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (waitpid(*pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(*pid, SIGKILL);
      waitpid(*pid, &status, 0);
      return {-1, "graphrun run did not finish in 60 s"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(log)};
}

TEST(ExportTest, FrozenGraphClassifiesAsTheTrainedModel) {
  if (!std::filesystem::exists(std::string(kData) + "/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "no " << kData;
  }
  // The training set as shipped; a test set of 1234 images (two batches of
  // the evaluation's 500 and a short one), uncompressed.
  const std::string dir = TempDir("export");
  const std::string data = dir + "/data";
  std::filesystem::create_directories(data);
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    std::filesystem::create_symlink(std::string(kData) + "/" + f, data + "/" + f);
  }
  const int64_t n = 1234;
  {
    auto [all_images, all_labels] = TestSet(kData, 10000);
    WriteIdx(data + "/t10k-images-idx3-ubyte", Head(all_images, n));
    WriteIdx(data + "/t10k-labels-idx1-ubyte", Head(all_labels, n));
  }
  TrainConfig c;
  c.data_dir = data;
  c.local = true;
  c.steps = 150;
  c.checkpoint_dir = dir + "/ckpt";
  c.export_graph = c.checkpoint_dir + "/mlp.pb";  // a directory the run makes
  c.export_saved_model = dir + "/saved_model";
  auto r = Train(c, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->test_accuracy.has_value());
  EXPECT_EQ(r->exported_graph, c.export_graph);
  EXPECT_GT(*r->test_accuracy, 0.75);

  tensorflow::GraphDef graph;
  ASSERT_TRUE(graph.ParseFromString(ReadFile(c.export_graph)));
  int consts = 0;
  for (const auto& n : graph.node()) {
    EXPECT_NE(n.op(), "VarHandleOp") << n.name();
    EXPECT_NE(n.name(), "labels");  // the loss head is pruned with it
    EXPECT_TRUE(n.device().empty()) << n.name();
    consts += n.op() == "Const" && n.name().find("ReadVariableOp") != std::string::npos;
  }
  EXPECT_EQ(consts, 6);  // 3 kernels + 3 biases

  // In a fresh session: the same number right as the run's evaluation.
  auto [images, labels] = TestSet(data, n);
  ASSERT_EQ(images.shape(), TensorShape({n, 28, 28}));
  auto session = NewSession(SessionOptions());
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Create(graph).ok());
  auto out = (*session)->Run({{"images", images}}, {"predictions", "probabilities"});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), TensorShape({n}));
  ASSERT_EQ((*out)[1].shape(), TensorShape({n, 10}));
  const int64_t* pred = (*out)[0].base<int64_t>();
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) right += pred[i] == labels.base<uint8_t>()[i];
  EXPECT_EQ(right, static_cast<int64_t>(std::llround(*r->test_accuracy * n)));

  // `graphrun run` on the file: the same predictions for the first 100.
  ASSERT_TRUE(WriteNpyFile(dir + "/first100.npy", Head(images, 100)).ok());
  auto [code, text] = Graphrun({"run", c.export_graph, "--feed", "images=@" + dir + "/first100.npy",
                                "--fetch", "predictions", "--format=json"},
                               dir);
  ASSERT_EQ(code, 0) << text;
  auto json = ParseJson(text);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << text;
  const JsonValue* fetched = json->Find("fetches");
  ASSERT_NE(fetched, nullptr);
  const JsonValue* p = fetched->Find("predictions:0");
  ASSERT_NE(p, nullptr) << text;
  const JsonValue* values = p->Find("values");
  ASSERT_NE(values, nullptr);
  ASSERT_EQ(values->items().size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(values->items()[i].number_text(), std::to_string(pred[i])) << i;
  }

  // The SavedModel, through `graphrun run DIR --signature`: the same
  // predictions, keyed by the signature's output key.
  EXPECT_EQ(r->exported_saved_model, c.export_saved_model);
  auto [sm_code, sm_text] =
      Graphrun({"run", c.export_saved_model, "--signature=serving_default", "--feed",
                "images=@" + dir + "/first100.npy", "--fetch", "classes", "--format=json"},
               dir);
  ASSERT_EQ(sm_code, 0) << sm_text;
  auto sm_json = ParseJson(sm_text);
  ASSERT_TRUE(sm_json.ok()) << sm_json.status() << "\n" << sm_text;
  const JsonValue* classes = sm_json->Find("fetches")->Find("classes");
  ASSERT_NE(classes, nullptr) << sm_text;
  ASSERT_EQ(classes->Find("values")->items().size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(classes->Find("values")->items()[i].number_text(), std::to_string(pred[i])) << i;
  }

  // Resumed at the same step: nothing to train, the same graph, as text.
  c.export_graph = dir + "/mlp.pbtxt";
  auto again = Train(c, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->restored_from_step, std::optional<int64_t>(150));
  tensorflow::GraphDef from_text;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(ReadFile(c.export_graph), &from_text));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(graph, from_text));
}

// A run that writes no checkpoints still exports a SavedModel (its
// weights go through a temporary checkpoint, removed afterwards), and the
// model's probabilities sum to 1 for each image.
TEST(ExportTest, SavedModelWithoutCheckpoints) {
  if (!std::filesystem::exists(std::string(kData) + "/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "no " << kData;
  }
  const std::string dir = TempDir("export_nockpt");
  TrainConfig c;
  c.data_dir = kData;
  c.local = true;
  c.steps = 40;
  c.checkpoint_dir = "";
  c.export_saved_model = dir + "/model";
  auto r = Train(c, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->checkpoint, "");
  EXPECT_EQ(r->exported_saved_model, c.export_saved_model);
  EXPECT_TRUE(std::filesystem::exists(dir + "/model/saved_model.pb"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/model/variables/variables.index"));

  auto [images, labels] = TestSet(kData, 3);
  ASSERT_TRUE(WriteNpyFile(dir + "/three.npy", images).ok());
  auto [code, text] = Graphrun({"run", c.export_saved_model, "--signature", "serving_default",
                                "--feed", "images=@" + dir + "/three.npy", "--format=json"},
                               dir);
  ASSERT_EQ(code, 0) << text;
  auto json = ParseJson(text);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << text;
  const JsonValue* probs = json->Find("fetches")->Find("probabilities");
  ASSERT_NE(probs, nullptr) << text;
  ASSERT_EQ(probs->Find("values")->items().size(), 30u);
  for (int i = 0; i < 3; ++i) {
    double sum = 0;
    for (int k = 0; k < 10; ++k) {
      sum += std::stod(probs->Find("values")->items()[i * 10 + k].number_text());
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << i;
  }
  ASSERT_NE(json->Find("fetches")->Find("classes"), nullptr) << text;
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
