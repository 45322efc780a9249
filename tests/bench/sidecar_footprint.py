"""The sidecar's footprint under the policy the injection webhook renders by default: time from
exec to the first `200` from the admin listener's `/ready`, RSS once idle, and RSS with
TUNNELS idle CONNECT tunnels open through the forward proxy.

RSS counts every page of the binary a gate touched, but those file-backed pages are shared by
every gate started from the same file on a node (one page cache). So beside RSS the script
reads /proc/<pid>/smaps_rollup: Private_Dirty (the gate's own memory: heap, stacks, relocated
data), Pss (its private pages plus its share of the shared ones), and, with GATES gates of the
same binary running at once (idle), the median Pss of one of them: the per-pod cost on a node
that runs that many.

The policy is what `fleetgate-controller` renders for a FleetPolicy with an empty spec
(controller/src/desired/policy.rs: `web.extractBackend: direct`, the built-in secret rules, the
default blocklist, the store, the report and the three listeners) with two changes a bench on
one machine needs: every path points into a temporary folder and every listener binds
127.0.0.1:0; and `egress` allows this script's loopback origin (`allowCIDRs: [127.0.0.1/32]`,
`ports: [<origin port>]`), without which no tunnel opens.

Each binary runs ROUNDS times, the binaries alternating, and every figure is the median over
its rounds, so BIN and BASELINE_BIN are compared in one run.

Usage: python3 tests/bench/sidecar_footprint.py BIN [BASELINE_BIN]
       (env: ROUNDS=5 TUNNELS=1000 SETTLE_S=1.0 GATES=10; GATES=0 skips the shared run)
"""
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROUNDS = int(os.environ.get("ROUNDS", "5"))
TUNNELS = int(os.environ.get("TUNNELS", "1000"))
SETTLE_S = float(os.environ.get("SETTLE_S", "1.0"))
GATES = int(os.environ.get("GATES", "10"))

POLICY = """\
# fleetgate gate policy rendered by fleetgate-controller; edit the FleetPolicy, not this file.
version: v1
web:
  extractBackend: direct
egress:
  allowCIDRs: ["127.0.0.1/32"]
  ports: [{origin_port}]
store:
  root: {work}/store
  agentVisibleRoot: /opt/data/cache/fleetgate
listen:
  api: 127.0.0.1:0
  forwardProxy: 127.0.0.1:0
  admin: 127.0.0.1:0
report:
  hermesHome: {work}/hermes
  tokenFile: {work}/token
  managedDir: {work}/managed
"""


def origin():
    """A loopback listener that accepts and holds every connection (the tunnels' far end)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4096)
    held = []

    def accept():
        while True:
            conn, _ = srv.accept()
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return srv.getsockname()[1], held


def rollup_kb(pid):
    """Rss, Pss and Private_Dirty of `pid`, in kB."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    return fields.get("Rss", 0), fields.get("Pss", 0), fields.get("Private_Dirty", 0)


def ready(addr):
    """Whether the admin listener answers `/ready` with 200."""
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1) as s:
            s.sendall(b"GET /ready HTTP/1.1\r\nHost: gate\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def parse_listening(line):
    import json
    return json.loads(line)["listening"]


def tunnel(proxy, target):
    host, port = proxy.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(256)
        if not chunk:
            raise RuntimeError("the gate closed during CONNECT")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"CONNECT refused: {head[:80]!r}")
    return s


def start(binary, work):
    """A gate on `binary`, and the time from exec to its first `/ready` 200, in ms."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [binary, "serve", "--policy", f"{work}/policy.yaml", "--max-tunnels", str(TUNNELS + 100)],
        stdout=subprocess.PIPE, stderr=open(f"{work}/gate.err", "ab"),
        env={**os.environ, "RUST_LOG": "info"},
    )
    try:
        bound = parse_listening(proc.stdout.readline())
        while not ready(bound["admin"]):
            if time.monotonic() - t0 > 10:
                raise RuntimeError("the gate was not ready within 10 s")
            time.sleep(0.0005)
    except BaseException:
        proc.terminate()
        proc.wait()
        raise
    return proc, bound, (time.monotonic() - t0) * 1000


def one_round(binary, work, origin_port):
    """ready ms, then (Rss, Pss, Private_Dirty) idle and with TUNNELS tunnels."""
    proc, bound, ready_ms = start(binary, work)
    try:
        time.sleep(SETTLE_S)
        idle = rollup_kb(proc.pid)
        target = f"127.0.0.1:{origin_port}"
        socks = [tunnel(bound["forward_proxy"], target) for _ in range(TUNNELS)]
        time.sleep(SETTLE_S)
        loaded = rollup_kb(proc.pid)
        for s in socks:
            s.close()
        return (ready_ms, *idle, *loaded)
    finally:
        proc.terminate()
        proc.wait()


def shared_pss(binary, work):
    """The median idle Pss (kB) of one of GATES gates of `binary` running at once."""
    procs = []
    try:
        for _ in range(GATES):
            procs.append(start(binary, work)[0])
        time.sleep(SETTLE_S)
        return statistics.median(rollup_kb(p.pid)[1] for p in procs)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


def main():
    bins = [("BIN", sys.argv[1])] + ([("BASELINE_BIN", sys.argv[2])] if len(sys.argv) > 2 else [])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    port, _held = origin()
    results = {name: [] for name, _ in bins}
    with tempfile.TemporaryDirectory() as work:
        for d in ("store", "hermes", "managed"):
            os.makedirs(f"{work}/{d}")
        with open(f"{work}/token", "w") as f:
            f.write("bench-report-token\n")
        with open(f"{work}/policy.yaml", "w") as f:
            f.write(POLICY.format(work=work, origin_port=port))
        for r in range(ROUNDS):
            for name, binary in bins:
                results[name].append(one_round(binary, work, port))
            print(f"round {r + 1}/{ROUNDS}", file=sys.stderr)
        shared = {name: shared_pss(binary, work) if GATES else 0.0 for name, binary in bins}
    cols = ["ready ms", "RSS idle", "Pss idle", "private idle",
            f"RSS {TUNNELS} tun", f"Pss {TUNNELS} tun", f"private {TUNNELS} tun"]
    if GATES:
        cols.append(f"Pss of {GATES} idle")
    print(f"{'binary':<14}" + "".join(f" {c:>16}" for c in cols)
          + f"   (MB; medians of {ROUNDS} rounds, binaries alternating; private = Private_Dirty)")
    med = {}
    for name, _ in bins:
        rows = results[name]
        med[name] = [statistics.median(r[i] for r in rows) for i in range(7)] + [shared[name]]
        m = med[name]
        shown = [m[0]] + [v / 1024 for v in m[1:7]] + ([m[7] / 1024] if GATES else [])
        print(f"{name:<14}" + "".join(f" {v:>16.1f}" if i == 0 else f" {v:>16.2f}"
                                        for i, v in enumerate(shown)))
    if len(bins) > 1:
        a, b = med["BIN"], med["BASELINE_BIN"]
        names = ["ready", "RSS idle", "Pss idle", "private idle", "RSS with tunnels",
                 "Pss with tunnels", "private with tunnels"] + ([f"Pss of {GATES}"] if GATES else [])
        print("BIN / BASELINE_BIN: " + ", ".join(
            f"{n} {x / y:.2f}x" for n, x, y in zip(names, a, b) if y))


if __name__ == "__main__":
    main()
