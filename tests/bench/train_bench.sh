#!/usr/bin/env bash
# MLP training throughput: graphrun vs PyTorch, same machine, same run.
#
# graphrun: `graphrun train --local` (one process, DirectSession) with 2
# threads in total (--intra_op_threads=2 --inter_op_threads=1), the
# training set decoded once into memory by IdxDataset, no checkpoints.
# PyTorch: tests/bench/torch_mlp.py (Debian python3-torch) with one torch
# thread and OPENBLAS_NUM_THREADS=2, its best configuration on 2 cores.
# Same model (784-256-256-10), same optimizer, batches 256 and 32. Runs are
# interleaved REPS times; medians and the ratio graphrun / torch are printed.
# Also: graphrun with 1 PS + 2 workers (one process per task, async)
# against a PyTorch RPC parameter server; and synchronous all-reduce:
# graphrun mirrored (2 in-graph replicas in one process) and multi-worker
# mirrored (2 worker processes) against PyTorch DistributedDataParallel
# with gloo (tests/bench/torch_ddp.py, 2 processes), same global batch.
#
# usage: tests/bench/train_bench.sh [REPS=3] [OPTIMIZER=adam|sgd] [SECONDS=5]
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${1:-3}
OPT=${2:-adam}
SECS=${3:-5}
bazel build -c opt //tools:graphrun >/dev/null 2>&1 || bazel build -c opt //tools:graphrun
GR=bazel-out/k8-opt/bin/tools/graphrun
[[ -x "$GR" ]] || { echo "no $GR" >&2; exit 1; }

eps() { sed -n 's/.*"examples_per_sec": \([0-9.e+]*\).*/\1/p'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# Steps so one graphrun run lasts about SECS seconds at the rates seen here.
steps_for() { case $1 in 256) echo $((SECS * 250));; 32) echo $((SECS * 800));; esac; }

if ! /usr/bin/python3 -c "import torch.distributed" 2>/dev/null ||
   ! ls /usr/lib/x86_64-linux-gnu/libopenblas*.so* >/dev/null 2>&1; then
  sudo=; [[ $(id -u) == 0 ]] || sudo=sudo
  # OpenBLAS: without it torch falls back to the reference BLAS (~20x slower).
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch python3-numpy \
      libopenblas0-pthread >/dev/null
fi

declare -A G T D R M W P
for rep in $(seq "$REPS"); do
  for b in 256 32; do
    G[$b]+="$("$GR" train --local --optimizer="$OPT" --batch_size="$b" --steps="$(steps_for "$b")" \
        --checkpoint_dir= --intra_op_threads=2 --inter_op_threads=1 --format=json | eps) "
    D[$b]+="$("$GR" train --ps=1 --workers=2 --strategy=greedy_bytes --optimizer="$OPT" \
        --batch_size="$b" --steps="$(steps_for "$b")" --checkpoint_dir= --format=json | eps) "
  done
  out=$(OPENBLAS_NUM_THREADS=2 TORCH_THREADS=1 /usr/bin/python3 tests/bench/torch_mlp.py "$SECS" "$OPT")
  [[ $rep == 1 ]] && echo "$out" | head -1 | sed 's/^/torch config: /'
  for b in 256 32; do
    T[$b]+="$(echo "$out" | grep "\"batch\": $b," | eps) "
    # PyTorch RPC parameter server, 1 PS + 2 workers, one thread each; "$b" is the
    # global batch (b/2 per worker), as graphrun's --batch_size.
    R[$b]+="$(OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tests/bench/torch_rpc_ps.py "$b" "$SECS" 2 "$OPT" 2>/dev/null | eps) "
    M[$b]+="$("$GR" train --distribution=mirrored --num_replicas=2 --optimizer="$OPT" \
        --batch_size="$b" --steps="$(steps_for "$b")" --checkpoint_dir= --intra_op_threads=1 \
        --inter_op_threads=2 --format=json | eps) "
    W[$b]+="$("$GR" train --distribution=multi_worker_mirrored --workers=2 --optimizer="$OPT" \
        --batch_size="$b" --steps="$(steps_for "$b")" --checkpoint_dir= --format=json | eps) "
    P[$b]+="$(OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tests/bench/torch_ddp.py "$b" "$SECS" 2 "$OPT" 2>/dev/null | eps) "
  done
done

echo "MLP 784-256-256-10, $OPT, median of $REPS (examples/s)"
printf "%-6s %12s %12s %8s %16s %14s %8s\n" batch graphrun torch ratio "graphrun 1ps+2w" "torch rpc-ps" ratio
for b in 256 32; do
  g=$(echo ${G[$b]} | tr ' ' '\n' | median)
  t=$(echo ${T[$b]} | tr ' ' '\n' | median)
  d=$(echo ${D[$b]} | tr ' ' '\n' | median)
  r=$(echo ${R[$b]} | tr ' ' '\n' | median)
  printf "%-6s %12.0f %12.0f %8.2f %16.0f %14.0f %8.2f\n" "$b" "$g" "$t" "$(echo "$g / $t" | bc -l)" \
      "$d" "$r" "$(echo "$d / $r" | bc -l)"
  echo "  raw graphrun: ${G[$b]}| torch: ${T[$b]}| 1ps+2w: ${D[$b]}| torch rpc-ps: ${R[$b]}"
done
echo
echo "synchronous all-reduce, 2 replicas, $OPT, median of $REPS (examples/s)"
printf "%-6s %16s %14s %14s %10s %10s\n" batch "graphrun mirr." "graphrun mwms" "torch ddp" \
    "mirr/ddp" "mwms/ddp"
for b in 256 32; do
  m=$(echo ${M[$b]} | tr ' ' '\n' | median)
  w=$(echo ${W[$b]} | tr ' ' '\n' | median)
  p=$(echo ${P[$b]} | tr ' ' '\n' | median)
  printf "%-6s %16.0f %14.0f %14.0f %10.2f %10.2f\n" "$b" "$m" "$w" "$p" \
      "$(echo "$m / $p" | bc -l)" "$(echo "$w / $p" | bc -l)"
  echo "  raw mirrored: ${M[$b]}| mwms: ${W[$b]}| ddp: ${P[$b]}"
done
