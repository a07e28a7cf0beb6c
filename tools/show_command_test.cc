// The "Concrete Functions" section of `graphrun show` (saved_model_cli's
// layout) over an object graph with every kind of argument: TensorSpecs,
// Python values, named arguments, several concrete functions of one
// tf.function, a bare concrete function, and children that are not
// functions.
#include "tools/show_command.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace tools {
namespace {

using ::testing::EndsWith;

tensorflow::SavedModel Parse(const std::string& text) {
  tensorflow::SavedModel m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m));
  return m;
}

TEST(ShowConcreteFunctionsTest, ArgumentsOfEveryKind) {
  const std::string spec_a =
      R"(tensor_spec_value { name: "a" shape { dim { size: -1 } } dtype: DT_INT64 })";
  const std::string spec_img =
      R"(tensor_spec_value { name: "img" shape { dim { size: 28 } dim { size: 28 } } dtype: DT_UINT8 })";
  tensorflow::SavedModel m = Parse(R"(
meta_graphs {
  meta_info_def { tags: "serve" }
  object_graph_def {
    nodes {
      children { node_id: 1 local_name: "predict" }
      children { node_id: 2 local_name: "layer" }
      children { node_id: 3 local_name: "bare" }
    }
    nodes { function { concrete_functions: "f_training" concrete_functions: "f_eval" } }
    nodes { user_object { identifier: "_generic_user_object" } }
    nodes { bare_concrete_function { concrete_function_name: "g" } }
    concrete_functions {
      key: "f_eval"
      value { canonicalized_input_signature { tuple_value {
        values { tuple_value { values { )" +
                                   spec_a + R"( } values { bool_value: false } } }
        values { dict_value { } } } } }
    }
    concrete_functions {
      key: "f_training"
      value { canonicalized_input_signature { tuple_value {
        values { tuple_value { values { )" +
                                   spec_a + R"( } values { bool_value: true } } }
        values { dict_value { fields { key: "scale" value { float64_value: 0.5 } } } } } } }
    }
    concrete_functions {
      key: "g"
      value { canonicalized_input_signature { tuple_value {
        values { tuple_value { values { )" +
                                   spec_img + R"( }
                               values { list_value { values { int64_value: 1 } values { string_value: "x" } } }
                               values { none_value { } } } }
        values { dict_value { } } } } }
    }
  }
})");
  EXPECT_THAT(ShowSavedModel(m),
              EndsWith("\nConcrete Functions:\n"
                       "  Function Name: 'bare'\n"
                       "    Option #1\n"
                       "      Callable with:\n"
                       "        Argument #1\n"
                       "          img: TensorSpec(shape=(28, 28), dtype=tf.uint8, name='img')\n"
                       "        Argument #2\n"
                       "          DType: list\n"
                       "          Value: [1, 'x']\n"
                       "        Argument #3\n"
                       "          DType: NoneType\n"
                       "          Value: None\n"
                       "\n  Function Name: 'predict'\n"
                       "    Option #1\n"
                       "      Callable with:\n"
                       "        Argument #1\n"
                       "          a: TensorSpec(shape=(None,), dtype=tf.int64, name='a')\n"
                       "        Argument #2\n"
                       "          DType: bool\n"
                       "          Value: False\n"
                       "    Option #2\n"
                       "      Callable with:\n"
                       "        Argument #1\n"
                       "          a: TensorSpec(shape=(None,), dtype=tf.int64, name='a')\n"
                       "        Argument #2\n"
                       "          DType: bool\n"
                       "          Value: True\n"
                       "        Named Argument #1\n"
                       "          scale\n"));
}

TEST(ShowConcreteFunctionsTest, ModelsWithoutAnObjectGraphHaveNoSection) {
  tensorflow::SavedModel m = Parse(R"(meta_graphs { meta_info_def { tags: "serve" } })");
  EXPECT_EQ(ShowSavedModel(m).find("Concrete Functions"), std::string::npos);
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
