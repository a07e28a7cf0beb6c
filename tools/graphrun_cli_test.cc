// End-to-end tests of the graphrun binary: runs it as a subprocess on
// examples/ and checks stdout, stderr and the exit code exactly.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "graph/proto/config.pb.h"
#include "graph/proto/example.pb.h"
#include "gtest/gtest.h"
#include "kernels/io/checkpoint_util.h"
#include "tools/cli_testlib.h"
#include "tools/file_util.h"
#include "tools/npy.h"
#include "util/json.h"

namespace graphrun {
namespace tools {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Success: exit 0, nothing on stderr, `out` exactly.
void ExpectOutput(const std::vector<std::string>& args, const std::string& out) {
  Result r = Graphrun(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, out);
}

TEST(GraphrunCliTest, AffineJson) {
  ExpectOutput({"run", Example("affine.pbtxt"), "--feed", "x=[[1,1,1],[1,0,-1]]", "--fetch", "y",
                "--fetch=MatMul:0", "--format=json"},
               "{\"fetches\": {\"y:0\": {\"dtype\": \"DT_FLOAT\", \"shape\": [2, 2], "
               "\"values\": [9.5, 11, -3.5, -5]}, \"MatMul:0\": {\"dtype\": \"DT_FLOAT\", "
               "\"shape\": [2, 2], \"values\": [9, 12, -4, -4]}}}\n");
}

// GRAPHRUN_TEST_ACCEL_DEVICES=1 gives graphrun one TEST_ACCEL device:
// unrequested MatMul and Relu run there (type priority) with the CPU's
// answer. The string constant asks for it but has no kernel there: an
// error naming the node and type, or, with --soft_placement, the CPU, which
// --log_device_placement says on the node's line.
TEST(GraphrunCliTest, TestAccelDeviceAndSoftPlacement) {
  const std::vector<std::string> run = {"run",     Runfile("tools/testdata/test_accel.pbtxt"),
                                        "--feed",  "x=[[1,2],[-3,4]]",
                                        "--fetch", "y",
                                        "--fetch", "label"};
  setenv("GRAPHRUN_TEST_ACCEL_DEVICES", "1", 1);
  Result hard = Graphrun(run);
  std::vector<std::string> soft_args = run;
  soft_args.push_back("--soft_placement");
  soft_args.push_back("--log_device_placement");
  Result soft = Graphrun(soft_args);
  // A kernel's error on the accelerator names that kernel, not the CPU's
  // _Recv that the step's abort reached.
  std::vector<std::string> bad_args = soft_args;
  bad_args[3] = "x=[[1,2,3]]";
  Result bad = Graphrun(bad_args);
  unsetenv("GRAPHRUN_TEST_ACCEL_DEVICES");
  Result cpu = Graphrun(run);

  EXPECT_EQ(hard.exit_code, 1);
  EXPECT_EQ(hard.out, "");
  EXPECT_THAT(hard.err, StartsWith("InvalidArgument: node 'label' (op Const): no kernel for "
                                   "device type TEST_ACCEL on requested device "
                                   "'/device:TEST_ACCEL:0'"));
  EXPECT_EQ(soft.exit_code, 0) << soft.err;
  EXPECT_EQ(soft.out,
            "y:0 = Tensor<float, [2,2]: 2 4 0 18>\nlabel:0 = Tensor<string, []: \"relu\">\n");
  EXPECT_THAT(soft.err,
              HasSubstr("MatMul (MatMul): /job:localhost/replica:0/task:0/device:TEST_ACCEL:0\n"));
  EXPECT_THAT(soft.err,
              HasSubstr("y (Relu): /job:localhost/replica:0/task:0/device:TEST_ACCEL:0\n"));
  EXPECT_THAT(soft.err, HasSubstr("label (Const): /job:localhost/replica:0/task:0/device:CPU:0 "
                                  "(soft placement: node 'label' (op Const): no kernel for device "
                                  "type TEST_ACCEL"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("\nInvalidArgument: node 'MatMul' (op MatMul): matrix "));
  EXPECT_THAT(bad.err, Not(HasSubstr("_recv")));
  // Without the variable there is no such device.
  EXPECT_EQ(cpu.exit_code, 1);
  EXPECT_THAT(cpu.err, HasSubstr("matches no device"));
}

TEST(GraphrunCliTest, AffineText) {
  ExpectOutput({"run", Example("affine.pbtxt"), "--feed", "x=[[1,1,1],[1,0,-1]]", "--fetch", "y"},
               "y:0 = Tensor<float, [2,2]: 9.5 11 -3.5 -5>\n");
}

TEST(GraphrunCliTest, WhileLoopSumsToFortyFive) {
  ExpectOutput({"run", Example("while_loop.pbtxt"), "--fetch", "while/Exit_1", "--fetch",
                "while/Exit", "--format", "json"},
               "{\"fetches\": {\"while/Exit_1:0\": {\"dtype\": \"DT_INT32\", \"shape\": [], "
               "\"values\": [45]}, \"while/Exit:0\": {\"dtype\": \"DT_INT32\", \"shape\": [], "
               "\"values\": [10]}}}\n");
}

TEST(GraphrunCliTest, CondTakesEitherBranch) {
  ExpectOutput({"run", Example("cond.pbtxt"), "--feed", "pred=true", "--fetch", "cond/Merge",
                "--format", "json"},
               "{\"fetches\": {\"cond/Merge:0\": {\"dtype\": \"DT_FLOAT\", \"shape\": [], "
               "\"values\": [6]}}}\n");
  ExpectOutput({"run", Example("cond.pbtxt"), "--feed", "pred=false", "--fetch", "cond/Merge"},
               "cond/Merge:0 = Tensor<float, []: 13>\n");
}

TEST(GraphrunCliTest, Variables) {
  ExpectOutput({"run", Example("variables.pbtxt"), "--fetch", "counter/Assign", "--format", "json"},
               "{\"fetches\": {\"counter/Assign:0\": {\"dtype\": \"DT_INT32\", "
               "\"shape\": [], \"values\": [0]}}}\n");
  ExpectOutput(
      {"run", Example("variables.pbtxt"), "--fetch", "increment_again", "--format", "json"},
      "{\"fetches\": {\"increment_again:0\": {\"dtype\": \"DT_INT32\", "
      "\"shape\": [], \"values\": [10]}}}\n");
}

// TensorFlow 2 graphs with function libraries (tools/testdata/tf2), run
// through the CLI: calls inlined, If/While lowered.
std::string Tf2(const std::string& name) { return Runfile("tools/testdata/tf2/" + name); }

TEST(GraphrunCliTest, Tf2NestedPartitionedCalls) {
  ExpectOutput({"run", Tf2("call_affine.pbtxt"), "--feed", "x=[1,2,3]", "--fetch", "Identity",
                "--fetch", "StatefulPartitionedCall"},
               "Identity:0 = Tensor<float, [3]: 3 5 7>\n"
               "StatefulPartitionedCall:0 = Tensor<float, [3]: 3 5 7>\n");
}

TEST(GraphrunCliTest, Tf2StatelessIfTakesEitherBranch) {
  ExpectOutput({"run", Tf2("if_abs.pbtxt"), "--feed", "x=-2.5", "--fetch", "cond/Identity"},
               "cond/Identity:0 = Tensor<float, []: 2.5>\n");
  ExpectOutput({"run", Tf2("if_abs.pbtxt"), "--feed", "x=4", "--fetch", "cond/Identity"},
               "cond/Identity:0 = Tensor<float, []: 4>\n");
}

TEST(GraphrunCliTest, Tf2StatelessWhileWithLoopCounter) {
  ExpectOutput({"run", Tf2("while_pow.pbtxt"), "--feed", "n=10", "--fetch", "result", "--fetch",
                "while:0", "--fetch", "while:4"},
               "result:0 = Tensor<float, []: 1024>\n"
               "while:0 = Tensor<int32, []: 10>\n"
               "while:4 = Tensor<int32, []: 10>\n");
  ExpectOutput({"run", Tf2("while_pow.pbtxt"), "--feed", "n=0", "--fetch", "result"},
               "result:0 = Tensor<float, []: 1>\n");
}

TEST(GraphrunCliTest, Tf2IfInsideWhile) {
  // Collatz: 27 takes 111 steps to reach 1; 1 takes none.
  ExpectOutput(
      {"run", Tf2("collatz.pbtxt"), "--feed", "n=27", "--fetch", "steps", "--fetch", "while:1"},
      "steps:0 = Tensor<int32, []: 111>\nwhile:1 = Tensor<int32, []: 1>\n");
  ExpectOutput({"run", Tf2("collatz.pbtxt"), "--feed", "n=1", "--fetch", "steps"},
               "steps:0 = Tensor<int32, []: 0>\n");
}

// Functions marked _noinline run as call frames; one holds a While.
TEST(GraphrunCliTest, NoInlineFunctionsRunAsCallFrames) {
  const std::string g = Runfile("tools/testdata/noinline_call.pbtxt");
  ExpectOutput(
      {"run", g, "--feed", "v=[1,2,3]", "--feed", "n=3", "--fetch", "norm", "--fetch", "doubled"},
      "norm:0 = Tensor<float, []: 14>\ndoubled:0 = Tensor<float, []: 112>\n");
  ExpectOutput({"run", g, "--feed", "v=[0.5]", "--feed", "n=0", "--fetch", "doubled"},
               "doubled:0 = Tensor<float, []: 0.25>\n");
}

TEST(GraphrunCliTest, Tf2FunctionUsedAsOpWithPlaceholderAttrs) {
  ExpectOutput({"run", Tf2("function_as_op.pbtxt"), "--fetch", "pt", "--fetch", "pt:1", "--fetch",
                "pti:0", "--fetch", "pti:1", "--fetch", "total"},
               "pt:0 = Tensor<float, []: 7>\npt:1 = Tensor<float, []: 12>\n"
               "pti:0 = Tensor<int32, []: 13>\npti:1 = Tensor<int32, []: 42>\n"
               "total:0 = Tensor<float, []: 19>\n");
}

TEST(GraphrunCliTest, Tf2Uint8Returns) {
  ExpectOutput({"run", Tf2("uint8_returns.pbtxt"), "--feed", "x=[0,0.5,1]", "--feed", "keep=true",
                "--fetch", "pixels", "--fetch", "maybe_inverted"},
               "pixels:0 = Tensor<uint8, [3]: 0 127 255>\n"
               "maybe_inverted:0 = Tensor<uint8, [3]: 0 127 255>\n");
  ExpectOutput({"run", Tf2("uint8_returns.pbtxt"), "--feed", "x=[0,0.5,1]", "--feed", "keep=false",
                "--fetch", "maybe_inverted", "--format=json"},
               "{\"fetches\": {\"maybe_inverted:0\": {\"dtype\": \"DT_UINT8\", \"shape\": [3], "
               "\"values\": [255, 128, 0]}}}\n");
}

TEST(GraphrunCliTest, HalfBfloat16AndComplexCompute) {
  ExpectOutput(
      {"run", Tf2("dtypes.pbtxt"), "--feed", "x=[1.5,2]", "--feed", "b=[0.5,-1]", "--fetch", "hsum",
       "--fetch", "hmul", "--fetch", "bt", "--fetch", "ci", "--fetch", "csum", "--fetch", "zneg"},
      "hsum:0 = Tensor<half, [2]: 2.5 3>\n"
      "hmul:0 = Tensor<half, [2]: 6.25 9>\n"
      "bt:0 = Tensor<bfloat16, [2]: 0.462891 -0.761719>\n"
      "ci:0 = Tensor<complex64, [2]: (-2,1) (1,3)>\n"
      "csum:0 = Tensor<complex64, [2]: (-1,3) (4,2)>\n"
      "zneg:0 = Tensor<complex128, [3]: (-0.5,0.5) (-0.5,0.5) (-0.5,0.5)>\n");
  ExpectOutput({"run", Tf2("dtypes.pbtxt"), "--fetch", "csum", "--format=json"},
               "{\"fetches\": {\"csum:0\": {\"dtype\": \"DT_COMPLEX64\", \"shape\": [2], "
               "\"values\": [[-1, 3], [4, 2]]}}}\n");
}

// MatMul, Mean and Softmax in half and bfloat16, through float.
TEST(GraphrunCliTest, HalfAndBfloat16MathOps) {
  ExpectOutput(
      {"run", Tf2("dtypes.pbtxt"), "--feed", "hm=[[1,2],[3,4]]", "--fetch", "hmatmul", "--fetch",
       "hmean", "--fetch", "bsoftmax", "--format=json"},
      "{\"fetches\": {\"hmatmul:0\": {\"dtype\": \"DT_HALF\", \"shape\": [2, 2], "
      "\"values\": [7, 10, 15, 22]}, \"hmean:0\": {\"dtype\": \"DT_HALF\", \"shape\": [2], "
      "\"values\": [8.5, 18.5]}, \"bsoftmax:0\": {\"dtype\": \"DT_BFLOAT16\", \"shape\": "
      "[2, 2], \"values\": [0.26953125, 0.73046875, 0.26953125, 0.73046875]}}}\n");
}

TEST(GraphrunCliTest, ComplexFeedsAndCasts) {
  ExpectOutput({"run", Tf2("complex_feed.pbtxt"), "--feed", "z=[[1, 2], [3, -4]]", "--fetch", "re",
                "--fetch", "w", "--fetch", "zz", "--format=json"},
               "{\"fetches\": {\"re:0\": {\"dtype\": \"DT_FLOAT\", \"shape\": [2], \"values\": [1, "
               "3]}, \"w:0\": {\"dtype\": \"DT_COMPLEX128\", \"shape\": [2], \"values\": [[1, 2], "
               "[3, -4]]}, \"zz:0\": {\"dtype\": \"DT_COMPLEX64\", \"shape\": [2], \"values\": "
               "[[-3, 4], [-7, -24]]}}}\n");
  Result bad =
      Graphrun({"run", Tf2("complex_feed.pbtxt"), "--feed", "z=[1, 2, 3]", "--fetch", "re"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("InvalidArgument: feed 'z:0': a complex64 value is a [real, "
                                 "imag] pair or nested arrays of them"));
}

TEST(GraphrunCliTest, StringsEndToEnd) {
  ExpectOutput({"run", Tf2("strings.pbtxt"), "--feed", "greeting=[\"hello\",\"goodbye\"]",
                "--fetch", "joined", "--fetch", "suffix"},
               "joined:0 = Tensor<string, [2]: \"hello, world\" \"goodbye, world\">\n"
               "suffix:0 = Tensor<string, []: \"world\">\n");
}

TEST(GraphrunCliTest, Tf2RecursionIsAnError) {
  Result r = Graphrun({"run", Tf2("recursive.pbtxt"), "--fetch", "y"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "InvalidArgument: function 'f' calls itself (f -> g -> f); recursive functions cannot "
            "be inlined\n");
}

// Dataset ops from a GraphDef: one step initializes the iterators and reads
// the first 8 test labels and images (the data package is installed by
// scripts/setup.sh).
TEST(GraphrunCliTest, FashionMnistBatch) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "no dataset-fashion-mnist";
  }
  ExpectOutput({"run", Example("fashion_mnist_batch.pbtxt"), "--fetch", "labels/next"},
               "labels/next:0 = Tensor<uint8, [8]: 9 2 1 1 6 1 4 6>\n");
  const std::string dir = TempPath("fm_batch");
  Result r = Graphrun(
      {"run", Example("fashion_mnist_batch.pbtxt"), "--fetch", "images/next", "--save_npy", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto images = ReadNpyFile(dir + "/images__next_0.npy");
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->dtype(), DT_UINT8);
  EXPECT_EQ(images->shape(), TensorShape({8, 28, 28}));
  int64_t sum = 0;
  for (int64_t i = 0; i < images->NumElements(); ++i) sum += images->base<uint8_t>()[i];
  EXPECT_GT(sum, 8 * 28 * 28 * 20);  // pictures, not zeros
}

TEST(GraphrunCliTest, MlpForward) {
  ExpectOutput({"run", Example("mlp_forward.pbtxt"), "--feed", "x=[[1,2,3,4],[-1,0.5,2,-2]]",
                "--fetch", "dense_1/BiasAdd", "--fetch", "ArgMax", "--format", "json"},
               "{\"fetches\": {\"dense_1/BiasAdd:0\": {\"dtype\": \"DT_FLOAT\", "
               "\"shape\": [2, 3], \"values\": [1.75, -2.125, -0.375, 0.1875, 0.75, "
               "1.3125]}, \"ArgMax:0\": {\"dtype\": \"DT_INT64\", \"shape\": [2], "
               "\"values\": [0, 2]}}}\n");
}

TEST(GraphrunCliTest, TargetNodeOnlyPrintsNothing) {
  ExpectOutput({"run", Example("variables.pbtxt"), "--target_node", "init"}, "");
}

TEST(GraphrunCliTest, SaveNpyAndFeedNpy) {
  const std::string dir = TempPath("npy_out");
  ExpectOutput({"run", Example("mlp_forward.pbtxt"), "--feed", "x=[[1,2,3,4]]", "--fetch",
                "dense/Relu", "--fetch", "ArgMax", "--save_npy", dir},
               "dense/Relu:0 = Tensor<float, [1,8]: 0 0 3 4.5 0.5 0 0 0>\n"
               "ArgMax:0 = Tensor<int64, [1]: 0>\n");
  auto relu = ReadNpyFile(dir + "/dense__Relu_0.npy");
  ASSERT_TRUE(relu.ok()) << relu.status();
  EXPECT_EQ(relu->DebugString(100), "Tensor<float, [1,8]: 0 0 3 4.5 0.5 0 0 0>");
  auto argmax = ReadNpyFile(dir + "/ArgMax_0.npy");
  ASSERT_TRUE(argmax.ok()) << argmax.status();
  EXPECT_EQ(argmax->DebugString(), "Tensor<int64, [1]: 0>");

  const std::string x = TempPath("x.npy");
  ASSERT_TRUE(WriteNpyFile(x, Tensor::FromVector<float>({1, 1, 1}, TensorShape({1, 3}))).ok());
  ExpectOutput({"run", Example("affine.pbtxt"), "--feed", "x=@" + x, "--fetch", "y"},
               "y:0 = Tensor<float, [1,2]: 9.5 11>\n");
}

TEST(GraphrunCliTest, TraceAndRunMetadata) {
  const std::string trace = TempPath("trace.json");
  const std::string metadata = TempPath("metadata.pbtxt");
  Result r = Graphrun({"run", Example("affine.pbtxt"), "--feed", "x=[[1,1,1]]", "--fetch", "y",
                       "--trace", trace, "--run_metadata", metadata});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto text = ReadFileToString(trace);
  ASSERT_TRUE(text.ok());
  auto json = ParseJson(*text);
  ASSERT_TRUE(json.ok()) << json.status();
  const JsonValue* events = json->Find("traceEvents");
  ASSERT_NE(events, nullptr);
  bool saw_matmul = false;
  for (const JsonValue& e : events->items()) {
    if (e.Find("name")->string_value() != "MatMul") continue;
    saw_matmul = true;
    EXPECT_EQ(e.Find("ph")->string_value(), "X");
    EXPECT_EQ(e.Find("args")->Find("op")->string_value(), "MatMul");
    EXPECT_EQ(e.Find("args")->Find("outputs")->Serialize(), "[\"float[1,2]\"]");
  }
  EXPECT_TRUE(saw_matmul) << *text;

  auto md_text = ReadFileToString(metadata);
  ASSERT_TRUE(md_text.ok());
  tensorflow::RunMetadata md;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*md_text, &md));
  EXPECT_GT(md.step_stats().dev_stats_size(), 0);
  EXPECT_GT(md.partition_graphs_size(), 0);
}

// ---- errors: exit code and the exact stderr line; stdout stays empty ----

void ExpectError(const std::vector<std::string>& args, int code, const std::string& err) {
  Result r = Graphrun(args);
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.err, err);
  EXPECT_EQ(r.out, "");
}

TEST(GraphrunCliTest, UnknownOp) {
  const std::string path = TempPath("unknown_op.pbtxt");
  ASSERT_TRUE(WriteStringToFile(path, "node { name: \"z\" op: \"Frobnicate\" }\n").ok());
  ExpectError({"run", path, "--fetch", "z"}, 1,
              "InvalidArgument: node 'z': op type not registered 'Frobnicate'\n");
}

// A body node that asks for a device the machine lacks, and one whose
// kernel rejects its shapes: found when the step is placed and run, after
// the calls were inlined, and still named by their function.
TEST(GraphrunCliTest, PlacementAndKernelErrorsNameTheFunction) {
  const std::string call = R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "c" op: "PartitionedCall" input: "x"
  attr { key: "Tin" value { list { type: DT_FLOAT } } }
  attr { key: "Tout" value { list { type: DT_FLOAT } } }
  attr { key: "f" value { func { name: "f" } } } }
library { function {
  signature { name: "f" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "m" op: "MatMul" input: "a" input: "a" DEVICE attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "m:product:0" }
} }
)";
  const std::string placed = TempPath("body_device.pbtxt");
  ASSERT_TRUE(
      WriteStringToFile(placed, absl::StrReplaceAll(call, {{"DEVICE", "device: '/device:CPU:7'"}}))
          .ok());
  ExpectError({"run", placed, "--feed", "x=[[1,2],[3,4]]", "--fetch", "c"}, 1,
              "InvalidArgument: node 'c/m' of function 'f' (called by 'c') (op MatMul): requested "
              "device '/device:CPU:7' matches no device; available devices: "
              "/job:localhost/replica:0/task:0/device:CPU:0\n");
  const std::string shaped = TempPath("body_shape.pbtxt");
  ASSERT_TRUE(WriteStringToFile(shaped, absl::StrReplaceAll(call, {{"DEVICE", ""}})).ok());
  Result r = Graphrun({"run", shaped, "--feed", "x=[[1,2,3]]", "--fetch", "c"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("InvalidArgument: node 'c/m' of function 'f' (called by 'c')"));
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
}

