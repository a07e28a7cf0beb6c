#!/usr/bin/env bash
# The main job: sets up the machine and runs the richest real job graphrun
# has: `graphrun train --model=mlp` with its defaults — the MLP trained on
# Fashion-MNIST (/usr/share/datasets/fashion-mnist) by 2 PS + 2 worker tasks
# of a local cluster the command starts itself, one process per task (async,
# Adam, global batch 256, 5 epochs, balanced placement splitting the big
# kernel over both PS tasks), with progress lines, the placement
# summary, checkpoints in /tmp/graphrun_train, the test-set evaluation and
# one final JSON line (docs/training.md), and the trained model exported as
# a frozen inference graph and as a SavedModel. Then `graphrun run`
# classifies the first test images with the frozen graph and, through its
# serving_default signature, with the SavedModel (images read and saved as
# .npy by the IDX-dataset example graph), the same model is trained the all-reduce way by 2 worker
# processes (multi_worker_mirrored: no PS, gradients all-reduced every
# step over the data channel), and the other shipped TensorFlow-format
# example graphs run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bazel build -c opt //tools:graphrun >/dev/null 2>&1 || bazel build -c opt //tools:graphrun
GR=bazel-bin/tools/graphrun
[[ -x "$GR" ]] || GR=$(bazel cquery -c opt --output=files //tools:graphrun 2>/dev/null)

# A fresh start: an existing checkpoint of a previous main job would be
# resumed at its final step (zero steps to train).
rm -rf /tmp/graphrun_train
FROZEN=/tmp/graphrun_train/mlp_frozen.pb
SAVED=/tmp/graphrun_train/mlp_saved_model
echo "\$ graphrun train --model=mlp --export_graph=$FROZEN --export_saved_model=$SAVED"
"$GR" train --model=mlp --export_graph="$FROZEN" --export_saved_model="$SAVED"
echo

run() { echo "\$ graphrun run $*"; "$GR" run "$@"; echo; }
# The trained model on the first 8 test images: the labels, then its
# predictions.
run examples/fashion_mnist_batch.pbtxt --fetch labels/next
"$GR" run examples/fashion_mnist_batch.pbtxt --fetch images/next \
    --save_npy /tmp/graphrun_train/batch >/dev/null
run "$FROZEN" --feed images=@/tmp/graphrun_train/batch/images__next_0.npy --fetch predictions
echo "\$ graphrun show $SAVED"
"$GR" show "$SAVED"
echo
run "$SAVED" --signature=serving_default \
    --feed images=@/tmp/graphrun_train/batch/images__next_0.npy --fetch classes
# A TensorFlow 2 graph with functions: a tf.while_loop whose body holds a
# tf.cond (Collatz steps of 27), lowered at load.
run tools/testdata/tf2/collatz.pbtxt --feed n=27 --fetch steps
# Synchronous all-reduce training of the same MLP: 2 worker processes of a
# local cluster (no PS), 3 epochs.
rm -rf /tmp/graphrun_train_allreduce
echo "\$ graphrun train --model=mlp --distribution=multi_worker_mirrored --workers=2 --epochs=3"
"$GR" train --model=mlp --distribution=multi_worker_mirrored --workers=2 --epochs=3 \
    --checkpoint_dir=/tmp/graphrun_train_allreduce
echo

run examples/affine.pbtxt --feed 'x=[[1,1,1],[1,0,-1]]' --fetch y --fetch MatMul --format json
run examples/while_loop.pbtxt --fetch while/Exit_1 --fetch while/Exit
run examples/cond.pbtxt --feed pred=true --fetch cond/Merge
run examples/cond.pbtxt --feed pred=false --fetch cond/Merge
run examples/variables.pbtxt --fetch increment_again
run examples/mlp_forward.pbtxt --feed 'x=[[1,2,3,4],[-1,0.5,2,-2]]' \
    --fetch Softmax --fetch ArgMax --devices CPU=2 --log_device_placement \
    --trace /tmp/graphrun_mlp_trace.json --format json
echo "Chrome trace of the last step: /tmp/graphrun_mlp_trace.json"
