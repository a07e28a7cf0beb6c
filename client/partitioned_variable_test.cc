// PartitionedVariable: TensorFlow's part names and sizes, save-slice info
// (member and "_save_slice_info" attr), the full initial value split over
// the parts (bit-equal to an unpartitioned variable's), reads, gathers and
// assigns through the parts, and the errors.
#include "client/partitioned_variable.h"

#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/client_session.h"
#include "client/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

bool BitEqual(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.TotalBytes() == b.TotalBytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

std::vector<int64_t> Dims(const PartialShape& s) {
  return std::vector<int64_t>(s.dims().begin(), s.dims().end());
}

// A [7, 3] table with distinct, inexact values.
Tensor Table() {
  Tensor t(DT_FLOAT, TensorShape({7, 3}));
  for (int i = 0; i < 21; ++i) t.flat<float>()[i] = 0.1f * static_cast<float>(i) - 0.7f;
  return t;
}

// Explicit part sizes (a placement plan's shards): rows, offsets, the
// same full initial value; sizes that do not split the rows are an error
// naming the variable.
TEST(PartitionedVariableTest, ExplicitPartSizes) {
  Scope root = Scope::NewRootScope();
  Tensor table = Table();
  PartitionedVariable w(root.WithOpName("w"), {7, 3}, DT_FLOAT, std::vector<int64_t>{1, 4, 2},
                        init::Constant(table));
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(w.num_parts(), 3);
  EXPECT_THAT(Dims(w.parts()[1].shape()), ElementsAre(4, 3));
  EXPECT_EQ(w.part_offset(1), 1);
  EXPECT_EQ(w.part_offset(2), 5);
  EXPECT_EQ(w.parts()[2].save_slice_info()->Spec(), "7 3 5,2:0,3");
  Output read = w.Read();
  ClientSession session(root);
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(root)}).ok());
  auto v = session.Run({read});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(BitEqual((*v)[0], table));

  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{3, 3}, {7, 0}, {8, -1}}) {
    Scope r = Scope::NewRootScope();
    PartitionedVariable x(r.WithOpName("x"), {7, 3}, DT_FLOAT, bad, init::Zeros());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("'x'"));
    EXPECT_TRUE(x.parts().empty());
  }
}

TEST(PartitionedVariableTest, NamesSizesAndSaveSliceInfo) {
  Scope root = Scope::NewRootScope();
  PartitionedVariable w(root.WithOpName("w"), {7, 3}, DT_FLOAT, 3);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(w.name(), "w");
  ASSERT_EQ(w.num_parts(), 3);
  // TensorFlow's sizes: the first 7 % 3 parts get one row more.
  const int64_t rows[] = {3, 2, 2}, offsets[] = {0, 3, 5};
  for (int k = 0; k < 3; ++k) {
    const Variable& p = w.parts()[k];
    EXPECT_EQ(p.name(), absl::StrCat("w/part_", k));
    EXPECT_THAT(Dims(p.shape()), ElementsAre(rows[k], 3));
    EXPECT_EQ(w.part_offset(k), offsets[k]);
    ASSERT_NE(p.save_slice_info(), nullptr);
    EXPECT_EQ(p.save_slice_info()->full_name, "w");
    EXPECT_EQ(p.save_slice_info()->Spec(), absl::StrCat("7 3 ", offsets[k], ",", rows[k], ":0,3"));
    const auto& attrs = p.op().node()->def().attr();
    ASSERT_TRUE(attrs.count("_save_slice_info"));
    EXPECT_EQ(attrs.at("_save_slice_info").s(),
              absl::StrCat("w 7 3 ", offsets[k], ",", rows[k], ":0,3"));
  }
  // More parts than rows: one row each.
  PartitionedVariable small(root.WithOpName("small"), {2, 5}, DT_FLOAT, 4);
  EXPECT_EQ(small.num_parts(), 2);
  // A plain variable has no slice info.
  Variable plain(root.WithOpName("plain"), {2}, DT_FLOAT);
  EXPECT_EQ(plain.save_slice_info(), nullptr);
}

TEST(PartitionedVariableTest, InitialValueIsTheUnpartitionedOne) {
  // Fan-dependent and random: per-part initialization would differ.
  auto initial = [](int parts) {
    Scope root = Scope::NewRootScope();
    root.SetGraphSeed(5);
    Output read;
    if (parts == 0) {
      Variable w(root.WithOpName("w"), {7, 3}, DT_FLOAT, init::GlorotUniform(11));
      read = w.Read();
    } else {
      PartitionedVariable w(root.WithOpName("w"), {7, 3}, DT_FLOAT, parts, init::GlorotUniform(11));
      read = w.Read();
    }
    ClientSession session(root);
    EXPECT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(root)}).ok());
    auto r = session.Run({read});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0] : Tensor();
  };
  Tensor whole = initial(0);
  ASSERT_EQ(whole.shape(), TensorShape({7, 3}));
  for (int parts : {1, 2, 3, 7}) {
    EXPECT_TRUE(BitEqual(initial(parts), whole)) << parts << " parts";
  }
}

