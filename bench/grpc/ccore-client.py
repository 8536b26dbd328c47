#!/usr/bin/python3
# A gRPC client on the C core (Debian's python3-grpcio), the library a Go or C++ kubelet-side
# client resembles far more than grpc-js does. One call per stdin line "METHOD HEX": the request
# bytes come pre-encoded (the bench encodes them with knit's own proto definitions), so no
# generated stubs are needed. Answers "ok MS" or "err CODE DETAILS", MS timed around the call only.
import sys
import time

import grpc

socket_path = sys.argv[1]
channel = grpc.insecure_channel(f"unix://{socket_path}")
grpc.channel_ready_future(channel).result(timeout=10)
identity = lambda b: b
methods = {}

for line in sys.stdin:
    method, _, hex_body = line.strip().partition(" ")
    stub = methods.get(method)
    if stub is None:
        stub = methods[method] = channel.unary_unary(method, request_serializer=identity, response_deserializer=identity)
    body = bytes.fromhex(hex_body)
    started = time.perf_counter_ns()
    try:
        stub(body, timeout=60)
        print(f"ok {(time.perf_counter_ns() - started) / 1e6:.4f}", flush=True)
    except grpc.RpcError as e:
        print(f"err {e.code().name} {e.details()}".replace("\n", " "), flush=True)
