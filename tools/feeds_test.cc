#include "tools/feeds.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tools/npy.h"

namespace graphrun {
namespace tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

tensorflow::GraphDef Graph(const std::string& text) {
  tensorflow::GraphDef def;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &def));
  return def;
}

const char kGraph[] = R"pb(
  node {
    name: "x"
    op: "Placeholder"
    attr {
      key: "dtype"
      value { type: DT_INT64 }
    }
  }
  node {
    name: "c"
    op: "Const"
    attr {
      key: "dtype"
      value { type: DT_BOOL }
    }
    attr {
      key: "value"
      value {
        tensor {
          dtype: DT_BOOL
          tensor_shape {}
          bool_val: true
        }
      }
    }
  }
  node {
    name: "id"
    op: "Identity"
    input: "x"
    attr {
      key: "T"
      value { type: DT_INT64 }
    }
  }
)pb";

TEST(FeedResolverTest, DtypeFromAttrsOrImport) {
  tensorflow::GraphDef def = Graph(kGraph);
  FeedResolver r(def);
  EXPECT_EQ(*r.DtypeOf("x", 0), DT_INT64);
  EXPECT_EQ(*r.DtypeOf("c", 0), DT_BOOL);
  EXPECT_EQ(*r.DtypeOf("id", 0), DT_INT64);  // through GraphFromGraphDef
  EXPECT_EQ(r.DtypeOf("nope", 0).status().message(), "no node named 'nope' in the graph");
  EXPECT_EQ(r.DtypeOf("id", 1).status().message(),
            "node 'id' (Identity) has 1 outputs; there is no output 1");
}

TEST(FeedResolverTest, MakeFeedFromJsonAndNpy) {
  tensorflow::GraphDef def = Graph(kGraph);
  FeedResolver r(def);
  auto t = r.MakeFeed("x:0", "[9007199254740993, -1]");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DT_INT64);
  EXPECT_THAT(t->flat<int64_t>(), ElementsAre(9007199254740993LL, -1));

  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/f.npy";
  ASSERT_TRUE(WriteNpyFile(path, Tensor::FromVector<int64_t>({4, 5})).ok());
  auto n = r.MakeFeed("x:0", "@" + path);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_THAT(n->flat<int64_t>(), ElementsAre(4, 5));

  ASSERT_TRUE(WriteNpyFile(path, Tensor::FromVector<float>({4})).ok());
  EXPECT_EQ(r.MakeFeed("x:0", "@" + path).status().message(),
            "feed 'x:0': " + path + " holds float but the graph expects int64");
  EXPECT_EQ(r.MakeFeed("x:0", "[1.5]").status().message(),
            "feed 'x:0': value 1.5 cannot be int64: not an integer");
  EXPECT_THAT(r.MakeFeed("x:0", "[1,").status().message(),
              HasSubstr("feed 'x:0': invalid JSON at offset 3"));
}

// A placeholder's declared shape bounds what may be fed to it (unknown
// dimensions take any size); no shape attr, or unknown rank, takes any.
TEST(FeedResolverTest, FedShapeMustFitThePlaceholdersShape) {
  tensorflow::GraphDef def = Graph(R"pb(
    node {
      name: "img"
      op: "Placeholder"
      attr {
        key: "dtype"
        value { type: DT_UINT8 }
      }
      attr {
        key: "shape"
        value {
          shape {
            dim { size: -1 }
            dim { size: 2 }
          }
        }
      }
    }
    node {
      name: "any"
      op: "Placeholder"
      attr {
        key: "dtype"
        value { type: DT_FLOAT }
      }
      attr {
        key: "shape"
        value { shape { unknown_rank: true } }
      }
    }
  )pb");
  FeedResolver r(def);
  EXPECT_TRUE(r.MakeFeed("img:0", "[[1, 2], [3, 4], [5, 6]]").ok());
  EXPECT_EQ(r.MakeFeed("img:0", "[[1, 2, 3]]").status().message(),
            "feed 'img:0': cannot feed a value of shape [1,3] to a placeholder of shape [?,2]");
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/flat.npy";
  ASSERT_TRUE(WriteNpyFile(path, Tensor(DT_UINT8, TensorShape({4}))).ok());
  EXPECT_EQ(r.MakeFeed("img:0", "@" + path).status().message(),
            "feed 'img:0': cannot feed a value of shape [4] to a placeholder of shape [?,2]");
  EXPECT_TRUE(r.MakeFeed("any:0", "[[[1]]]").ok());
}

TEST(FeedResolverTest, ImportErrorsAreReported) {
  tensorflow::GraphDef def = Graph(R"pb(node { name: "z" op: "Frobnicate" })pb");
  FeedResolver r(def);
  auto t = r.MakeFeed("z:0", "1");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("feed 'z:0': node 'z'"));
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