TEST(PartitionedVariableTest, ReadGatherAndAssignGoThroughTheParts) {
  Scope root = Scope::NewRootScope();
  PartitionedVariable w(root.WithOpName("w"), {7, 3}, DT_FLOAT, 3);
  Operation set = w.Assign(root, Table());
  Output full = w.Read();
  Output ids32 = ops::Const(root, Tensor::FromVector<int32_t>({6, 0, 3, 3, 2, 5}));
  Tensor ids64_t(DT_INT64, TensorShape({2, 2}));
  const int64_t ids64_v[] = {4, 1, 2, 6};
  for (int i = 0; i < 4; ++i) ids64_t.flat<int64_t>()[i] = ids64_v[i];
  Output ids64 = ops::Const(root, ids64_t);
  Output rows32 = w.Gather(root, ids32);
  Output rows64 = w.Gather(root, ids64);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(full.shape(), PartialShape({7, 3}));
  EXPECT_EQ(rows32.shape(), PartialShape({6, 3}));
  EXPECT_EQ(rows64.shape(), PartialShape({2, 2, 3}));
  // Each part's gather runs next to the part.
  int gathers = 0;
  for (Node* n : root.graph()->nodes()) {
    if (n->op() != "ResourceGather") continue;
    ++gathers;
    EXPECT_THAT(n->def().attr().at("_class").list().s(0), HasSubstr("loc:@w/part_"));
  }
  EXPECT_EQ(gathers, 6);

  ClientSession session(root);
  ASSERT_TRUE(session.Run({}, {}, {set}).ok());
  auto r = session.Run({full, rows32, rows64, w.parts()[1].Read()});
  ASSERT_TRUE(r.ok()) << r.status();
  const Tensor table = Table();
  EXPECT_TRUE(BitEqual((*r)[0], table));
  auto expect_rows = [&](const Tensor& got, const std::vector<int>& ids) {
    ASSERT_EQ(got.NumElements(), static_cast<int64_t>(ids.size() * 3));
    for (size_t i = 0; i < ids.size(); ++i) {
      for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(got.flat<float>()[i * 3 + j], table.flat<float>()[ids[i] * 3 + j])
            << "id " << ids[i];
      }
    }
  };
  expect_rows((*r)[1], {6, 0, 3, 3, 2, 5});
  expect_rows((*r)[2], {4, 1, 2, 6});
  // Part 1 holds rows 3 and 4.
  ASSERT_EQ((*r)[3].shape(), TensorShape({2, 3}));
  EXPECT_EQ((*r)[3].flat<float>()[0], table.flat<float>()[9]);
  EXPECT_EQ((*r)[3].flat<float>()[5], table.flat<float>()[14]);
}

// Gather is an unpartitioned gather, bit for bit: TensorFlow's even parts
// (K = 1, 2, 3, one row each) and explicit sizes, ids of both types, of
// static and of unknown shape, repeated and in any order. With K > 1 it
// routes the ids with DynamicPartition / DynamicStitch and each part
// gathers once, next to itself.
TEST(PartitionedVariableTest, GatherIsTheUnpartitionedGather) {
  struct Layout {
    int num_parts;
    std::vector<int64_t> sizes;  // explicit when not empty
  };
  const Layout layouts[] = {{1, {}}, {2, {}}, {3, {}}, {7, {}}, {3, {1, 4, 2}}, {3, {5, 1, 1}}};
  const Tensor table = Table();
  const Tensor ids_matrix =
      Tensor::FromVector<int32_t>({6, 0, 3, 3, 2, 5, 4, 1, 6, 0, 2, 2}, TensorShape({3, 4}));
  Tensor ids_vector(DT_INT64, TensorShape({9}));
  const int64_t ids_vector_v[] = {4, 1, 2, 6, 0, 5, 3, 4, 1};
  for (int i = 0; i < 9; ++i) ids_vector.flat<int64_t>()[i] = ids_vector_v[i];
  for (const Layout& layout : layouts) {
    SCOPED_TRACE(
        absl::StrCat(layout.num_parts, " parts of [", absl::StrJoin(layout.sizes, ","), "]"));
    Scope root = Scope::NewRootScope();
    Variable whole(root.WithOpName("whole"), {7, 3}, DT_FLOAT, init::Constant(table));
    std::optional<PartitionedVariable> w;
    if (layout.sizes.empty()) {
      w.emplace(root.WithOpName("w"), PartialShape({7, 3}), DT_FLOAT, layout.num_parts,
                init::Constant(table));
    } else {
      w.emplace(root.WithOpName("w"), PartialShape({7, 3}), DT_FLOAT, layout.sizes,
                init::Constant(table));
    }
    ASSERT_EQ(w->num_parts(), layout.num_parts);
    Output static_ids = ops::Const(root, ids_matrix);
    Output dynamic_ids = ops::Placeholder(root, DT_INT64);  // unknown rank
    Output got_static = w->Gather(root, static_ids);
    Output got_dynamic = w->Gather(root, dynamic_ids);
    Output want_static = ops::ResourceGather(root, whole.handle(), static_ids, DT_FLOAT);
    Output want_dynamic = ops::ResourceGather(root, whole.handle(), dynamic_ids, DT_FLOAT);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(got_static.shape(), PartialShape({3, 4, 3}));
    EXPECT_FALSE(got_dynamic.shape().known_rank());
    std::set<std::string> gather_groups;
    int partitions = 0, stitches = 0;
    for (Node* n : root.graph()->nodes()) {
      partitions += n->op() == "DynamicPartition";
      stitches += n->op() == "DynamicStitch";
      if (n->op() == "ResourceGather" && absl::StartsWith(n->name(), "embedding_lookup")) {
        gather_groups.insert(n->def().attr().at("_class").list().s(0));
      }
    }
    if (layout.num_parts > 1) {
      // Ids and positions, per lookup; one gather per part and lookup.
      EXPECT_EQ(partitions, 4);
      EXPECT_EQ(stitches, 2);
      EXPECT_EQ(gather_groups.size(), static_cast<size_t>(layout.num_parts));
    }
    ClientSession session(root);
    ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(root)}).ok());
    auto r = session.Run({{dynamic_ids, ids_vector}},
                         {got_static, want_static, got_dynamic, want_dynamic});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].shape(), TensorShape({3, 4, 3}));
    EXPECT_TRUE(BitEqual((*r)[0], (*r)[1]));
    EXPECT_EQ((*r)[2].shape(), TensorShape({9, 3}));
    EXPECT_TRUE(BitEqual((*r)[2], (*r)[3]));
    // No ids: no rows.
    auto empty = session.Run({{dynamic_ids, Tensor(DT_INT64, TensorShape({0, 2}))}}, {got_dynamic});
    ASSERT_TRUE(empty.ok()) << empty.status();
    EXPECT_EQ((*empty)[0].shape(), TensorShape({0, 2, 3}));
  }
}

