"""What a process in an agent container can do to get out past the capture: run in a captured
pod by the cluster suite (tests/tests/cluster_e2e.rs). Prints one JSON object.

argv: the gate's uid, an outside address, and a blocklisted host name that resolves (through
the pod's hosts file) to that address.
"""

import json
import os
import socket
import sys


def attempt(f):
    try:
        return f()
    except OSError as e:
        return type(e).__name__


def status_field(name):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split()[1]
    return None


def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2.0)
    s.connect((host, port))
    try:
        s.send(b"probe")
        s.recv(100)
        return "answered"
    except ConnectionRefusedError:
        return "refused"
    except socket.timeout:
        return "timeout"


def tcp(host, port, name):
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(f"GET /ad HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0].decode("latin-1")


def main():
    gate_uid, address, blocked = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    out = {
        "uid": os.getuid(),
        "cap_eff": status_field("CapEff"),
        "cap_prm": status_field("CapPrm"),
        "no_new_privs": status_field("NoNewPrivs"),
        "setgid_gate": attempt(lambda: os.setgid(gate_uid) or "switched"),
        "setuid_gate": attempt(lambda: os.setuid(gate_uid) or "switched"),
        "packet_socket": attempt(
            lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close() or "opened"
        ),
        "raw_socket": attempt(
            lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP).close()
            or "opened"
        ),
        "udp": attempt(lambda: udp(address, 9999)),
        "tcp_by_address": attempt(lambda: tcp(address, 80, blocked)),
        "tcp_by_name": attempt(lambda: tcp(blocked, 80, blocked)),
    }
    print(json.dumps(out))


main()
