#!/usr/bin/env bash
# A CUDA-built graphrun on a machine without a CUDA driver (every machine
# here): it must start, say `graphrun: no CUDA device: <driver error>;
# running on the CPU` once, run on the CPU, refuse an explicit
# /device:GPU:0 without soft placement (InvalidArgument naming the node),
# place it on the CPU with --soft_placement, and train. Builds
# `--config=cuda //tools:graphrun` (nvcc; minutes) and checks each answer.
# Not in CI (CI builds no CUDA); exits 0 when every check held, 1 otherwise,
# and skips (exit 0, saying so) on a machine that has a driver.
#
# Usage: bash scripts/test_no_driver.sh
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ -e /dev/nvidiactl ]] || ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 >/dev/null 2>&1; then
  echo "test_no_driver: SKIPPED: this machine has a CUDA driver"
  exit 0
fi
bazel build --config=cuda //tools:graphrun >/dev/null 2>&1 || {
  echo "test_no_driver: bazel build --config=cuda //tools:graphrun failed" >&2
  exit 1
}
g="$(bazel info --config=cuda bazel-bin 2>/dev/null)/tools/graphrun"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/mm.pbtxt" <<'EOF'
node { name: "a" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } }
    float_val: 1 float_val: 2 float_val: 3 float_val: 4 } } } }
node { name: "m" op: "MatMul" input: "a" input: "a" device: "/device:GPU:0"
  attr { key: "T" value { type: DT_FLOAT } } }
EOF
fails=0
# check NAME EXPECTED_RC PATTERN... -- ARGS: runs graphrun ARGS, checks the
# exit code and that stdout+stderr holds each pattern (fixed strings).
check() {
  local name=$1 want=$2
  shift 2
  local patterns=()
  while [[ $1 != -- ]]; do patterns+=("$1"); shift; done
  shift
  local out rc
  out=$("$g" "$@" 2>&1)
  rc=$?
  local ok=1
  ((rc == want)) || ok=0
  for p in "${patterns[@]}"; do grep -qF -- "$p" <<<"$out" || ok=0; done
  if ((ok)); then
    echo "test_no_driver: ok: $name"
  else
    echo "test_no_driver: FAILED: $name (exit $rc, wanted $want):"
    sed 's/^/    /' <<<"$out"
    fails=$((fails + 1))
  fi
}
check "explicit GPU without soft placement" 1 \
  "graphrun: no CUDA device: " "; running on the CPU" \
  "InvalidArgument: node 'm' (op MatMul): requested device '/device:GPU:0' matches no device" \
  -- run "$tmp/mm.pbtxt" --fetch m
check "explicit GPU with soft placement runs on the CPU" 0 \
  "m (MatMul): /job:localhost/replica:0/task:0/device:CPU:0 (soft placement" \
  "m:0 = Tensor<float, [2,2]: 7 10 15 22>" \
  -- run "$tmp/mm.pbtxt" --fetch m --soft_placement --log_device_placement
data=/usr/share/datasets/fashion-mnist
if [[ -d $data ]]; then
  check "training on the CPU" 0 '"global_step": 21' \
    -- train --steps=20 --data="$data" --checkpoint_dir="$tmp/ckpt" --format=json
  check "GPU replicas without a GPU" 1 "FailedPrecondition: no GPU device: " \
    -- train --distribution=mirrored --replica_device_type=GPU --steps=5 --data="$data" \
    --checkpoint_dir="$tmp/ckpt_gpu"
else
  echo "test_no_driver: SKIPPED training checks: no $data (apt-get install dataset-fashion-mnist)"
fi
# The driver message is said once per process, not once per probe.
n=$("$g" run "$tmp/mm.pbtxt" --fetch m --soft_placement 2>&1 | grep -c "no CUDA device")
if [[ $n == 1 ]]; then
  echo "test_no_driver: ok: said once"
else
  echo "test_no_driver: FAILED: 'no CUDA device' said $n times"
  fails=$((fails + 1))
fi
((fails == 0)) && echo "test_no_driver: all checks passed" && exit 0
echo "test_no_driver: $fails check(s) failed"
exit 1
