#!/usr/bin/env bash
# The op census: the ops used by the TensorFlow graphs in this repository
# (examples/, tools/testdata and its tf2/ and saved_model/) plus any
# GraphDef files or SavedModel directories given, and whether graphrun has
# kernels for them, as a Markdown table (docs/op_census.md holds the last
# run). Common inference ops are listed (marked *) even when unused.
#   bash scripts/op_census.sh [GRAPH_OR_SAVED_MODEL...]
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //tools:op_census >/dev/null 2>&1 || bazel build //tools:op_census
graphs=(examples/*.pbtxt examples/*.pb tools/testdata/tf2/*.pbtxt
        tools/testdata/saved_model/*.pbtxt tools/testdata/*.pbtxt)
existing=()
for g in "${graphs[@]}"; do [[ -e "$g" ]] && existing+=("$g"); done
bazel-bin/tools/op_census "${existing[@]}" "$@"
