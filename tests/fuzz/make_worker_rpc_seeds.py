#!/usr/bin/env python3
"""Writes the worker_rpc_fuzzer's collective seeds (corpus_worker_rpc/
collective_*.seed): request sequences in text protobuf that reach the
task's collectives, as its leader and as a member.

Records: [1 byte kind][2 bytes little-endian length][request]; kinds
0 CreateWorkerSession, 1 RegisterGraph, 2 RunGraph, 3 RecvTensor,
4 CleanupGraph, 5 DeregisterGraph, 6 DeleteWorkerSession; 240 RecvTensor
held open (members that wait together), 246 GetStatus, 247 CleanupAll,
248 PushTensor.
The task is /job:worker/replica:0/task:0, its own leader; session "s" is
open, and its first registered graph's handle is "g1".
Run from tests/fuzz: python3 make_worker_rpc_seeds.py
"""
import os
import struct

REGISTER, RUN, RECV, HELD, STATUS, CLEANUP_ALL, PUSH = 1, 2, 3, 240, 246, 247, 248
DEV0 = "/job:worker/replica:0/task:0/device:CPU:0"
DEV1 = "/job:worker/replica:0/task:0/device:CPU:1"


def rec(kind, text):
    b = text.encode()
    assert len(b) < 65536
    return struct.pack("<BH", kind, len(b)) + b


def const(name, dtype, value, shape=""):
    field = {"DT_INT32": "int_val", "DT_FLOAT": "float_val"}[dtype]
    return ('node { name: "%s" op: "Const" device: "%s" attr { key: "dtype" value { type: %s } } '
            'attr { key: "value" value { tensor { dtype: %s tensor_shape { %s } %s: %s } } } }'
            % (name, DEV0, dtype, dtype, shape, field, value))


def reduce_graph(group_size, op="CollectiveReduceV2"):
    extra = ('attr { key: "merge_op" value { s: "Add" } } attr { key: "final_op" value { s: "Div" } } '
             'attr { key: "communication_hint" value { s: "ring" } }' if op == "CollectiveReduceV2"
             else "")
    return " ".join([
        const("x", "DT_FLOAT", 1.5, "dim { size: 4 }"),
        const("size", "DT_INT32", group_size), const("key", "DT_INT32", 7),
        const("instance", "DT_INT32", 1),
        'node { name: "r" op: "%s" device: "%s" input: "x" input: "size" input: "key" '
        'input: "instance" attr { key: "T" value { type: DT_FLOAT } } %s '
        'attr { key: "timeout_seconds" value { f: 5 } } }' % (op, DEV0, extra),
        'node { name: "ret" op: "_Retval" input: "r" device: "%s" '
        'attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }' % DEV0,
    ])


def register_run(graph):
    return (rec(REGISTER, 'session_handle: "s" graph_def { %s }' % graph)
            + rec(RUN, 'session_handle: "s" graph_handle: "g1" step_id: 7'))


def recv(key, kind=RECV):
    return rec(kind, 'step_id: 7 rendezvous_key: "%s"' % key)


def push(key, tensor):
    return rec(PUSH, 'rendezvous_key: "%s" tensor { %s }' % (key, tensor))


PIECE = "dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1 float_val: 2"
NOTICE = "dtype: DT_UINT8 tensor_shape { dim { size: 6 } } int_val: 14 int_val: 0 " \
         "int_val: 0 int_val: 0 int_val: 104 int_val: 105"

seeds = {
    # A reduce of a group of one runs whole: join, instance, result.
    "collective_reduce_alone.seed": register_run(reduce_graph(1)),
    # A group of two waits for its second member: the step is cancelled.
    "collective_reduce_waits.seed": register_run(reduce_graph(2)),
    "collective_gather_alone.seed": register_run(reduce_graph(1, "CollectiveGatherV2")),
    # As the leader: joins (the group completes with the second device),
    # an instance, a device that is no member, a size that disagrees, then
    # device-memory runs of an instance (rank 0 gives a communicator id).
    "collective_joins.seed": recv("collective;join;5;2;" + DEV0)
    + recv("collective;join;5;2;" + DEV1)
    + recv("collective;inst;5;3;0;2;%s;a;0;;float[4]" % DEV0)
    + recv("collective;inst;5;3;0;2;%s;a;0;;float[4]" % DEV1)
    + recv("collective;join;5;2;/job:worker/replica:0/task:0/device:CPU:7")
    + recv("collective;join;5;3;" + DEV0)
    + recv("collective;inst;5;4;0;2;%s;a;0;id:00ff10;float[4] via nccl" % DEV0)
    + recv("collective;inst;5;4;0;2;%s;a;0;;float[4] via nccl" % DEV1),
    # As the leader, with both members of each instance waiting at once
    # (held), so verdicts are given: a device-memory all-reduce (numbered,
    # with rank 0's communicator id), a device gather (rows 2 and 3), and
    # a host member against a device member (InvalidArgument). The first
    # join waits alone and is cancelled; the device stays a member.
    "collective_verdicts.seed": recv("collective;join;5;2;" + DEV0)
    + recv("collective;join;5;2;" + DEV1)
    + recv("collective;inst;5;4;0;2;%s;a;0;id:00ff10;float[4] via nccl" % DEV0, HELD)
    + recv("collective;inst;5;4;0;2;%s;a;0;;float[4] via nccl" % DEV1, HELD)
    + recv("collective;inst;5;5;0;2;%s;g;2;id:00ff10;float[3] via nccl" % DEV0, HELD)
    + recv("collective;inst;5;5;0;2;%s;g;3;;float[3] via nccl" % DEV1, HELD)
    + recv("collective;inst;5;6;0;2;%s;a;0;;float[4]" % DEV0, HELD)
    + recv("collective;inst;5;6;0;2;%s;a;0;;float[4] via nccl" % DEV1, HELD),
    # Pieces: pushed then fetched, pushed twice, fetched while awaited.
    "collective_pieces.seed": push("collective;buf;7;1;1;ring0;1", PIECE)
    + recv("collective;buf;7;1;1;ring0;1") + push("collective;buf;7;1;2;ring0;1", PIECE)
    + push("collective;buf;7;1;2;ring0;1", PIECE) + recv("collective;buf;9;9;9;x"),
    # A peer's abort notice (code 14, "hi"), then a join after it.
    "collective_abort.seed": push("collective;abort;/job:worker/replica:0/task:1", NOTICE)
    + recv("collective;join;5;1;" + DEV0),
    # GetStatus with stats after a step, CleanupAll of the session's
    # containers (and one that does not exist), GetStatus again.
    "status_cleanup_all.seed": register_run(reduce_graph(1))
    + rec(STATUS, "include_stats: true") + rec(CLEANUP_ALL, 'container: "s" container: "none"')
    + rec(CLEANUP_ALL, "") + rec(STATUS, ""),
}

for name, data in seeds.items():
    with open(os.path.join("corpus_worker_rpc", name), "wb") as f:
        f.write(data)
print("wrote", len(seeds), "seeds")
