#!/usr/bin/env bash
# Installs every Debian package graphrun's build, tests and main job need.
# Idempotent: packages already present are skipped quickly.
set -euo pipefail
PKGS=(
  bazel-bootstrap build-essential clang libclang-rt-14-dev clang-format
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libdnnl-dev libeigen3-dev libgtest-dev libgmock-dev
  libbenchmark-dev zlib1g-dev pkg-config graphviz dataset-fashion-mnist
  libssl-dev libsnappy-dev libre2-dev openssl python3-yaml iproute2 slurm-wlm munge prometheus
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