TEST(GraphrunCliTest, MissingFile) {
  const std::string path = TempPath("missing.pbtxt");
  ExpectError({"run", path, "--fetch", "y"}, 1, "NotFound: cannot open '" + path + "'\n");
}

// A malformed text graph: one line naming where the parser stopped (no
// libprotobuf log line before it); a directory is not read as a graph.
TEST(GraphrunCliTest, MalformedGraphFileIsOneLine) {
  const std::string path = TempPath("misspelt.pbtxt");
  std::ofstream(path) << "node { name: \"x\" op: \"Const\" }\nnode { nme: \"y\" }\n";
  ExpectError({"run", path, "--fetch", "x"}, 1,
              "InvalidArgument: '" + path +
                  "': could not parse GraphDef as text protobuf (line 2, column 11: Message type "
                  "\"tensorflow.NodeDef\" has no field named \"nme\".) or binary\n");
  const std::string garbage = TempPath("garbage.pb");
  std::ofstream(garbage) << std::string("\x0a\xff\xff\xff\xff\x0f{{{", 9);
  ExpectError(
      {"run", garbage, "--fetch", "x"}, 1,
      "InvalidArgument: '" + garbage + "': could not parse GraphDef as binary or text protobuf\n");
  const std::string dir = TempPath("graph_dir.pbtxt");
  std::filesystem::create_directories(dir);
  ExpectError({"run", dir, "--fetch", "x"}, 1,
              "InvalidArgument: '" + dir + "' is a directory, not a GraphDef\n");
  // A directory where a feed file or the trace file belongs.
  ExpectError({"run", Example("affine.pbtxt"), "--feed", "x=@" + dir, "--fetch", "y"}, 1,
              "FailedPrecondition: feed 'x:0': " + dir + ": cannot read: Is a directory\n");
  ExpectError(
      {"run", Example("affine.pbtxt"), "--feed", "x=[[1,1,1]]", "--fetch", "y", "--trace", dir}, 1,
      "FailedPrecondition: " + dir + ": cannot open for writing: Is a directory\n");
  // Newlines, escapes and bytes that are not UTF-8 in names stay on the
  // one line, escaped.
  const std::string odd = TempPath("odd_op.pbtxt");
  std::ofstream(odd) << "node { name: \"x\" op: \"Frob\\nnicate\\033\" }\n";
  ExpectError({"run", odd, "--fetch", "x"}, 1,
              "InvalidArgument: node 'x': op type not registered 'Frob\\nnicate\\x1b'\n");
}

