#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

#define ASSERT_RUN_OK(lhs, tester)                                                     \
  auto GR_CONCAT_(run_, __LINE__) = (tester).Run();                                    \
  ASSERT_TRUE(GR_CONCAT_(run_, __LINE__).ok()) << GR_CONCAT_(run_, __LINE__).status(); \
  lhs = std::move(GR_CONCAT_(run_, __LINE__)).value()

#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                                \
  auto GR_CONCAT_(res_, __LINE__) = (expr);                                            \
  ASSERT_TRUE(GR_CONCAT_(res_, __LINE__).ok()) << GR_CONCAT_(res_, __LINE__).status(); \
  lhs = std::move(GR_CONCAT_(res_, __LINE__)).value()

Tensor F(std::vector<float> v) { return Tensor::FromVector<float>(v); }

void ExpectTensor(const Tensor& expected, const Tensor& actual) {
  EXPECT_EQ(TensorDiff(expected, actual), "");
}

void ExpectError(const absl::StatusOr<std::vector<Tensor>>& r, absl::StatusCode code,
                 const std::string& substr) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(substr));
}

class RefVariableTest : public ::testing::Test {
 protected:
  // Runs VariableV2 "w" (shape [2], float) on the shared device; returns
  // the variable its ref output points at.
  std::shared_ptr<Var> RunVariable(const std::string& name = "w",
                                   const std::string& shared_name = "") {
    OpTester t("VariableV2", name);
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({2}));
    if (!shared_name.empty()) t.Attr("shared_name", shared_name);
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return nullptr;
    return t.output_values()[0].ref;
  }
  absl::StatusOr<std::vector<Tensor>> Update(const std::string& op, const std::string& name,
                                             std::shared_ptr<Var> var, Tensor value,
                                             bool validate_shape = true) {
    OpTester t(op, name);
    t.UseDevice(device_).Attr("T", DT_FLOAT).InputRef(std::move(var)).Input(std::move(value));
    if (op == "Assign") t.Attr("validate_shape", validate_shape);
    return t.Run();
  }
  Tensor Read(std::shared_ptr<Var> var) {
    OpTester t("Identity", "read");
    t.UseDevice(device_).Attr("T", DT_FLOAT).InputRef(std::move(var));
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0] : Tensor();
  }

  std::shared_ptr<TestCpuDevice> device_ = std::make_shared<TestCpuDevice>();
};

TEST_F(RefVariableTest, InitAssignReadAcrossRuns) {
  std::shared_ptr<Var> var = RunVariable();
  ASSERT_NE(var, nullptr);
  EXPECT_EQ(var->name(), "w");
  {
    OpTester t("IsVariableInitialized");
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).InputRef(var);
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    EXPECT_FALSE(out[0].scalar<bool>());
  }
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> assigned, Update("Assign", "assign", var, F({1, 2})));
  ExpectTensor(F({1, 2}), assigned[0]);

  // A second run of the variable node (new kernel, same device) finds the
  // same variable and its value.
  std::shared_ptr<Var> again = RunVariable();
  EXPECT_EQ(again, var);
  ExpectTensor(F({1, 2}), Read(again));
  {
    OpTester t("IsVariableInitialized");
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).InputRef(var);
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    EXPECT_TRUE(out[0].scalar<bool>());
  }
}

TEST_F(RefVariableTest, SharedNameAndSeparateDevices) {
  std::shared_ptr<Var> a = RunVariable("a", "shared");
  std::shared_ptr<Var> b = RunVariable("b", "shared");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a->name(), "shared");
  EXPECT_NE(RunVariable("c"), a);
}

TEST_F(RefVariableTest, AssignAddSubAndSnapshots) {
  std::shared_ptr<Var> var = RunVariable();
  ASSERT_TRUE(Update("Assign", "assign", var, F({1, 2})).ok());
  Tensor snapshot = Read(var);
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> added, Update("AssignAdd", "add", var, F({10, 20})));
  ExpectTensor(F({11, 22}), added[0]);
  // The snapshot taken before the update does not change.
  ExpectTensor(F({1, 2}), snapshot);
  added.clear();

  // With no other holder the update is in place.
  const char* before;
  {
    std::lock_guard<std::mutex> l(var->mu);
    before = var->tensor.raw_data();
  }
  ASSERT_TRUE(Update("AssignSub", "sub", var, F({1, 1})).ok());
  {
    std::lock_guard<std::mutex> l(var->mu);
    EXPECT_EQ(var->tensor.raw_data(), before);
  }
  ExpectTensor(F({10, 21}), Read(var));
}

