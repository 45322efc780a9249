"""A tiny UDP DNS answerer for benchmarks: A queries get ADDR with TTL 300 (names starting with
`local.` get 127.0.0.1), AAAA is empty.

Usage: python3 stub_dns.py PORT ADDR     (the e2e tests use the Rust stub in tests/src/dns.rs)
"""
import socket
import struct
import sys

port, addr = int(sys.argv[1]), sys.argv[2]
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind(("127.0.0.1", port))
print("ready", flush=True)
while True:
    data, peer = sock.recvfrom(512)
    i = 12
    while data[i] != 0:
        i += data[i] + 1
    question = data[12:i + 5]
    qtype = struct.unpack(">H", data[i + 1:i + 3])[0]
    answer, count = b"", 0
    if qtype == 1:
        target = "127.0.0.1" if data[13:18] == b"local" else addr
        answer = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 300, 4) + socket.inet_aton(target)
        count = 1
    header = data[:2] + b"\x81\x80" + struct.pack(">HHHH", 1, count, 0, 0)
    sock.sendto(header + question + answer, peer)
