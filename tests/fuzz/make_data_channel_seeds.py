#!/usr/bin/env python3
"""Writes the data_channel_fuzzer's seed corpus (corpus_data_channel/).

The frames follow distributed/rpc/data_channel.h (host byte order, x86-64).
Run from tests/fuzz: python3 make_data_channel_seeds.py
"""
import os
import struct

REQ, RESP, HELLO = 0x51445247, 0x50445247, 0x41445247
RECV, CANCEL, PROBE, SAME_HOST, RELEASE, PUSH = 1, 2, 3, 4, 5, 6
DEAD, PROTO, REMOTE, PROBE_REPLY = 1, 2, 4, 8


def req(rid, key, kind=RECV, step=1):
    k = key.encode()
    return struct.pack("<IIQqQ", REQ, kind, rid, step, len(k)) + k


def push(key, dtype=1, dims=(), payload=b"", claimed=None):
    n = len(payload) if claimed is None else claimed
    return (req(0, key, PUSH, 0) + struct.pack("<iIQ", dtype, len(dims), n)
            + b"".join(struct.pack("<q", d) for d in dims) + payload)


def hello(flags=0):
    return struct.pack("<IIII", HELLO, 1, flags, 0) + bytes(range(32))


def resp(rid, code=0, dtype=0, dims=(), message=b"", payload=b"", flags=0, claimed=None):
    n = len(payload) if claimed is None else claimed
    h = struct.pack("<IIQiiIIQ", RESP, flags, rid, code, dtype, len(dims), len(message), n)
    return h + b"".join(struct.pack("<q", d) for d in dims) + message + payload


# Mode 2's reply to the same-host probe: reads off (no payload).
PROBE_OFF = resp(0, flags=PROBE_REPLY)

# A DT_STRING TensorProto of shape [1] holding "hi".
STRING_PROTO = bytes([0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01, 0x42, 0x02]) + b"hi"

seeds = {
    "server_requests.seed": b"\x00" + req(1, "t:f") + req(2, "t:s") + req(3, "dead")
    + req(4, "stale") + req(5, "hang") + req(5, "", CANCEL) + req(6, "t:missing"),
    "server_bad_magic.seed": b"\x00" + req(1, "t:f")[:4].replace(b"G", b"X") + req(1, "t:f")[4:],
    "server_huge_key.seed": b"\x00" + struct.pack("<IIQqQ", REQ, RECV, 1, 1, 1 << 40),
    "server_token.seed": b"\x01" + bytes(64) + req(1, "t:f"),
    # Pushes: kept, refused by the worker, a size that lies, a string type,
    # then a request on the same connection.
    "server_pushes.seed": b"\x00" + push("p:a", dims=(2, 3), payload=bytes(24))
    + push("refuse:b", dims=(1,), payload=bytes(4)) + push("p:e", dims=(0, 4))
    + push("p:lie", dims=(1 << 40,), payload=bytes(8)) + push("p:s", dtype=7, dims=(1,))
    + req(1, "t:f"),
    "server_same_host.seed": b"\x00" + req(0, "", PROBE) + req(0, "", SAME_HOST)
    + req(1, "t:f") + req(7, "", RELEASE) + req(1, "", RELEASE),
    "client_responses.seed": b"\x02" + hello() + PROBE_OFF
    + resp(1, dtype=1, dims=(2, 3), payload=bytes(24))
    + resp(2, flags=PROTO, payload=STRING_PROTO)
    + resp(3, flags=DEAD),
    "client_errors.seed": b"\x02" + hello() + PROBE_OFF + resp(2, code=10, message=b"incarnation changed")
    + resp(1, code=14, message=b"gone") + resp(3, code=99, message=b"no such code"),
    "client_lying_sizes.seed": b"\x02" + hello() + PROBE_OFF
    + resp(1, dtype=1, dims=(1 << 40, 1 << 40), payload=bytes(16))
    + resp(2, flags=PROTO, payload=STRING_PROTO, claimed=1 << 33)
    + resp(3, dtype=1, dims=(0, -1), payload=b""),
    "client_token_required.seed": b"\x02" + hello(flags=1) + PROBE_OFF + resp(1, flags=DEAD),
    # Mode 3: the probe is answered genuinely; payloads by address (one
    # unmapped, one inside the header's own claim, one that lies on size).
    "client_same_host.seed": b"\x03" + hello()
    + resp(1, dtype=1, dims=(2, 3), flags=REMOTE, payload=struct.pack("<Q", 4096), claimed=24)
    + resp(2, dtype=1, dims=(1 << 20,), flags=REMOTE, payload=struct.pack("<Q", 0), claimed=4 << 20)
    + resp(3, dtype=1, dims=(4,), flags=REMOTE, payload=struct.pack("<Q", 8), claimed=99),
}
os.makedirs("corpus_data_channel", exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join("corpus_data_channel", name), "wb") as f:
        f.write(data)
print(len(seeds), "seeds")
