#!/usr/bin/env bash
# Sets up the machine and runs every test:
#   0. clang-format --dry-run --Werror over the tracked C++ sources;
#   1. the whole Bazel test suite;
#   2. the tests again under AddressSanitizer + UBSan, built by clang (all
#      but the long training tests, which take minutes even unsanitized),
#      in a separate Bazel output base so the normal build stays cached
#      (SANITIZERS=0 skips); the fuzz targets (step 4) reuse this build;
#   3. the runtime and distributed tests under ThreadSanitizer, in an output
#      base of their own (TSAN=0 skips). Debian's gRPC, protobuf, Abseil
#      and OpenSSL are not instrumented: TSan ignores what their code does
#      (ignore_noninstrumented_modules) and build_defs/tsan.supp holds the
#      suppressions for their inline header code, each with its reason.
#      Tests tagged no_tsan say in their BUILD file why they are left out;
#   4. a bounded libFuzzer run of every target in scripts/fuzz.sh (GraphDef
#      loading and placement, TensorProto, IDX, checkpoints, worker and
#      master RPC handlers, data channel frames; FUZZ_SECONDS, default 60
#      in all, at least 10 s each; 0 skips).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# One formatter for everyone (.clang-format, Google style base).
git ls-files '*.cc' '*.h' | grep -v '^third_party/' |
  xargs clang-format --dry-run --Werror --style=file
echo "clang-format: clean"
# Tests really run here (not taken from a cache of an earlier run).
log=$(mktemp)
bazel test //... --test_tag_filters=-gpu --test_output=errors --nocache_test_results 2>&1 | tee "$log"
total=$(grep -oE "Executed [0-9]+ out of [0-9]+ tests" "$log" | tail -1 | awk '{print $5}')
echo "bazel: ${total:-0} passed, 0 failed"
ws=$(pwd | md5sum | cut -c1-8)  # one output base per checkout and sanitizer
if [[ "${SANITIZERS:-1}" != 0 ]]; then
  bazel --output_base="$HOME/.cache/graphrun-sanitizers-$ws" test --config=asan \
      --experimental_convenience_symlinks=ignore \
      --test_output=errors //graph/... //kernels/... //placement/... //runtime/... \
      //client/... //distributed/... //tools/... //util/... //tests:all //tests/distributed/... \
      //tests/train:embedding_train_test //tests/train:partitioned_lookup_traffic_test 2>&1 |
    grep -v "Cannot export local symbol '__asan"  # gold on clang's static ASan runtime, harmless
fi
if [[ "${TSAN:-1}" != 0 ]]; then
  tsan_options="ignore_noninstrumented_modules=1 suppressions=$(pwd)/build_defs/tsan.supp"
  bazel --output_base="$HOME/.cache/graphrun-tsan-$ws" test --config=tsan \
      --experimental_convenience_symlinks=ignore --test_output=errors \
      --test_tag_filters=-no_tsan,-gpu --test_env=TSAN_OPTIONS="$tsan_options" \
      //runtime/... //distributed/... //tests/distributed/...
  # The canary's race must be reported under the same flags and options.
  canary=$(bazel --output_base="$HOME/.cache/graphrun-tsan-$ws" info --config=tsan bazel-bin 2>/dev/null)/tests/tsan_canary
  bazel --output_base="$HOME/.cache/graphrun-tsan-$ws" build --config=tsan \
      --experimental_convenience_symlinks=ignore //tests:tsan_canary
  report=$(TSAN_OPTIONS="$tsan_options" "$canary" 2>&1 || true)
  if [[ "$report" == *"WARNING: ThreadSanitizer: data race"* ]]; then
    echo "tsan: the canary's race was reported"
  else
    echo "tsan: the canary's deliberate race was NOT reported: TSan is not seeing graphrun's code" >&2
    exit 1
  fi
  echo "tsan: skipped (tag no_tsan): $(bazel query 'attr(tags, no_tsan, tests(//runtime/... + //distributed/... + //tests/distributed/...))' 2>/dev/null | tr '\n' ' ')"
fi
bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
