#!/usr/bin/env python3
"""Writes the master_rpc_fuzzer's seed corpus (corpus_master_rpc/): request
sequences in text protobuf, wrapping graphs of corpus/ (GraphDef parsing and
function lowering are also reached through CreateSession).

Records: [1 byte kind][2 bytes little-endian length][request]; kinds
0 CreateSession, 1 ExtendSession, 2 RunStep, 3 ListDevices, 4 CloseSession,
5 Reset. An empty session_handle means the last session created.
Run from tests/fuzz: python3 make_master_rpc_seeds.py
"""
import os
import re
import struct

CREATE, EXTEND, RUN, LIST, CLOSE, RESET = range(6)


def rec(kind, text):
    b = text.encode()
    assert len(b) < 65536
    return struct.pack("<BH", kind, len(b)) + b


def graph(name):
    text = open(os.path.join("corpus", name)).read()
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))


FEED_X = ('feed { name: "x:0" tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } '
          'float_val: 1.5 float_val: -2 } }')
CONST = ('node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
         'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } '
         'float_val: 3 } } } }')
ADD = 'node { name: "d" op: "AddV2" input: "c" input: "c" attr { key: "T" value { type: DT_FLOAT } } }'

seeds = {
    "affine_run.seed": rec(CREATE, "graph_def { %s }" % graph("affine.pbtxt"))
    + rec(RUN, 'fetch: "y:0" feed { name: "x:0" tensor { dtype: DT_FLOAT tensor_shape { '
          'dim { size: 1 } dim { size: 3 } } float_val: 1 float_val: 2 float_val: 3 } }')
    + rec(LIST, "") + rec(CLOSE, ""),
    "tf2_call_run.seed": rec(CREATE, "graph_def { %s }" % graph("tf2_call_affine.pbtxt"))
    + rec(RUN, "fetch: \"Identity:0\" " + FEED_X),
    "tf2_while_run.seed": rec(CREATE, "graph_def { %s }" % graph("tf2_while_pow.pbtxt"))
    + rec(RUN, 'fetch: "result:0" feed { name: "n:0" tensor { dtype: DT_INT32 int_val: 5 } }'),
    "variables_run.seed": rec(CREATE, "graph_def { %s }" % graph("variables.pbtxt"))
    + rec(RUN, 'target: "init"') + rec(RUN, 'fetch: "increment:0" target: "increment_again"')
    + rec(RESET, 'container: ""'),
    "extend_run.seed": rec(CREATE, "graph_def { %s }" % CONST)
    + rec(EXTEND, "graph_def { %s }" % ADD)
    + rec(RUN, 'fetch: "d:0" fetch: "c:0" options { timeout_in_ms: 100 }')
    + rec(CLOSE, "") + rec(RUN, 'fetch: "d:0"'),
    "unknown_session.seed": rec(RUN, 'session_handle: "nope" fetch: "a:0"')
    + rec(EXTEND, 'session_handle: "nope"') + rec(LIST, 'session_handle: "nope"'),
}
os.makedirs("corpus_master_rpc", exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join("corpus_master_rpc", name), "wb") as f:
        f.write(data)
print(len(seeds), "seeds")
