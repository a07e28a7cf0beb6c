#include "graph/graph.h"

#include "gmock/gmock.h"
#include "graph/ops/all_ops.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace {

using test::ConstNode;
using test::OpNode;
using test::ParseGraph;
using ::testing::HasSubstr;

absl::Status Import(const std::string& text) {
  return GraphFromGraphDef(ParseGraph(text), DefaultOpRegistry()).status();
}

TEST(GraphImportTest, ValidGraphRoundTrips) {
  std::string text = ConstNode("a", "DT_FLOAT", "float_val", "1") +
                     OpNode("b", "Neg", "input: 'a'") +
                     OpNode("c", "AddV2", "input: 'a' input: 'b' input: '^a'");
  auto g = GraphFromGraphDef(ParseGraph(text), DefaultOpRegistry());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->num_nodes(), 3);
  Node* c = (*g)->FindNode("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->num_inputs(), 2);
  EXPECT_EQ(c->output_type(0), DT_FLOAT);
  EXPECT_EQ(c->output_shape(0), PartialShape({}));
  tensorflow::GraphDef out;
  (*g)->ToGraphDef(&out);
  ASSERT_EQ(out.node_size(), 3);
  EXPECT_THAT(out.node(2).input(), ::testing::ElementsAre("a", "b", "^a"));
}

struct BadCase {
  std::string name;
  std::string text;
  std::string needle;
};

class GraphImportErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(GraphImportErrorTest, IsInvalidArgumentNamingTheNode) {
  absl::Status s = Import(GetParam().text);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(GetParam().needle)) << s;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GraphImportErrorTest,
    ::testing::Values(
        BadCase{"unknown_op", "node { name: 'x' op: 'Frobnicate' }",
                "node 'x': op type not registered 'Frobnicate'"},
        BadCase{"duplicate",
                ConstNode("a", "DT_FLOAT", "float_val", "1") +
                    ConstNode("a", "DT_FLOAT", "float_val", "1"),
                "node 'a': duplicate"},
        BadCase{"missing_input", OpNode("n", "Neg", "input: 'ghost'"),
                "node 'n': input 'ghost' names an unknown node"},
        BadCase{"too_few_inputs",
                ConstNode("a", "DT_FLOAT", "float_val", "1") + OpNode("n", "AddV2", "input: 'a'"),
                "node 'n' (op AddV2): expects 2 inputs but has 1"},
        BadCase{"too_many_inputs",
                ConstNode("a", "DT_FLOAT", "float_val", "1") +
                    OpNode("n", "Neg", "input: 'a' input: 'a'"),
                "node 'n' (op Neg): expects 1 inputs but has more"},
        BadCase{"bad_output_index",
                ConstNode("a", "DT_FLOAT", "float_val", "1") + OpNode("n", "Neg", "input: 'a:3'"),
                "node 'n': input 'a:3' asks for output 3"},
        BadCase{"type_mismatch",
                ConstNode("a", "DT_INT32", "int_val", "1") + OpNode("n", "Neg", "input: 'a'"),
                "node 'n' (op Neg): input 0 expects float but 'a' is int32"},
        BadCase{"missing_attr", "node { name: 'n' op: 'Placeholder' }",
                "node 'n' (op Placeholder): missing attr 'dtype'"},
        BadCase{"disallowed_type",
                ConstNode("a", "DT_BOOL", "bool_val", "true") +
                    OpNode("n", "Neg", "input: 'a'", "DT_BOOL"),
                "node 'n' (op Neg): attr 'T' is bool, not one of"},
        BadCase{"wrong_attr_kind",
                "node { name: 'n' op: 'Placeholder' attr { key: 'dtype' value { i: 3 } } }",
                "node 'n' (op Placeholder): attr 'dtype' should be type"},
        BadCase{"cycle", OpNode("p", "Neg", "input: 'q'") + OpNode("q", "Neg", "input: 'p'"),
                "is on a cycle that is not a while loop"},
        BadCase{"shape_mismatch",
                "node { name: 'a' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } } "
                "attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 "
                "} } } } } }"
                "node { name: 'b' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } } "
                "attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 "
                "} } } } } }" +
                    OpNode("n", "AddV2", "input: 'a' input: 'b'"),
                "node 'n'"},
        BadCase{"data_after_control",
                ConstNode("a", "DT_FLOAT", "float_val", "1") +
                    OpNode("n", "Neg", "input: '^a' input: 'a'"),
                "node 'n': data input 'a' after a control input"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(GraphParseTest, BinaryAndTextWithComments) {
  tensorflow::GraphDef g = ParseGraph(ConstNode("a", "DT_FLOAT", "float_val", "1"));
  std::string bin;
  ASSERT_TRUE(g.SerializeToString(&bin));
  auto from_bin = ParseGraphDef(bin);
  ASSERT_TRUE(from_bin.ok());
  EXPECT_EQ(from_bin->node(0).name(), "a");
  auto from_text = ParseGraphDef("# a comment\nnode { name: 'z' op: 'NoOp' }  # trailing\n", true);
  ASSERT_TRUE(from_text.ok());
  EXPECT_EQ(from_text->node(0).name(), "z");
  auto garbage = ParseGraphDef("node { name: ");
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
}

// Text nested deeper than the binary parser allows is an error, not a
// stack overflow (2,500 levels of attr { value { func { ... } } } crashed).
TEST(GraphParseTest, DeepTextNestingIsRefused) {
  auto nested = [](int depth) {
    std::string open, close;
    for (int i = 0; i < depth; ++i) {
      open += "attr { key: 'a' value { func { name: 'f' ";
      close += "} } } ";
    }
    return "node { name: 'x' op: 'NoOp' " + open + close + "}";
  };
  ASSERT_TRUE(ParseGraphDef(nested(30), true).ok());  // 92 levels
  for (int depth : {40, 2500, 100000}) {
    auto deep = ParseGraphDef(nested(depth), true);
    EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument) << depth;
    EXPECT_THAT(std::string(deep.status().message()),
                ::testing::HasSubstr("recursion limit of 100"))
        << deep.status();
  }
}

TEST(OpRegistryTest, BuilderParsesTensorFlowSpecs) {
  OpRegistry r;
  ASSERT_TRUE(r.AddOrError(OpDefBuilder("T1")
                               .Input("xs: N * T")
                               .Input("r: Ref(int32)")
                               .Output("y: T")
                               .Attr("T: {float, int64}")
                               .Attr("N: int >= 2")
                               .Attr("flag: bool = true")
                               .Attr("dims: list(int) >= 0 = [1, 2]")
                               .Attr("shape: shape = { unknown_rank: true }")
                               .Attr("mode: {'a', 'b'} = 'a'"))
                  .ok());
  const auto* d = r.LookUp("T1");
  ASSERT_NE(d, nullptr);
  const auto& op = d->op_def;
  EXPECT_EQ(op.input_arg(0).number_attr(), "N");
  EXPECT_EQ(op.input_arg(0).type_attr(), "T");
  EXPECT_TRUE(op.input_arg(1).is_ref());
  EXPECT_EQ(op.input_arg(1).type(), DT_INT32);
  EXPECT_EQ(op.attr(1).minimum(), 2);
  EXPECT_TRUE(op.attr(2).default_value().b());
  EXPECT_EQ(op.attr(3).default_value().list().i_size(), 2);
  EXPECT_TRUE(op.attr(4).default_value().shape().unknown_rank());
  EXPECT_EQ(op.attr(5).type(), "string");
  EXPECT_EQ(op.attr(5).allowed_values().list().s_size(), 2);
  EXPECT_EQ(r.AddOrError(OpDefBuilder("T1")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.AddOrError(OpDefBuilder("T2").Input("x: Q")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorNameTest, Parses) {
  auto a = ParseTensorName("scope/x:2");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->node, "scope/x");
  EXPECT_EQ(a->index, 2);
  auto c = ParseTensorName("^y");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->IsControl());
  EXPECT_FALSE(ParseTensorName("").ok());
  EXPECT_FALSE(ParseTensorName("^").ok());
}

// TensorFlow's node-name rule, as sessions check clients' graphs.
TEST(NodeNameTest, TensorFlowsRule) {
  for (const char* ok :
       {"x", "scope/x_1", "a.b-c", "_SOURCE", "7", ".x", "while/Enter>body/y", "a>.b"}) {
    EXPECT_TRUE(IsValidNodeName(ok)) << ok;
  }
  for (const char* bad :
       {"", "a b", "x:0", "^x", "-x", "/x", "a>", "a>_b", "a>>b", "caf\xc3\xa9", "a\nb"}) {
    EXPECT_FALSE(IsValidNodeName(bad)) << bad;
  }
  tensorflow::GraphDef def;
  def.add_node()->set_name("ok");
  tensorflow::NodeDef* n = def.add_node();
  n->set_name("x:0");
  n->set_op("Const");
  absl::Status s = ValidateNodeNames(def);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "node 'x:0' (op Const): the name has characters TensorFlow does not allow in node "
            "names (its rule: [A-Za-z0-9._][A-Za-z0-9_./-]*, then pieces "
            "'>'[A-Za-z0-9.][A-Za-z0-9_./-]*)");
  n->set_name("");
  EXPECT_EQ(ValidateNodeNames(def).message(), "a node (op Const) has an empty name");
  // Function bodies are held to it as well.
  n->set_name("x");
  tensorflow::FunctionDef* f = def.mutable_library()->add_function();
  f->mutable_signature()->set_name("f");
  tensorflow::NodeDef* body = f->add_node_def();
  body->set_name("b ad");
  body->set_op("Mul");
  EXPECT_THAT(std::string(ValidateNodeNames(def).message()),
              ::testing::StartsWith("node 'b ad' of function 'f' (op Mul): the name has"));
}

// A list argument's length is bounded before anything is allocated for it.
TEST(GraphImportTest, HugeListLengthIsRefused) {
  absl::Status s = Import(
      "node { name: 'm' op: 'Merge' attr { key: 'T' value { type: DT_FLOAT } } "
      "attr { key: 'N' value { i: 4000000000 } } }");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'm': attr 'N' = 4000000000 is above the limit"));
}

// A shape attr (a Placeholder's) holds to the 254 dimensions a tensor may have.
TEST(GraphImportTest, ShapeAttrsOfMoreThan254DimensionsAreRefused) {
  std::string dims;
  for (int i = 0; i < 255; ++i) dims += "dim { size: 1 } ";
  absl::Status s = Import(
      "node { name: 'p' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } "
      "attr { key: 'shape' value { shape { " +
      dims + "} } } }");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'p' (op Placeholder): attr 'shape' has a shape of more "
                                     "than the 254 dimensions a tensor may have"));
}

}  // namespace
}  // namespace graphrun