TEST_F(RefVariableTest, UninitializedUpdateIsFailedPrecondition) {
  std::shared_ptr<Var> var = RunVariable();
  auto r = Update("AssignAdd", "add", var, F({1, 1}));
  ExpectError(r, absl::StatusCode::kFailedPrecondition, "node 'add'");
  ExpectError(r, absl::StatusCode::kFailedPrecondition, "uninitialized value w");

  OpTester t("Identity", "id");
  t.UseDevice(device_).Attr("T", DT_FLOAT).InputRef(var);
  ExpectError(t.Run(), absl::StatusCode::kFailedPrecondition, "uninitialized value w");
}

TEST_F(RefVariableTest, AssignShapeValidation) {
  std::shared_ptr<Var> var = RunVariable();
  ExpectError(Update("Assign", "assign", var, F({1, 2, 3})), absl::StatusCode::kInvalidArgument,
              "node 'assign'");
  ASSERT_TRUE(Update("Assign", "assign", var, F({1, 2})).ok());
  ExpectError(Update("Assign", "assign2", var, F({1})), absl::StatusCode::kInvalidArgument,
              "node 'assign2'");
  ASSERT_TRUE(Update("Assign", "assign3", var, F({1, 2, 3}), false).ok());
  ExpectTensor(F({1, 2, 3}), Read(var));
  ExpectError(Update("AssignAdd", "add", var, F({1})), absl::StatusCode::kInvalidArgument,
              "node 'add'");
}

TEST_F(RefVariableTest, Scatter) {
  OpTester v("VariableV2", "m");
  v.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({3, 2}));
  ASSERT_TRUE(v.Run().ok());
  std::shared_ptr<Var> var = v.output_values()[0].ref;
  ASSERT_TRUE(
      Update("Assign", "init", var, Tensor::FromVector<float>({0, 0, 1, 1, 2, 2}, {3, 2})).ok());
  OpTester add("ScatterAdd", "sa");
  add.UseDevice(device_).Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32).InputRef(var);
  add.Input(Tensor::FromVector<int32_t>({2, 2}))
      .Input(Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}));
  ASSERT_RUN_OK(std::vector<Tensor> out, add);
  ExpectTensor(Tensor::FromVector<float>({0, 0, 1, 1, 6, 8}, {3, 2}), out[0]);

  OpTester upd("ScatterUpdate", "su");
  upd.UseDevice(device_).Attr("T", DT_FLOAT).Attr("Tindices", DT_INT64).InputRef(var);
  upd.Input(Tensor::FromVector<int64_t>({0})).Input(Tensor::FromVector<float>({7, 7}, {1, 2}));
  ASSERT_RUN_OK(std::vector<Tensor> out2, upd);
  ExpectTensor(Tensor::FromVector<float>({7, 7, 1, 1, 6, 8}, {3, 2}), out2[0]);

  OpTester bad("ScatterSub", "ssub");
  bad.UseDevice(device_).Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32).InputRef(var);
  bad.Input(Tensor::FromVector<int32_t>({3})).Input(Tensor::FromVector<float>({1, 1}, {1, 2}));
  ExpectError(bad.Run(), absl::StatusCode::kInvalidArgument, "node 'ssub'");
}

class ResourceVariableTest : public ::testing::Test {
 protected:
  Tensor Handle(const std::string& node, const std::string& shared_name = "") {
    OpTester t("VarHandleOp", node);
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({2}));
    if (!shared_name.empty()) t.Attr("shared_name", shared_name);
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0] : Tensor();
  }
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& op, const std::string& node,
                                          const Tensor& handle, const Tensor* value = nullptr) {
    OpTester t(op, node);
    t.UseDevice(device_).Input(handle);
    if (op != "VarIsInitializedOp" && op != "DestroyResourceOp") t.Attr("dtype", DT_FLOAT);
    if (value != nullptr) t.Input(*value);
    return t.Run();
  }

  std::shared_ptr<TestCpuDevice> device_ = std::make_shared<TestCpuDevice>();
};

