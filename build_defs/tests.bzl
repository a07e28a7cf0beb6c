"""One cc_test per *_test.cc file in the package."""

# Tests that run on the TEST_ACCEL device carry this tag (and "TestAccel" in
# their names): bazel test --test_tag_filters=test_accel //...
TEST_ACCEL_TAG = "test_accel"

def gr_cc_tests(deps, data = [], size = "small", exclude = [], tags = [], tags_by_src = {}):
    """tags_by_src: source file -> tags of its test only."""
    for src in native.glob(["*_test.cc"], exclude = exclude):
        native.cc_test(
            name = src[:-len(".cc")],
            srcs = [src],
            deps = deps + ["@system//:gtest_main"],
            data = data,
            size = size,
            tags = tags + tags_by_src.get(src, []),
        )
