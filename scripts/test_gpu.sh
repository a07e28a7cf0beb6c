#!/usr/bin/env bash
# The GPU suite, run from the unpacked scripts/gpu_bundle.sh archive on a
# GPU machine: finds cuBLAS, cuDNN and NCCL in the PyTorch installation,
# runs the kernel comparison and training tests, then the figures
# (MatMul 4096^3 against cuBLAS direct; MLP examples/s against PyTorch on the
# same GPU). Exit 0 only when every test passed.
#
# Usage: tar xJf graphrun-gpu.tar.xz && graphrun-gpu/scripts/test_gpu.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
nvlibs=$("$py" - <<'PY' 2>/dev/null
import glob, os, site
dirs = set()
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for pat in ("nvidia/*/lib", "nvidia/cu*/lib", "torch/lib"):
        for d in glob.glob(os.path.join(base, pat)):
            if glob.glob(os.path.join(d, "lib*.so*")):
                dirs.add(d)
print(":".join(sorted(dirs)))
PY
)
export LD_LIBRARY_PATH="$root/lib${nvlibs:+:$nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "test_gpu: libraries from $LD_LIBRARY_PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
  sed 's/^/test_gpu: GPU /'
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "test_gpu: $gpus GPU(s)$( ((gpus >= 2)) && echo ', NCCL bus bandwidth measurable' )"
((gpus == 0)) && echo "test_gpu: no GPU on this machine: the tests below skip and the figures fail"
rc=0
"$root/bin/gpu_test" --gtest_brief=0 || rc=1
"$root/bin/gpu_benchmark" || rc=1
"$py" "$root/scripts/torch_gpu_train.py" || true
# A CUDA-built graphrun on the GPU: affine runs there (type priority).
cat > /tmp/test_gpu_affine.pbtxt <<'PB'
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "w" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } }
  float_val: 1 float_val: -2 float_val: 0.5 float_val: 3 } } } }
node { name: "y" op: "MatMul" input: "x" input: "w" attr { key: "T" value { type: DT_FLOAT } } }
PB
"$root/bin/graphrun" run /tmp/test_gpu_affine.pbtxt --feed 'x=[[1,2],[-3,4]]' --fetch y \
  --log_device_placement || rc=1
echo "test_gpu: $([[ $rc == 0 ]] && echo passed || echo FAILED)"
exit $rc