TEST_F(ResourceVariableTest, HandleFields) {
  Tensor h = Handle("v");
  ASSERT_EQ(h.dtype(), DT_RESOURCE);
  const ResourceHandle& rh = h.scalar<ResourceHandle>();
  EXPECT_EQ(rh.device, device_->name());
  EXPECT_EQ(rh.container, "localhost");
  EXPECT_EQ(rh.name, "v");
  EXPECT_EQ(rh.type_name, "Var");
  EXPECT_EQ(Handle("v2", "shared").scalar<ResourceHandle>().name, "shared");
}

TEST_F(ResourceVariableTest, InitAssignReadAcrossRuns) {
  Tensor h = Handle("v");
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> init, Run("VarIsInitializedOp", "is_init", h));
  EXPECT_FALSE(init[0].scalar<bool>());

  auto r = Run("ReadVariableOp", "read", h);
  ExpectError(r, absl::StatusCode::kFailedPrecondition, "node 'read'");
  ExpectError(r, absl::StatusCode::kFailedPrecondition, "resource variable v");

  Tensor value = F({1, 2});
  ASSERT_TRUE(Run("AssignVariableOp", "assign", h, &value).ok());
  // A fresh handle kernel on the same device names the same variable.
  Tensor h2 = Handle("v");
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> read, Run("ReadVariableOp", "read", h2));
  ExpectTensor(F({1, 2}), read[0]);
  ASSERT_OK_AND_ASSIGN(init, Run("VarIsInitializedOp", "is_init", h2));
  EXPECT_TRUE(init[0].scalar<bool>());

  // Updates do not change a value read earlier.
  Tensor delta = F({10, 10});
  ASSERT_TRUE(Run("AssignAddVariableOp", "add", h, &delta).ok());
  ExpectTensor(F({1, 2}), read[0]);
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> read2, Run("ReadVariableOp", "read", h));
  ExpectTensor(F({11, 12}), read2[0]);
  ASSERT_TRUE(Run("AssignSubVariableOp", "sub", h, &delta).ok());
  ExpectTensor(F({11, 12}), read2[0]);
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> read3, Run("ReadVariableOp", "read", h));
  ExpectTensor(F({1, 2}), read3[0]);

  Tensor wrong = F({1, 2, 3});
  ExpectError(Run("AssignAddVariableOp", "add2", h, &wrong), absl::StatusCode::kInvalidArgument,
              "node 'add2'");

  OpTester shape("VariableShape");
  shape.UseDevice(device_).Input(h);
  ASSERT_RUN_OK(std::vector<Tensor> s, shape);
  ExpectTensor(Tensor::FromVector<int32_t>({2}), s[0]);
}

TEST_F(ResourceVariableTest, UpdateUninitializedIsFailedPrecondition) {
  Tensor h = Handle("u");
  Tensor delta = F({1, 1});
  ExpectError(Run("AssignAddVariableOp", "add", h, &delta), absl::StatusCode::kFailedPrecondition,
              "node 'add'");
}

TEST_F(ResourceVariableTest, DestroyAndGather) {
  Tensor h = Handle("g");
  Tensor value = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  ASSERT_TRUE(Run("AssignVariableOp", "assign", h, &value).ok());

  OpTester gather("ResourceGather", "rg");
  gather.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("Tindices", DT_INT32);
  gather.Input(h).Input(Tensor::FromVector<int32_t>({2, 0}));
  ASSERT_RUN_OK(std::vector<Tensor> rows, gather);
  ExpectTensor(Tensor::FromVector<float>({5, 6, 1, 2}, {2, 2}), rows[0]);

  OpTester bad("ResourceGather", "rg2");
  bad.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("Tindices", DT_INT32);
  bad.Input(h).Input(Tensor::FromVector<int32_t>({3}));
  ExpectError(bad.Run(), absl::StatusCode::kInvalidArgument, "node 'rg2'");

  ASSERT_TRUE(Run("DestroyResourceOp", "destroy", h).ok());
  ExpectError(Run("ReadVariableOp", "read", h), absl::StatusCode::kFailedPrecondition,
              "node 'read'");
  OpTester strict("DestroyResourceOp", "destroy2");
  strict.UseDevice(device_).Attr("ignore_lookup_error", false).Input(h);
  ExpectError(strict.Run(), absl::StatusCode::kNotFound, "node 'destroy2'");
}

}  // namespace
}  // namespace graphrun
