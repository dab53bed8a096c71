"""Egress proxy benchmark (bench/egress.sh runs it, as root).

One run measures, against a server in a network namespace joined by a veth
pair (address 198.19.N.2, declared public through the proxy's test-only
setting, as in harness/test_egress.py):
  - throughput of a large transfer (default 1 GiB) through a CONNECT tunnel,
    as a ratio to the same transfer straight to the server;
  - the added latency of one CONNECT: time to the server's first byte
    through the proxy minus the same without it (medians);
  - 200 tunnels held open at once, each proven by an echo, with no error.
Prints one line per figure and PASS/MISS against the targets
(throughput >= 0.8x direct, added latency < 1 ms, 200 tunnels, 0 errors).
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
UPSTREAM = os.path.join(ROOT, "harness", "egress_upstream.py")

NET = 20 + os.getpid() % 200
SUBNET = f"198.19.{NET}"
SERVER = f"{SUBNET}.2"
NS = f"oeg-bench-{os.getpid()}"
VETH_HOST, VETH_NS = f"oebh{os.getpid() % 100000}", f"oebn{os.getpid() % 100000}"


def sh(*args, check=True):
    return subprocess.run(args, capture_output=True, text=True, check=check, timeout=30)


def proxy_connect(proxy_port, target):
    s = socket.create_connection(("127.0.0.1", proxy_port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise OSError("proxy closed: " + data.decode("latin-1"))
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise OSError("proxy refused: " + data.decode("latin-1"))
    return s, rest


def direct_connect(port):
    s = socket.create_connection((SERVER, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s, b""


def read_line(s, rest):
    data = rest
    while b"\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise OSError("closed before a line")
        data += chunk
    return data


def transfer(open_conn, total):
    """Sends `total` bytes to the sink; returns seconds until it confirmed them."""
    s, _ = open_conn()
    block = b"\0" * (1 << 20)
    t0 = time.perf_counter()
    left = total
    while left > 0:
        n = min(left, len(block))
        s.sendall(block[:n] if n < len(block) else block)
        left -= n
    s.shutdown(socket.SHUT_WR)
    answer = read_line(s, b"")
    elapsed = time.perf_counter() - t0
    s.close()
    if int(answer.strip()) != total:
        raise OSError(f"sink counted {answer.strip()} bytes, sent {total}")
    return elapsed


def first_byte(open_conn):
    t0 = time.perf_counter()
    s, rest = open_conn()
    read_line(s, rest)
    elapsed = time.perf_counter() - t0
    s.close()
    return elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--relay", help="bench/splice_relay: the throughput of a bare relay, measured alongside")
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--rounds", type=int, default=3, help="transfers per path (best is kept)")
    ap.add_argument("--latency-samples", type=int, default=300)
    ap.add_argument("--tunnels", type=int, default=200)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="oeg-bench-")
    servers = proxy = relay = None
    sh("ip", "netns", "add", NS)
    try:
        sh("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS)
        sh("ip", "link", "set", VETH_NS, "netns", NS)
        sh("ip", "addr", "add", f"{SUBNET}.1/24", "dev", VETH_HOST)
        sh("ip", "link", "set", VETH_HOST, "up")
        sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{SERVER}/24", "dev", VETH_NS)
        sh("ip", "netns", "exec", NS, "ip", "link", "set", VETH_NS, "up")
        sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")
        servers = subprocess.Popen(["ip", "netns", "exec", NS, "python3", UPSTREAM, os.path.join(work, "up.log"),
                                    f"{SERVER}|443|sink", f"{SERVER}|8443|banner"], stdout=subprocess.PIPE, text=True)
        json.loads(servers.stdout.readline())
        resolver = os.path.join(work, "resolver.txt")
        with open(resolver, "w") as f:
            f.write(f"bench.test {SERVER}\n")
        proxy = subprocess.Popen([args.agent, "egress-proxy", "--listen", "127.0.0.1:0", "--allow", "bench.test",
                                  "--allow", "bench.test:8443", "--test-public-range", f"{SUBNET}.0/24",
                                  "--test-resolver", resolver, "--max-connections", str(args.tunnels + 50)],
                                 stdout=subprocess.PIPE, stderr=open(os.path.join(work, "proxy.log"), "w"), text=True)
        pport = json.loads(proxy.stdout.readline())["port"]
        if args.relay:
            relay = subprocess.Popen([args.relay, SERVER, "443"], stdout=subprocess.PIPE, text=True)
            rport = json.loads(relay.stdout.readline())["port"]

        results = {}
        # Throughput: alternate the two paths, keep each one's best round.
        direct_t, proxy_t, relay_t = [], [], []
        for _ in range(args.rounds):
            direct_t.append(transfer(lambda: direct_connect(443), args.bytes))
            proxy_t.append(transfer(lambda: proxy_connect(pport, "bench.test:443"), args.bytes))
            if relay:
                relay_t.append(transfer(lambda: proxy_connect(rport, "bench.test:443"), args.bytes))
        mib = args.bytes / (1 << 20)
        results["direct_mib_s"] = mib / min(direct_t)
        results["proxy_mib_s"] = mib / min(proxy_t)
        results["throughput_ratio"] = results["proxy_mib_s"] / results["direct_mib_s"]
        if relay:
            results["relay_mib_s"] = mib / min(relay_t)
            results["relay_ratio"] = results["relay_mib_s"] / results["direct_mib_s"]
            results["proxy_vs_relay"] = results["proxy_mib_s"] / results["relay_mib_s"]

        # Latency to the first byte, interleaved, medians.
        for _ in range(20):  # warm up
            first_byte(lambda: direct_connect(8443))
            first_byte(lambda: proxy_connect(pport, "bench.test:8443"))
        d_lat, p_lat = [], []
        for _ in range(args.latency_samples):
            d_lat.append(first_byte(lambda: direct_connect(8443)))
            p_lat.append(first_byte(lambda: proxy_connect(pport, "bench.test:8443")))
        results["direct_ms"] = statistics.median(d_lat) * 1000
        results["proxy_ms"] = statistics.median(p_lat) * 1000
        results["added_latency_ms"] = results["proxy_ms"] - results["direct_ms"]
        results["latency_ratio"] = results["proxy_ms"] / results["direct_ms"]

        # Concurrent tunnels: open them all, then prove each with an echo.
        held, errors = [], 0
        for _ in range(args.tunnels):
            try:
                s, rest = proxy_connect(pport, "bench.test:8443")
                read_line(s, rest)
                held.append(s)
            except OSError:
                errors += 1
        time.sleep(1)
        for i, s in enumerate(held):
            try:
                line = b"tunnel %d\n" % i
                s.sendall(line)
                if read_line(s, b"") != line:
                    errors += 1
            except OSError:
                errors += 1
        for s in held:
            s.close()
        results["tunnels_held"] = len(held)
        results["tunnel_errors"] = errors
    finally:
        for p in (proxy, relay):
            if p:
                p.terminate()
                p.wait()
        if servers:
            servers.kill()
            servers.wait()
        sh("ip", "link", "del", VETH_HOST, check=False)
        sh("ip", "netns", "del", NS, check=False)
        shutil.rmtree(work, ignore_errors=True)

    checks = [
        ("throughput", f"{results['throughput_ratio']:.2f}x direct ({results['proxy_mib_s']:.0f} vs "
                       f"{results['direct_mib_s']:.0f} MiB/s, {args.bytes >> 20} MiB)",
         results["throughput_ratio"] >= 0.8, ">= 0.8x"),
        ("added latency of one CONNECT", f"{results['added_latency_ms']:.3f} ms ({results['latency_ratio']:.2f}x: "
                                         f"{results['proxy_ms']:.3f} vs {results['direct_ms']:.3f} ms, median)",
         results["added_latency_ms"] < 1.0, "< 1 ms"),
        ("concurrent tunnels", f"{results['tunnels_held']} held, {results['tunnel_errors']} errors",
         results["tunnels_held"] == args.tunnels and results["tunnel_errors"] == 0, f"{args.tunnels}, 0 errors"),
    ]
    missed = 0
    for name, value, ok, target in checks:
        print(f"{'PASS' if ok else 'MISS'}  {name}: {value}  (target {target})")
        missed += not ok
    if "relay_mib_s" in results:
        print(f"info  a bare splice relay (bench/splice_relay): {results['relay_ratio']:.2f}x direct "
              f"({results['relay_mib_s']:.0f} MiB/s); the proxy is {results['proxy_vs_relay']:.2f}x the bare relay")
    print(json.dumps(results))
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
