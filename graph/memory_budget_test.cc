// The tensor memory budget: sizes as flags give them, refusals with the
// shape and bytes named, and the count of live tensor bytes.
#include "graph/memory_budget.h"

#include "gmock/gmock.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

TEST(MemoryBudgetTest, ParsesSizes) {
  EXPECT_EQ(*ParseMemorySize("4096", "memory_limit"), 4096);
  EXPECT_EQ(*ParseMemorySize("64k", "memory_limit"), 65536);
  EXPECT_EQ(*ParseMemorySize("512M", "memory_limit"), int64_t{512} << 20);
  EXPECT_EQ(*ParseMemorySize("8G", "memory_limit"), int64_t{8} << 30);
  EXPECT_EQ(*ParseMemorySize("1.5GiB", "memory_limit"), int64_t{3} << 29);
  EXPECT_EQ(*ParseMemorySize("2gb", "memory_limit"), int64_t{2} << 30);
  EXPECT_EQ(*ParseMemorySize("50%", "memory_limit"), PhysicalMemoryBytes() / 2);
  for (const char* bad : {"", "lots", "-1", "0", "5Q", "%", "nan", "1e30"}) {
    auto r = ParseMemorySize(bad, "memory_limit");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--memory_limit="));
  }
}

TEST(MemoryBudgetTest, DefaultsFollowPhysicalMemory) {
  MemoryLimits d = DefaultMemoryLimits();
  EXPECT_EQ(d.limit_bytes, PhysicalMemoryBytes() / 10 * 8);
  EXPECT_EQ(d.max_allocation_bytes, d.limit_bytes / 2);
}

TEST(MemoryBudgetTest, AllocationsOverTheCapOrTheLimitAreRefused) {
  SetMemoryLimits(int64_t{64} << 20, int64_t{16} << 20);
  const int64_t before = TensorBytesInUse();
  // Over the per-allocation cap: 32 MiB of floats.
  auto big = Tensor::Allocate(DT_FLOAT, TensorShape({8, 1 << 20}), "node 'x': ");
  ASSERT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(big.status().message()),
            "node 'x': cannot allocate a float tensor of shape [8,1048576]: 33554432 bytes "
            "(32.0 MiB) is over the per-allocation cap of 16.0 MiB (--max_allocation_bytes)");
  EXPECT_EQ(TensorBytesInUse(), before);
  // Under the cap, until the limit: five 12 MiB tensors fit in 64 MiB,
  // a sixth does not.
  std::vector<Tensor> held;
  for (int i = 0; i < 5; ++i) {
    auto t = Tensor::Allocate(DT_UINT8, TensorShape({12 << 20}));
    ASSERT_TRUE(t.ok()) << i << ": " << t.status();
    held.push_back(*t);
  }
  EXPECT_EQ(TensorBytesInUse(), before + 5 * (int64_t{12} << 20));
  auto over = Tensor::Allocate(DT_UINT8, TensorShape({12 << 20}));
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr("over its memory limit of 64.0 MiB (--memory_limit)"));
  // Freed tensors give their bytes back; a tensor's copies share them.
  Tensor copy = held[0];
  held.clear();
  EXPECT_EQ(TensorBytesInUse(), before + (int64_t{12} << 20));
  copy = Tensor();
  EXPECT_EQ(TensorBytesInUse(), before);
  EXPECT_TRUE(Tensor::Allocate(DT_UINT8, TensorShape({12 << 20})).ok());
  // Unchecked tensors (internal, fixed sizes) are counted too.
  {
    Tensor t(DT_FLOAT, TensorShape({1000}));
    EXPECT_EQ(TensorBytesInUse(), before + 4000);
  }
  EXPECT_EQ(TensorBytesInUse(), before);
  EXPECT_GE(PeakTensorBytes(), before + 5 * (int64_t{12} << 20));
  SetMemoryLimits(0, 0);
  EXPECT_EQ(GetMemoryLimits().limit_bytes, DefaultMemoryLimits().limit_bytes);
}

TEST(MemoryBudgetTest, SizesThatOverflowAreRefused) {
  // 2^62 strings: the byte count overflows.
  auto t = Tensor::Allocate(DT_STRING, TensorShape({int64_t{1} << 31, int64_t{1} << 31}));
  EXPECT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("cannot allocate"));
}

}  // namespace
}  // namespace graphrun