TEST(GraphrunCliTest, UnfedPlaceholder) {
  Result r = Graphrun({"run", Example("affine.pbtxt"), "--fetch", "y"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("InvalidArgument: "));
  EXPECT_THAT(r.err, HasSubstr("'x'"));
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(GraphrunCliTest, BadFeeds) {
  ExpectError({"run", Example("affine.pbtxt"), "--fetch", "y", "--feed", "x=[[1,2],[3]]"}, 1,
              "InvalidArgument: feed 'x:0': ragged array: expected 2 elements at depth 1, "
              "got 1\n");
  ExpectError({"run", Example("affine.pbtxt"), "--fetch", "y", "--feed", "q=1"}, 1,
              "InvalidArgument: feed 'q:0': no node named 'q' in the graph\n");
  ExpectError({"run", Example("affine.pbtxt"), "--fetch", "y", "--feed", "x=[[true]]"}, 1,
              "InvalidArgument: feed 'x:0': value true cannot be float: not a number\n");
  const std::string ints = Runfile("tools/testdata/int64_3.npy");
  ExpectError(
      {"run", Example("affine.pbtxt"), "--fetch", "y", "--feed", "x=@" + ints}, 1,
      "InvalidArgument: feed 'x:0': " + ints + " holds int64 but the graph expects float\n");
}

// A graph asking for more memory than there is: ResourceExhausted naming
// the node, the shape and the bytes, exit 1 (never std::bad_alloc).
TEST(GraphrunCliTest, HugeTensorsAreResourceExhausted) {
  const std::string big = TempPath("big_const.pbtxt");
  ASSERT_TRUE(WriteStringToFile(big, R"(node { name: "c" op: "Const"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT
    tensor_shape { dim { size: 1099511627776 } } } } } })")
                  .ok());
  Result r = Graphrun({"run", big, "--fetch", "c"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("ResourceExhausted: node 'c': "));
  EXPECT_THAT(r.err, HasSubstr("a float tensor of shape [1099511627776]: 4398046511104 bytes "
                               "(4.0 TiB) is over the per-allocation cap"));

  const std::string fill = TempPath("fill.pbtxt");
  ASSERT_TRUE(WriteStringToFile(fill, R"(
node { name: "dims" op: "Placeholder" attr { key: "dtype" value { type: DT_INT64 } } }
node { name: "v" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } }
node { name: "f" op: "Fill" input: "dims" input: "v" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "index_type" value { type: DT_INT64 } } })")
                  .ok());
  r = Graphrun({"run", fill, "--fetch", "f", "--feed", "dims=[1000000,1000000]"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("ResourceExhausted: node 'f' (op Fill): output 0: cannot "
                                "allocate a float tensor of shape [1000000,1000000]: "
                                "4000000000000 bytes (3.6 TiB)"));
  // Under the process's own budget (--memory_limit; the cap is half of it).
  r = Graphrun({"run", fill, "--fetch", "f", "--feed", "dims=[1000,1000]", "--memory_limit=4M"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("4000000 bytes (3.8 MiB) is over the per-allocation cap of 2.0 MiB "
                               "(--max_allocation_bytes)"));
  r = Graphrun({"run", fill, "--fetch", "f", "--feed", "dims=[1500,1000]", "--memory_limit", "5M",
                "--max_allocation_bytes=8M"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err,
              HasSubstr("6000000 bytes (5.7 MiB) more would take this process's tensors to"));
  ExpectOutput({"run", fill, "--fetch", "f", "--feed", "dims=[2,2]", "--memory_limit=64M"},
               "f:0 = Tensor<float, [2,2]: 1 1 1 1>\n");
  Result bad = Graphrun({"run", fill, "--fetch", "f", "--memory_limit=lots"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, StartsWith("InvalidArgument: --memory_limit=lots: expected bytes"));
}

// Strings' contents count too: a 100 kB string filled into 1000 elements
// is refused before it is copied (it was 100 MB under a 64 MB limit).
TEST(GraphrunCliTest, HugeStringContentsAreResourceExhausted) {
  const std::string fill = TempPath("fill_string.pbtxt");
  ASSERT_TRUE(WriteStringToFile(fill, absl::StrCat(R"(
node { name: "dims" op: "Placeholder" attr { key: "dtype" value { type: DT_INT64 } } }
node { name: "s" op: "Const" attr { key: "dtype" value { type: DT_STRING } }
  attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { } string_val: ")",
                                                   std::string(100000, 'a'), R"(" } } } }
node { name: "f" op: "Fill" input: "dims" input: "s" attr { key: "T" value { type: DT_STRING } }
  attr { key: "index_type" value { type: DT_INT64 } } })"))
                  .ok());
  Result r =
      Graphrun({"run", fill, "--target_node", "f", "--feed", "dims=[1000]", "--memory_limit=64M"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "ResourceExhausted: node 'f' (op Fill): cannot allocate the string contents filled "
            "into a [1000] string tensor: the tensor would hold 100032000 bytes (95.4 MiB), over "
            "the per-allocation cap of 32.0 MiB (--max_allocation_bytes)\n");
  r = Graphrun({"run", fill, "--target_node", "f", "--feed", "dims=[200]", "--memory_limit=64M"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(GraphrunCliTest, UnreachableGrpcTargetIsUnavailable) {
  // grpc:// targets go to a master (docs/distributed.md); nothing listens here.
  Result r = Graphrun({"run", Example("affine.pbtxt"), "--fetch", "y", "--feed", "x=[[1,1,1]]",
                       "--target", "grpc://localhost:1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("Unavailable: "));
  EXPECT_THAT(r.err, HasSubstr("localhost:1"));
}

TEST(GraphrunCliTest, UsageErrors) {
  ExpectError({"run", Example("affine.pbtxt"), "--fetch", "y", "--bogus"}, 2,
              "InvalidArgument: unknown flag --bogus\n");
  ExpectError({"run", Example("affine.pbtxt"), "--fetch"}, 2,
              "InvalidArgument: flag --fetch needs a value\n");
  ExpectError({"run", "--fetch", "y"}, 2, "InvalidArgument: run: missing GRAPH file\n");
  ExpectError({"run", Example("affine.pbtxt")}, 2,
              "InvalidArgument: run: nothing to do: give --fetch or --target_node\n");
  ExpectError({"run", Example("affine.pbtxt"), "--fetch", "y", "--format", "xml"}, 2,
              "InvalidArgument: --format: expected text or json, got 'xml'\n");
  ExpectError({"run", Example("affine.pbtxt"), "--fetch", "y", "--feed", "x"}, 2,
              "InvalidArgument: --feed: expected NAME=JSON or NAME=@FILE.npy, got 'x'\n");
  ExpectError({}, 2, "InvalidArgument: missing subcommand; run 'graphrun help' for usage\n");
  ExpectError({"frobnicate"}, 2,
              "InvalidArgument: unknown subcommand 'frobnicate'; run 'graphrun help' for "
              "usage\n");
}

// graphrun train: flag mistakes are usage errors found before any task
// starts (nothing on stdout); bad data is a failure (exit 1).
TEST(GraphrunCliTest, TrainUsageErrorsAndBadData) {
  ExpectError({"train", "--local", "--strategy=round_robin"}, 2,
              "InvalidArgument: --strategy: --local places nothing (no PS tasks)\n");
  ExpectError({"train", "--strategy=nope"}, 2,
              "InvalidArgument: --strategy: 'nope' is not one train can use (balanced, "
              "greedy_bytes, round_robin)\n");
  ExpectError({"train", "--batch_size=255", "--workers=2"}, 2,
              "InvalidArgument: --batch_size: global batch size 255 is not divisible by 2 "
              "replicas\n");
  ExpectError({"train", "--local", "--checkpoint_dir=", "--export_graph=/tmp/x.pb"}, 2,
              "InvalidArgument: --export_graph: needs checkpoints (the exported weights are the "
              "last checkpoint's); give --checkpoint_dir\n");
  for (const char* nan : {"--save_checkpoint_secs=nan", "--save_checkpoint_secs=inf"}) {
    ExpectError({"train", "--local", nan}, 2,
                "InvalidArgument: --save_checkpoint_secs: expected seconds >= 0\n");
  }
  ExpectError({"train", "--local", "--learning_rate=inf"}, 2,
              "InvalidArgument: --learning_rate: expected a positive number\n");
  ExpectError({"train", "--port_base=99999"}, 2,
              "InvalidArgument: --port_base: only for tasks started by srun (the cluster then "
              "comes from SLURM_*)\n");
  // Found before training: exit 1 at once, nothing on stdout.
  ExpectError({"train", "--local", "--steps=100000", "--export_graph=/nonexistent/dir/m.pb",
               "--checkpoint_dir=" + TempPath("export_ckpt"), "--format=json"},
              1,
              "FailedPrecondition: train: --export_graph=/nonexistent/dir/m.pb: no directory "
              "/nonexistent/dir\n");
  Result proc = Graphrun({"train", "--local", "--steps=100000", "--export_graph=/proc/m.pb",
                          "--checkpoint_dir=" + TempPath("export_ckpt"), "--format=json"});
  EXPECT_EQ(proc.exit_code, 1);
  EXPECT_EQ(proc.out, "");
  EXPECT_THAT(proc.err, StartsWith("FailedPrecondition: train: --export_graph=/proc/m.pb: cannot "
                                   "write in /proc: "));
  const std::string not_a_model = TempPath("not_a_saved_model");
  std::filesystem::create_directories(not_a_model);
  std::ofstream(not_a_model + "/notes.txt") << "mine";
  ExpectError({"train", "--local", "--steps=100000", "--export_saved_model=" + not_a_model,
               "--checkpoint_dir=" + TempPath("export_ckpt"), "--format=json"},
              1,
              "FailedPrecondition: train: --export_saved_model=" + not_a_model +
                  " exists and is not a SavedModel; not replacing it\n");
  // A truncated IDX file.
  const std::string data = TempPath("bad_idx");
  std::filesystem::create_directories(data);
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    std::ofstream(data + "/" + f) << "not an idx file";
  }
  Result r = Graphrun(
      {"train", "--local", "--steps=1", "--data=" + data, "--checkpoint_dir=", "--format=json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, ::testing::StartsWith("InvalidArgument: "));
  EXPECT_THAT(r.err, ::testing::HasSubstr("idx"));
  // Images and labels that do not pair up (a zip would stop at the
  // shorter), or swapped: named before anything trains.
  const std::string fm = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(fm + "/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "no dataset-fashion-mnist for the mismatched files";
  }
  auto data_of = [&](const std::string& name, const std::string& images,
                     const std::string& labels) {
    const std::string dir = TempPath(name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::filesystem::create_symlink(fm + "/" + images, dir + "/train-images-idx3-ubyte.gz");
    std::filesystem::create_symlink(fm + "/" + labels, dir + "/train-labels-idx1-ubyte.gz");
    for (const char* f : {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
      std::filesystem::create_symlink(fm + "/" + f, dir + "/" + f);
    }
    return dir;
  };
  const std::string short_labels =
      data_of("short_labels", "train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz");
  ExpectError({"train", "--local", "--steps=1", "--data=" + short_labels,
               "--checkpoint_dir=", "--format=json"},
              1,
              "InvalidArgument: train: " + short_labels +
                  "/train-images-idx3-ubyte.gz holds 60000 images but " + short_labels +
                  "/train-labels-idx1-ubyte.gz 10000 labels\n");
  const std::string swapped =
      data_of("swapped", "train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz");
  ExpectError(
      {"train", "--local", "--steps=1", "--data=" + swapped, "--checkpoint_dir=", "--format=json"},
      1,
      "InvalidArgument: train: " + swapped +
          "/train-images-idx3-ubyte.gz holds [60000] bytes; images are [N,28,28]\n");
}

TEST(GraphrunCliTest, Help) {
  for (const char* flag : {"help", "--help", "-h"}) {
    Result r = Graphrun({flag});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_THAT(r.out, StartsWith("usage: graphrun SUBCOMMAND [args]\n"));
    EXPECT_THAT(r.out, HasSubstr("\n  run "));
    EXPECT_EQ(r.err, "");
  }
  Result run_help = Graphrun({"run", "--help"});
  EXPECT_EQ(run_help.exit_code, 0);
  EXPECT_THAT(run_help.out, StartsWith("usage: graphrun run GRAPH"));
  EXPECT_THAT(run_help.out, HasSubstr("--fetch NAME[:i]"));
  EXPECT_EQ(Graphrun({"help", "run"}).out, run_help.out);
  // Every subcommand, with --help or -h anywhere before "--".
  for (const char* sub : {"run", "train", "server", "cluster", "show", "status", "tls"}) {
    const std::string usage = Graphrun({"help", sub}).out;
    EXPECT_THAT(usage, StartsWith(std::string("usage: graphrun ") + sub)) << sub;
    for (const char* flag : {"--help", "-h"}) {
      Result r = Graphrun({sub, "--steps=5", flag});
      EXPECT_EQ(r.exit_code, 0) << sub << " " << flag << ": " << r.err;
      EXPECT_EQ(r.out, usage) << sub << " " << flag;
      EXPECT_EQ(r.err, "") << sub << " " << flag;
    }
  }
}

// Ports past 65535 are refused, never taken modulo 65536 (a typo reached
// another service), and so is a missing port.
TEST(GraphrunCliTest, AddressesOutOfRangeAreUsageErrors) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status", "127.0.0.1:99999"},
        {"status", "127.0.0.1"},
        {"run", Example("affine.pbtxt"), "--feed", "x=[[1,1,1]]", "--fetch", "y",
         "--target=grpc://127.0.0.1:112037"}}) {
    Result r = Graphrun(args);
    EXPECT_EQ(r.exit_code, args[0] == "status" ? 2 : 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("(port 1 to 65535)")) << args.back();
  }
}

// SavedModels (tools/testdata/saved_model): TF 1 (restored through the
// Saver's restore op) and TF 2 (signatures calling the library, the traced
// restore function), with their variables written here in TensorFlow's
// checkpoint format.
std::string MakeSavedModel(const std::string& name, const std::string& text_file,
                           const std::string& variable) {
  const std::string dir = TempPath(name);
  std::filesystem::create_directories(dir + "/variables");
  std::filesystem::copy_file(Runfile("tools/testdata/saved_model/" + text_file),
                             dir + "/saved_model.pbtxt",
                             std::filesystem::copy_options::overwrite_existing);
  auto w = checkpoint::BundleWriter::Create(dir + "/variables/variables");
  EXPECT_TRUE(w.ok()) << w.status();
  Tensor value(DT_FLOAT, TensorShape({2}));
  value.flat<float>()[0] = 1.5f;
  value.flat<float>()[1] = -2.0f;
  EXPECT_TRUE((*w)->Add(variable, value).ok());
  if (variable != "w") {
    Tensor graph(DT_STRING, TensorShape({}));
    graph.flat<std::string>()[0] = "a serialized TrackableObjectGraph";
    EXPECT_TRUE((*w)->Add("_CHECKPOINTABLE_OBJECT_GRAPH", graph).ok());
  }
  EXPECT_TRUE((*w)->Finish().ok());
  return dir;
}

TEST(GraphrunCliTest, SavedModelTf1BySignature) {
  const std::string dir = MakeSavedModel("tf1_model", "tf1_saved_model.pbtxt", "w");
  ExpectOutput({"run", dir, "--signature=serving_default", "--feed", "x=[[1,1],[2,3]]"},
               "y = Tensor<float, [2,2]: 1.5 -2 3 -6>\n");
  // By tensor name, without a signature; JSON keyed by the output key.
  ExpectOutput({"run", dir, "--feed", "x=[[2,2]]", "--fetch", "y"},
               "y:0 = Tensor<float, [1,2]: 3 -4>\n");
  ExpectOutput({"run", dir, "--signature", "serving_default", "--feed", "x=[[1,0]]", "--fetch", "y",
                "--format=json"},
               "{\"fetches\": {\"y\": {\"dtype\": \"DT_FLOAT\", \"shape\": [1, 2], "
               "\"values\": [1.5, -0]}}}\n");
  ExpectError({"run", dir, "--signature=serving_default", "--feed", "z=[[1,1]]"}, 1,
              "InvalidArgument: signature 'serving_default' has no input 'z'; its inputs: x\n");
  ExpectError(
      {"run", dir, "--signature=predict"}, 1,
      "NotFound: SavedModel '" + dir + "' has no signature 'predict'; it has: serving_default\n");
  ExpectError({"run", dir, "--signature=serving_default", "--tag_set=train"}, 1,
              "NotFound: no MetaGraphDef with tags 'train'; the SavedModel has 'serve'\n");
  ExpectError({"run", dir, "--signature=serving_default", "--ps_tasks=2"}, 2,
              "InvalidArgument: a SavedModel runs in a local session: --ps_tasks, --cluster and "
              "--target do not apply\n");
}

TEST(GraphrunCliTest, SavedModelTf2CallsIntoTheLibrary) {
  const std::string dir = MakeSavedModel("tf2_model", "tf2_saved_model.pbtxt",
                                         "variables/0/.ATTRIBUTES/VARIABLE_VALUE");
  ExpectOutput({"run", dir, "--signature=serving_default", "--feed", "x=[[1,1],[2,3]]"},
               "output_0 = Tensor<float, [2,2]: 1.5 -2 3 -6>\n");
}

// An asset: the loader feeds DIR/assets/vocab.txt over the asset's tensor
// in the init run, and the init op is the __saved_model_init_op signature's
// (TensorFlow's order), not the saved_model_main_op collection's.
TEST(GraphrunCliTest, SavedModelAssetsAndInitOp) {
  const std::string dir = TempPath("assets_model");
  std::filesystem::create_directories(dir + "/assets");
  std::filesystem::copy_file(Runfile("tools/testdata/saved_model/tf1_assets_saved_model.pbtxt"),
                             dir + "/saved_model.pbtxt",
                             std::filesystem::copy_options::overwrite_existing);
  ExpectOutput({"run", dir, "--signature=serving_default"},
               "vocab = Tensor<string, []: \"" + dir + "/assets/vocab.txt\">\n");
}

TEST(GraphrunCliTest, SavedModelMissingVariableIsAnError) {
  const std::string dir = MakeSavedModel("tf2_wrong", "tf2_saved_model.pbtxt", "other");
  Result r = Graphrun({"run", dir, "--signature=serving_default", "--feed", "x=[[1,1]]"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("NotFound: SavedModel '" + dir + "': restoring variables from '" +
                                dir + "/variables/variables': "));
  EXPECT_THAT(r.err, HasSubstr("variables/0/.ATTRIBUTES/VARIABLE_VALUE"));
}

// A graph with a V1 tf.train.Saver's nodes (testdata/v1_saver.pbtxt): its
// SaveSlices writes a V1 checkpoint file, and its RestoreSlice ops read the
// values back in another process.
TEST(GraphrunCliTest, V1SaverGraphSavesAndRestores) {
  const std::string graph = Runfile("tools/testdata/v1_saver.pbtxt");
  const std::string file = TempPath("v1_saver_model.ckpt");
  ExpectOutput({"run", graph, "--feed", "save/Const=\"" + file + "\"", "--feed", "w=[[5,6],[7,8]]",
                "--feed", "step=9", "--fetch", "save/control_dependency"},
               "save/control_dependency:0 = Tensor<string, []: \"" + file + "\">\n");
  auto r = checkpoint::BundleReader::Open(file);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->entries().size(), 2u);
  ExpectOutput({"run", graph, "--feed", "save/Const=\"" + file + "\"", "--fetch",
                "save/RestoreSlice", "--fetch", "save/RestoreSlice_1"},
               "save/RestoreSlice:0 = Tensor<int64, []: 9>\n"
               "save/RestoreSlice_1:0 = Tensor<float, [2,2]: 5 6 7 8>\n");
  // A fed variable cannot be assigned in the same step.
  Result assign = Graphrun({"run", graph, "--feed", "w=[[5,6],[7,8]]", "--target_node", "init"});
  EXPECT_EQ(assign.exit_code, 1);
  EXPECT_EQ(assign.err,
            "InvalidArgument: feed 'w:0': node 'w/Assign' needs a reference to it and cannot take "
            "a fed value\n");
  Result missing = Graphrun(
      {"run", graph, "--feed", "save/Const=\"" + file + ".none\"", "--fetch", "save/RestoreSlice"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, StartsWith("NotFound: "));
  EXPECT_THAT(missing.err, HasSubstr("node 'save/RestoreSlice' (op RestoreSlice): no checkpoint "
                                     "file matches '" +
                                     file + ".none'"));
}

// A SavedModel as TensorFlow 0.12 wrote them (testdata's file says what it
// holds): its any_list collection and any_info parse, its ref variables
// restore through the sharded Saver, and its regress signature parses
// tf.Examples fed as strings, through a Placeholder whose legacy `shape {}`
// means any shape.
TEST(GraphrunCliTest, SavedModelTf1LegacyRegressesExamples) {
  const std::string dir = TempPath("tf1_legacy_model");
  std::filesystem::create_directories(dir + "/variables");
  std::filesystem::copy_file(Runfile("tools/testdata/saved_model/tf1_legacy_saved_model.pbtxt"),
                             dir + "/saved_model.pbtxt",
                             std::filesystem::copy_options::overwrite_existing);
  auto w = checkpoint::BundleWriter::Create(dir + "/variables/variables");
  ASSERT_TRUE(w.ok()) << w.status();
  Tensor a(DT_FLOAT, TensorShape({})), b(DT_FLOAT, TensorShape({}));
  a.flat<float>()[0] = 0.5f;
  b.flat<float>()[0] = 2.0f;
  ASSERT_TRUE((*w)->Add("a", a).ok());
  ASSERT_TRUE((*w)->Add("b", b).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  // Serialized tf.Examples {x: [v]} as a JSON list of strings (each byte a
  // code point: these values' bytes are all below 0x80).
  std::string examples = "[";
  for (float v : {2.0f, 3.0f, 10.0f}) {
    tensorflow::Example e;
    (*e.mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(v);
    std::string bytes = e.SerializeAsString();
    if (examples.size() > 1) examples += ",";
    examples += "\"";
    for (unsigned char c : bytes) {
      ASSERT_LT(c, 0x80);
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\u%04x", c);
      examples += hex;
    }
    examples += "\"";
  }
  examples += "]";
  ExpectOutput(
      {"run", dir, "--signature=tensorflow/serving/regress", "--feed", "inputs=" + examples},
      "outputs = Tensor<float, [3,1]: 3 3.5 7>\n");
  ExpectOutput({"run", dir, "--signature=serving_default", "--feed", "x=[[1],[-2]]"},
               "y = Tensor<float, [2,1]: 2.5 1>\n");
  // `show` lays the signatures out as saved_model_cli does.
  ExpectOutput({"show", dir},
               "\nMetaGraphDef with tag-set: 'serve' contains the following SignatureDefs:\n"
               "\nsignature_def['serving_default']:\n"
               "  The given SavedModel SignatureDef contains the following input(s):\n"
               "    inputs['x'] tensor_info:\n"
               "        dtype: DT_INVALID\n"
               "        shape: ()\n"
               "        name: x:0\n"
               "  The given SavedModel SignatureDef contains the following output(s):\n"
               "    outputs['y'] tensor_info:\n"
               "        dtype: DT_INVALID\n"
               "        shape: ()\n"
               "        name: y:0\n"
               "  Method name is: tensorflow/serving/predict\n"
               "\nsignature_def['tensorflow/serving/regress']:\n"
               "  The given SavedModel SignatureDef contains the following input(s):\n"
               "    inputs['inputs'] tensor_info:\n"
               "        dtype: DT_STRING\n"
               "        shape: ()\n"
               "        name: tf_example:0\n"
               "  The given SavedModel SignatureDef contains the following output(s):\n"
               "    outputs['outputs'] tensor_info:\n"
               "        dtype: DT_FLOAT\n"
               "        shape: ()\n"
               "        name: y:0\n"
               "  Method name is: tensorflow/serving/regress\n");
}

TEST(GraphrunCliTest, ShowSavedModelLikeSavedModelCli) {
  const std::string dir =
      MakeSavedModel("tf2_show", "tf2_saved_model.pbtxt", "variables/0/.ATTRIBUTES/VARIABLE_VALUE");
  ExpectOutput({"show", dir},
               "\nMetaGraphDef with tag-set: 'serve' contains the following SignatureDefs:\n"
               "\nsignature_def['__saved_model_init_op']:\n"
               "  The given SavedModel SignatureDef contains the following input(s):\n"
               "  The given SavedModel SignatureDef contains the following output(s):\n"
               "    outputs['__saved_model_init_op'] tensor_info:\n"
               "        dtype: DT_INVALID\n"
               "        shape: unknown_rank\n"
               "        name: NoOp\n"
               "  Method name is: \n"
               "\nsignature_def['serving_default']:\n"
               "  The given SavedModel SignatureDef contains the following input(s):\n"
               "    inputs['x'] tensor_info:\n"
               "        dtype: DT_FLOAT\n"
               "        shape: (-1, 2)\n"
               "        name: serving_default_x:0\n"
               "  The given SavedModel SignatureDef contains the following output(s):\n"
               "    outputs['output_0'] tensor_info:\n"
               "        dtype: DT_FLOAT\n"
               "        shape: (-1, 2)\n"
               "        name: StatefulPartitionedCall:0\n"
               "  Method name is: tensorflow/serving/predict\n"
               "\nConcrete Functions:\n"
               "  Function Name: '__call__'\n"
               "    Option #1\n"
               "      Callable with:\n"
               "        Argument #1\n"
               "          x: TensorSpec(shape=(None, 2), dtype=tf.float32, name='x')\n");
  ExpectError({"show", TempPath("no_such_model")}, 1,
              "NotFound: '" + TempPath("no_such_model") +
                  "' is not a SavedModel: no saved_model.pb or saved_model.pbtxt\n");
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
