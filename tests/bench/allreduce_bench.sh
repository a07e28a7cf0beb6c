#!/usr/bin/env bash
# All-reduce between 2 and 4 processes on one host at 1 KiB, 1 MiB and
# 64 MiB: graphrun's task transport (tests/bench/allreduce_bench.cc: a
# gRPC server and data channel per process, RemoteCollectives' ring or
# recursive doubling), gloo (torch.distributed, Debian's python3-torch)
# and raw single-stream loopback TCP at the same message size, measured in
# the same run, REPS times interleaved; medians. One line per case:
#
#   allreduce bytes=<n> procs=<p> transport=<shm|tcp> graphrun_busbw=<GB/s>
#       gloo_busbw=<GB/s> tcp_GBps=<GB/s> graphrun_us=<t> gloo_us=<t>
#
# busbw = bytes / time * 2(p-1)/p, as nccl-tests define it. graphrun's
# tasks exchange through their data channels: transport=shm with same-host
# reads (payloads of 64 KiB and more copied straight from the peer's
# memory, docs/distributed.md), transport=tcp with every byte over loopback
# TCP (GRAPHRUN_SAME_HOST_READS=0), as between hosts. Both are measured in
# the same run, interleaved with gloo and raw TCP.
#
# usage: tests/bench/allreduce_bench.sh [REPS=3]
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${1:-3}
if ! /usr/bin/python3 -c "import torch.distributed" 2>/dev/null; then
  sudo=; [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch python3-numpy >/dev/null
fi
bazel build -c opt //tests:allreduce_bench >/dev/null 2>&1 || bazel build -c opt //tests:allreduce_bench
B=bazel-out/k8-opt/bin/tests/allreduce_bench
[[ -x "$B" ]] || { echo "no $B" >&2; exit 1; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { sed -n "s/.* $1=\([0-9.e+-]*\).*/\1/p"; }
iters_for() { if (($1 >= 67108864)); then echo 10; elif (($1 >= 1048576)); then echo 30; else echo 300; fi; }

for bytes in 1024 1048576 67108864; do
  for procs in 2 4; do
    su= sb= gu= gb= tu= tb= tcp=
    it=$(iters_for "$bytes")
    for rep in $(seq "$REPS"); do
      g=$(GRAPHRUN_SAME_HOST_READS=1 "$B" --procs="$procs" --bytes="$bytes" --iters="$it")
      su+="$(echo "$g" | field us) "; sb+="$(echo "$g" | field busbw) "
      g=$(GRAPHRUN_SAME_HOST_READS=0 "$B" --procs="$procs" --bytes="$bytes" --iters="$it")
      gu+="$(echo "$g" | field us) "; gb+="$(echo "$g" | field busbw) "
      t=$(/usr/bin/python3 tests/bench/torch_allreduce.py "$procs" "$bytes" "$it" 2>/dev/null)
      tu+="$(echo "$t" | field us) "; tb+="$(echo "$t" | field busbw) "
      tcp+="$("$B" --tcp --bytes="$bytes" --iters=$((it < 50 ? it : 50)) | field GBps) "
    done
    m() { echo "$1" | tr ' ' '\n' | grep . | median; }
    for transport in shm tcp; do
      if [[ $transport == shm ]]; then us=$su bw=$sb; else us=$gu bw=$gb; fi
      echo "allreduce bytes=$bytes procs=$procs transport=$transport graphrun_busbw=$(m "$bw")" \
           "gloo_busbw=$(m "$tb") tcp_GBps=$(m "$tcp") graphrun_us=$(m "$us") gloo_us=$(m "$tu")"
    done
  done
done
