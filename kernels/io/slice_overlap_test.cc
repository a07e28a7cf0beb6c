// FindOverlap (checkpoint_internal.h): the slices of one saved tensor that
// share an element, found by a sweep instead of comparing every pair.
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/io/checkpoint_internal.h"
#include "kernels/io/checkpoint_util.h"

namespace graphrun {
namespace checkpoint {
namespace {

TensorSlice Box(std::vector<std::pair<int64_t, int64_t>> dims) {
  TensorSlice s;
  for (auto [start, length] : dims) s.AddDim(start, length);
  return s;
}

// The answer by comparing every pair: does any pair overlap or repeat?
bool AnyOverlap(const std::vector<TensorSlice>& v) {
  for (size_t a = 0; a < v.size(); ++a) {
    for (size_t b = a + 1; b < v.size(); ++b) {
      if (v[a] == v[b] || IntersectionVolume(v[a], v[b]) > 0) return true;
    }
  }
  return false;
}

TEST(SliceOverlapTest, AgreesWithComparingEveryPair) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    const int rank = 1 + round % 3, n = 1 + static_cast<int>(rng() % 12);
    std::vector<TensorSlice> v;
    for (int i = 0; i < n; ++i) {
      TensorSlice s;
      for (int d = 0; d < rank; ++d) s.AddDim(rng() % 6, rng() % 4);  // lengths 0..3
      v.push_back(s);
    }
    auto found = FindOverlap(v, "t");
    ASSERT_TRUE(found.ok()) << found.status();
    const bool want = AnyOverlap(v);
    EXPECT_EQ(found->first >= 0, want) << "round " << round;
    if (found->first >= 0) {
      const TensorSlice &a = v[found->first], &b = v[found->second];
      EXPECT_NE(found->first, found->second);
      EXPECT_TRUE(a == b || IntersectionVolume(a, b) > 0)
          << a.DebugString() << " " << b.DebugString();
    }
  }
}

TEST(SliceOverlapTest, EqualEmptySlicesAndScalarsRepeat) {
  auto empty = FindOverlap({Box({{2, 0}}), Box({{0, 1}}), Box({{2, 0}})}, "t");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, std::make_pair(int64_t{0}, int64_t{2}));
  auto distinct_empty = FindOverlap({Box({{2, 0}}), Box({{1, 2}})}, "t");
  EXPECT_EQ(distinct_empty->first, -1);  // the empty slice shares no element
  auto scalars = FindOverlap({TensorSlice(), TensorSlice()}, "t");
  EXPECT_GE(scalars->first, 0);
}

// A 200,000-way partition along either axis, the way partitioned variables
// are saved, takes one sort (comparing every pair, 2e10 of them, took
// minutes); a late overlap is still found.
TEST(SliceOverlapTest, LargePartitionsAlongAnyAxis) {
  for (int axis = 0; axis < 2; ++axis) {
    std::vector<TensorSlice> v;
    const int64_t n = 200'000;
    v.reserve(n + 1);
    for (int64_t i = 0; i < n; ++i) {
      v.push_back(axis == 0 ? Box({{i, 1}, {0, 8}}) : Box({{0, 8}, {n - 1 - i, 1}}));
    }
    auto none = FindOverlap(v, "t");
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_EQ(none->first, -1);
    v.push_back(axis == 0 ? Box({{n - 2, 2}, {7, 1}}) : Box({{7, 1}, {3, 2}}));
    auto late = FindOverlap(v, "t");
    ASSERT_TRUE(late.ok()) << late.status();
    EXPECT_TRUE(late->first == n || late->second == n) << late->first << " " << late->second;
  }
}

// A grid is cut along both axes: the sweep compares each slice with the
// open ones of its band, and a bound on that work is ResourceExhausted.
TEST(SliceOverlapTest, GridWithinAndBeyondTheBound) {
  std::vector<TensorSlice> grid;
  for (int64_t r = 0; r < 300; ++r) {
    for (int64_t c = 0; c < 300; ++c) grid.push_back(Box({{r, 1}, {c, 1}}));
  }
  auto ok = FindOverlap(grid, "t");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->first, -1);
  auto bounded = FindOverlap(grid, "tensor 'w'", /*max_comparisons=*/1'000'000);
  EXPECT_EQ(bounded.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(bounded.status().message(),
            "tensor 'w': 90000 slices are too many to check for overlaps");
}

}  // namespace
}  // namespace checkpoint
}  // namespace graphrun
