"""A tiny UDP DNS answerer for benchmarks: A queries get ADDR with TTL 300 (names starting with
`local.` get 127.0.0.1); any other type (AAAA) gets NODATA with an SOA in the authority section
(TTL and minimum 300), as a real server answers (RFC 2308), so the resolver can cache the empty
answer instead of asking again.

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
    answer, count, authority = b"", 0, 0
    if qtype == 1:
        target = "127.0.0.1" if data[13:18] == b"local" else addr
        answer = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 300, 4) + socket.inet_aton(target)
        count = 1
    else:
        # NODATA: the SOA (owner: the queried name; mname ns.<name>, rname hostmaster.<name>)
        # whose TTL and minimum bound the negative caching of this answer.
        rdata = (b"\x02ns\xc0\x0c" + b"\x0ahostmaster\xc0\x0c"
                 + struct.pack(">IIIII", 1, 3600, 600, 86400, 300))
        answer = b"\xc0\x0c" + struct.pack(">HHIH", 6, 1, 300, len(rdata)) + rdata
        authority = 1
    header = data[:2] + b"\x81\x80" + struct.pack(">HHHH", 1, count, authority, 0)
    sock.sendto(header + question + answer, peer)