// An id outside [0, 7) is an error from the gather of the part it would
// follow, naming that node, not a row of zeros.
TEST(PartitionedVariableTest, GatherOfAnIdOutOfRangeFails) {
  Scope root = Scope::NewRootScope();
  PartitionedVariable w(root.WithOpName("w"), {7, 3}, DT_FLOAT, 3, init::Constant(Table()));
  Output ids = ops::Placeholder(root, DT_INT32);
  Output rows = w.Gather(root, ids);
  ASSERT_TRUE(root.ok()) << root.status();
  ClientSession session(root);
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(root)}).ok());
  // Parts of 3, 2, 2 rows at offsets 0, 3, 5.
  struct Case {
    int32_t id;
    const char* node;
    const char* message;
  };
  for (const Case& c : {Case{7, "embedding_lookup/part_2/ResourceGather", "= 2 is not in [0, 2)"},
                        Case{100, "embedding_lookup/part_2/ResourceGather", "= 95 is not in"},
                        Case{-1, "embedding_lookup/part_0/ResourceGather", "= -1 is not in"}}) {
    SCOPED_TRACE(c.id);
    auto r = session.Run({{ids, Tensor::FromVector<int32_t>({0, c.id, 4})}}, {rows});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(absl::StrCat("node '", c.node, "' (op ResourceGather)")));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
  }
  auto ok = session.Run({{ids, Tensor::FromVector<int32_t>({0, 6, 4})}}, {rows});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(PartitionedVariableTest, ErrorsNameTheVariable) {
  {
    Scope root = Scope::NewRootScope();
    PartitionedVariable w(root.WithOpName("w"), {-1, 3}, DT_FLOAT, 2, init::Zeros());
    EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(root.status().message(), HasSubstr("partitioned variable 'w'"));
    EXPECT_TRUE(w.parts().empty());
    EXPECT_EQ(w.Read().node(), nullptr);
  }
  {
    Scope root = Scope::NewRootScope();
    PartitionedVariable w(root.WithOpName("emb"), {4, 3}, DT_FLOAT, 0);
    EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(root.status().message(), HasSubstr("'emb'"));
  }
  {
    Scope root = Scope::NewRootScope();
    Variable v(root.WithOpName("v"), {2, 3}, DT_FLOAT);
    SaveSliceInfo info{"full", TensorShape({4, 3}), {0, 0}, {3, 3}};  // not v's shape
    v.SetSaveSliceInfo(info);
    EXPECT_THAT(root.status().message(), HasSubstr("variable 'v'"));
    EXPECT_EQ(v.save_slice_info(), nullptr);
  }
  {
    Scope root = Scope::NewRootScope();
    Variable v(root.WithOpName("v"), {2, 3}, DT_FLOAT);
    v.SetSaveSliceInfo(SaveSliceInfo{"full", TensorShape({3, 3}), {2, 0}, {2, 3}});
    EXPECT_THAT(root.status().message(), HasSubstr("leaves the full shape"));
  }
}

}  // namespace
}  // namespace client
}  // namespace graphrun
