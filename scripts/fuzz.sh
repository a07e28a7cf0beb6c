#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, libFuzzer + ASan + UBSan) and runs each over
# its seed corpus for a share of $1 seconds (default 60, at least 10 s
# each). Fails on any crash, leak, timeout or sanitizer report.
#   graphdef_fuzzer      GraphDef parsing, validation, placement, partitioning
#   tensor_proto_fuzzer  TensorProto decoding (splats, lying sizes, huge shapes)
#   idx_fuzzer           the IDX (MNIST) reader on corrupt files
#   checkpoint_fuzzer    checkpoint index and data readers on corrupt files
#   worker_rpc_fuzzer    the worker service's handlers on sequences of requests
#   master_rpc_fuzzer    the master service's handlers on sequences of requests
#   data_channel_fuzzer  data channel frames and token handshakes, both ways
# FUZZ_RUNS=N instead runs each target for N executions (no time bound);
# FUZZ_TARGETS="graphdef data_channel" runs only those (a campaign:
# FUZZ_TARGETS=master_rpc FUZZ_RUNS=10000000 bash scripts/fuzz.sh; see
# docs/fuzzing.md).
# -entropic=0: libFuzzer's entropic schedule spent three quarters of the
# GraphDef fuzzer's time ranking features (InputCorpus::
# UpdateFeatureFrequency over every object's coverage counters); the plain
# schedule runs 4 to 7 times as many inputs in the same time.
# LeakSanitizer reads tests/fuzz/lsan.supp (OpenSSL's per-thread state; the
# file says why).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
[[ "$secs" == 0 ]] && exit 0
targets=(graphdef:corpus tensor_proto:corpus_tensor_proto idx:corpus_idx
         checkpoint:corpus_checkpoint worker_rpc:corpus_worker_rpc
         master_rpc:corpus_master_rpc data_channel:corpus_data_channel)
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
  chosen=()
  for want in $FUZZ_TARGETS; do
    found=""
    for t in "${targets[@]}"; do
      if [[ "${t%%:*}" == "$want" ]]; then chosen+=("$t"); found=1; fi
    done
    [[ -n "$found" ]] || { echo "fuzz: no target '$want' (FUZZ_TARGETS)" >&2; exit 2; }
  done
  targets=("${chosen[@]}")
fi
# The sanitizer tests' output base (scripts/test_all.sh): --config=fuzz is
# their --config=asan plus libFuzzer's runtime at link time, so only the
# fuzz targets themselves are built here after those tests ran. Its own
# output base also keeps the clang build from evicting the normal gcc one.
ws=$(pwd | md5sum | cut -c1-8)  # one output base per checkout
BZ=(bazel --output_base="$HOME/.cache/graphrun-sanitizers-$ws")
labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:${t%%:*}_fuzzer"); done
# (gold warns of every symbol of clang's static ASan runtime: harmless.)
"${BZ[@]}" build --config=fuzz --experimental_convenience_symlinks=ignore "${labels[@]}" 2>&1 |
  grep -v "Cannot export local symbol '__asan"
bindir="$("${BZ[@]}" info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz"
each=$(( secs / ${#targets[@]} ))
(( each < 10 )) && each=10
for t in "${targets[@]}"; do
  name="${t%%:*}_fuzzer"
  work=$(mktemp -d)
  cp "tests/fuzz/${t#*:}"/* "$work/"
  if [[ -n "${FUZZ_RUNS:-}" ]]; then
    bound=(-runs="$FUZZ_RUNS")
  else
    bound=(-max_total_time="$each")
  fi
  rc=0
  LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
  "$bindir/$name" "${bound[@]}" -entropic=0 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$work/" "$work" > "$work.log" 2>&1 || rc=$?
  grep -E "^stat::number_of_executed_units|^#[0-9]+ *DONE" "$work.log" || true
  if (( rc != 0 )); then
    tail -40 "$work.log"
    echo "fuzz: $name failed (exit $rc); the input is in $work"
    exit 1
  fi
  rm -rf "$work" "$work.log"
  echo "fuzz: $name ran without a finding"
done
