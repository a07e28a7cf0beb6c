#!/usr/bin/env bash
# Packs what the GPU machine runs into one archive of at most 64 MiB: the
# CUDA-built graphrun, the GPU test suite and gpu_benchmark (built for
# x86-64-v3, never -march=native), the shared libraries they need that are
# not CUDA's (gRPC, Protobuf, Abseil, oneDNN, OpenSSL, ...: that machine has
# no Debian packages), scripts/test_gpu.sh and scripts/torch_gpu_train.py.
# cuBLAS, cuDNN and NCCL come from the GPU machine's PyTorch installation.
#
# Usage: scripts/gpu_bundle.sh [OUT.tar.xz]   (default /tmp/graphrun-gpu.tar.xz)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/graphrun-gpu.tar.xz}
targets=(//tools:graphrun //tests/gpu:gpu_test //tests/gpu:gpu_benchmark)
# --config=cuda builds into outputs of their own (bazel-out/*cuda).
bazel build --config=cuda --experimental_convenience_symlinks=ignore "${targets[@]}"
bin=$(bazel info --config=cuda bazel-bin 2>/dev/null)
stage=$(mktemp -d)
root="$stage/graphrun-gpu"
mkdir -p "$root/bin" "$root/lib" "$root/scripts"
cp "$bin/tools/graphrun" "$bin/tests/gpu/gpu_test" "$bin/tests/gpu/gpu_benchmark" "$root/bin/"
chmod u+w "$root"/bin/*
strip "$root"/bin/*
# Every library the binaries load, except CUDA's own and glibc's.
for b in "$root"/bin/*; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libcuda|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libc|libm|libdl|librt|libpthread|ld-linux-x86-64)\.so' |
  while read -r lib; do cp -L "$lib" "$root/lib/"; done
cp scripts/test_gpu.sh scripts/torch_gpu_train.py "$root/scripts/"
tar -C "$stage" -cf - graphrun-gpu | xz -9 -T2 > "$out"
rm -rf "$stage"
size=$(stat -c %s "$out")
echo "gpu_bundle: $out, $((size / 1024 / 1024)) MiB ($size bytes)"
if ((size > 64 * 1024 * 1024)); then
  echo "gpu_bundle: over the 64 MiB a device run carries" >&2
  exit 1
fi
