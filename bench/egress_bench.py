"""Egress proxy benchmark (bench/egress.sh runs it, as root).

One run measures, against a server in a network namespace joined by a veth
pair (address 198.19.N.2, declared public through the proxy's test-only
setting, as in harness/test_egress.py):
  - throughput of a large transfer (default 1 GiB) through a CONNECT tunnel,
    as a ratio to the same transfer straight to the server;
  - the added latency of one CONNECT: time to the server's first byte
    through the proxy minus the same without it (medians);
  - 200 tunnels held open at once, each proven by an echo, with no error;
  - with the real resolver (c-ares, pointed at a name server in the
    namespace through a private /etc/resolv.conf), the median time to the
    first byte of a fast name while 50 lookups of slow names are pending,
    against the same idle;
  - the same throughput and first-byte figures through tinyproxy and squid
    (what a user would pick instead), started on loopback by this script
    with their configuration in its temporary directory and stopped by pid.
    Both are given the server's address (they would resolve a name with
    the system's resolver, which the bench leaves alone).
Prints one line per figure and PASS/MISS against the targets
(throughput >= 0.8x direct, added latency < 1 ms, 200 tunnels, 0 errors,
first byte with 50 slow lookups pending <= 2x idle).
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
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "harness"))
from testlib import ROOT, free_port, sh  # noqa: E402 (after the path it comes from)

UPSTREAM = os.path.join(ROOT, "harness", "egress_upstream.py")
DNS_SERVER = os.path.join(ROOT, "harness", "egress_dns.py")

NET = 20 + os.getpid() % 200
SUBNET = f"198.19.{NET}"
SERVER = f"{SUBNET}.2"
DNS = f"{SUBNET}.53"
SLOW_S = 8.0  # a slow name's answer: longer than the loaded measurement
NS = f"oeg-bench-{os.getpid()}"
VETH_HOST, VETH_NS = f"oebh{os.getpid() % 100000}", f"oebn{os.getpid() % 100000}"


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
    if not (head.startswith(b"HTTP/1.") and head[8:13] == b" 200 "):  # tinyproxy answers HTTP/1.0
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
    s.sendall(b"%d\n" % total)  # the server answers once it has them all: no half-close needed
    left = total
    while left > 0:
        n = min(left, len(block))
        s.sendall(block[:n] if n < len(block) else block)
        left -= n
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


def wait_port(port, proc, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise OSError(f"exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise OSError(f"nothing listens on {port} after {seconds} s")


def start_tinyproxy(work):
    port = free_port()
    conf = os.path.join(work, "tinyproxy.conf")
    with open(conf, "w") as f:
        f.write(f"Port {port}\nListen 127.0.0.1\nTimeout 600\nMaxClients 1024\nAllow 127.0.0.1\n"
                f"ConnectPort 443\nConnectPort 8443\nLogLevel Critical\nLogFile \"{work}/tinyproxy.log\"\n"
                f"PidFile \"{work}/tinyproxy.pid\"\nDisableViaHeader Yes\n")
    proc = subprocess.Popen([shutil.which("tinyproxy") or "/usr/bin/tinyproxy", "-d", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, port


def start_squid(work):
    port = free_port()
    conf = os.path.join(work, "squid.conf")
    with open(conf, "w") as f:
        f.write(f"http_port 127.0.0.1:{port}\nacl local src 127.0.0.1/32\nacl tls_ports port 443 8443\n"
                "http_access deny CONNECT !tls_ports\nhttp_access allow local\nhttp_access deny all\n"
                "cache deny all\ncache_mem 8 MB\nmax_filedescriptors 4096\nshutdown_lifetime 1 seconds\n"
                f"pid_filename {work}/squid.pid\naccess_log none\ncache_log {work}/squid-cache.log\n"
                f"coredump_dir {work}\nnetdb_filename none\n")
    proc = subprocess.Popen([shutil.which("squid") or "/usr/sbin/squid", "-N", "-f", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, port


def stop(proc, seconds=10):
    """Stops one process this script started, by its pid."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--relay", help="bench/splice_relay: the throughput of a bare relay, measured alongside")
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--rounds", type=int, default=3, help="transfers per path (best is kept)")
    ap.add_argument("--latency-samples", type=int, default=300)
    ap.add_argument("--tunnels", type=int, default=200)
    ap.add_argument("--slow-lookups", type=int, default=50)
    ap.add_argument("--no-others", action="store_true", help="skip tinyproxy and squid")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="oeg-bench-")
    servers = proxy = relay = dns = dns_proxy = tiny = squid = None
    sh("ip", "netns", "add", NS)
    try:
        sh("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS)
        sh("ip", "link", "set", VETH_NS, "netns", NS)
        sh("ip", "addr", "add", f"{SUBNET}.1/24", "dev", VETH_HOST)
        sh("ip", "link", "set", VETH_HOST, "up")
        sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{SERVER}/24", "dev", VETH_NS)
        sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{DNS}/24", "dev", VETH_NS)
        sh("ip", "netns", "exec", NS, "ip", "link", "set", VETH_NS, "up")
        sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")
        servers = subprocess.Popen(["ip", "netns", "exec", NS, "python3", UPSTREAM, os.path.join(work, "up.log"),
                                    f"{SERVER}|443|counted", f"{SERVER}|8443|banner"], stdout=subprocess.PIPE, text=True)
        json.loads(servers.stdout.readline())
        resolver = os.path.join(work, "resolver.txt")
        with open(resolver, "w") as f:
            f.write(f"bench.test {SERVER}\n")
        proxy = subprocess.Popen([args.agent, "egress-proxy", "--listen", "127.0.0.1:0", "--allow", "bench.test",
                                  "--allow", "bench.test:8443", "--test-public-range", f"{SUBNET}.0/24",
                                  "--test-resolver", resolver, "--max-connections", str(args.tunnels + 50),
                                  "--max-connections-per-client", str(args.tunnels + 50)],
                                 stdout=subprocess.PIPE, stderr=open(os.path.join(work, "proxy.log"), "w"), text=True)
        pport = json.loads(proxy.stdout.readline())["port"]
        if args.relay:
            relay = subprocess.Popen([args.relay, SERVER, "443"], stdout=subprocess.PIPE, text=True)
            rport = json.loads(relay.stdout.readline())["port"]
        others = {}
        if not args.no_others:
            os.chmod(work, 0o777)  # squid writes its log as its own user
            tiny, others["tinyproxy"] = start_tinyproxy(work)
            squid, others["squid"] = start_squid(work)

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
        for name, port in others.items():
            t = [transfer(lambda: proxy_connect(port, f"{SERVER}:443"), args.bytes) for _ in range(args.rounds)]
            results[f"{name}_mib_s"] = mib / min(t)
            results[f"{name}_throughput_ratio"] = results[f"{name}_mib_s"] / results["direct_mib_s"]
        if relay:
            results["relay_mib_s"] = mib / min(relay_t)
            results["relay_ratio"] = results["relay_mib_s"] / results["direct_mib_s"]
            results["proxy_vs_relay"] = results["proxy_mib_s"] / results["relay_mib_s"]

        # Latency to the first byte, interleaved, medians.
        for _ in range(20):  # warm up
            first_byte(lambda: direct_connect(8443))
            first_byte(lambda: proxy_connect(pport, "bench.test:8443"))
            for port in others.values():
                first_byte(lambda: proxy_connect(port, f"{SERVER}:8443"))
        d_lat, p_lat = [], []
        o_lat = {name: [] for name in others}
        for _ in range(args.latency_samples):
            d_lat.append(first_byte(lambda: direct_connect(8443)))
            p_lat.append(first_byte(lambda: proxy_connect(pport, "bench.test:8443")))
            for name, port in others.items():
                o_lat[name].append(first_byte(lambda: proxy_connect(port, f"{SERVER}:8443")))
        results["direct_ms"] = statistics.median(d_lat) * 1000
        results["proxy_ms"] = statistics.median(p_lat) * 1000
        for name in others:
            results[f"{name}_ms"] = statistics.median(o_lat[name]) * 1000
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
        stop(tiny)
        stop(squid)
        tiny = squid = None

        # The real resolver: a fast name's first byte, idle and while
        # `slow_lookups` lookups of slow names are pending.
        zone = {"fast.test": {"a": [SERVER]}}
        zone.update({f"slow-{i}.test": {"a": [SERVER], "delay": SLOW_S} for i in range(args.slow_lookups)})
        with open(os.path.join(work, "zone.json"), "w") as f:
            json.dump(zone, f)
        dns = subprocess.Popen(["ip", "netns", "exec", NS, "python3", DNS_SERVER, os.path.join(work, "dns.log"),
                                os.path.join(work, "zone.json"), DNS], stdout=subprocess.PIPE, text=True)
        json.loads(dns.stdout.readline())
        resolv = os.path.join(work, "resolv.conf")
        with open(resolv, "w") as f:
            f.write(f"nameserver {DNS}\n")
        dns_proxy = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount --bind "$0" /etc/resolv.conf && exec "$@"', resolv, args.agent, "egress-proxy", "--listen",
             "127.0.0.1:0", "--allow", "*.test:8443", "--test-public-range", f"{SUBNET}.0/24", "--max-connections-per-client",
             str(args.slow_lookups + 50), "--wildcard-lookups-per-second", "0"],
            stdout=subprocess.PIPE, stderr=open(os.path.join(work, "dns-proxy.log"), "w"), text=True)
        dport = json.loads(dns_proxy.stdout.readline())["port"]
        samples = max(20, args.latency_samples // 3)
        for _ in range(10):
            first_byte(lambda: proxy_connect(dport, "fast.test:8443"))
        idle = [first_byte(lambda: proxy_connect(dport, "fast.test:8443")) for _ in range(samples)]
        pending = []
        for i in range(args.slow_lookups):
            c = socket.create_connection(("127.0.0.1", dport))
            c.sendall(b"CONNECT slow-%d.test:8443 HTTP/1.1\r\n\r\n" % i)
            pending.append(c)
        time.sleep(0.3)
        t0 = time.time()
        loaded = [first_byte(lambda: proxy_connect(dport, "fast.test:8443")) for _ in range(samples)]
        still_pending = time.time() - t0 < SLOW_S - 0.5
        for c in pending:
            c.close()
        results["resolve_idle_ms"] = statistics.median(idle) * 1000
        results["resolve_loaded_ms"] = statistics.median(loaded) * 1000
        results["resolve_loaded_ratio"] = results["resolve_loaded_ms"] / results["resolve_idle_ms"]
        results["resolve_slow_pending"] = args.slow_lookups if still_pending else 0
    finally:
        for p in (proxy, relay, dns_proxy, tiny, squid):
            stop(p)
        if dns:
            dns.kill()
            dns.wait()
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
    checks.append((f"first byte of a fast name, {args.slow_lookups} slow lookups pending",
                   f"{results['resolve_loaded_ratio']:.2f}x idle ({results['resolve_loaded_ms']:.3f} vs "
                   f"{results['resolve_idle_ms']:.3f} ms, median; {results['resolve_slow_pending']} pending)",
                   results["resolve_loaded_ratio"] <= 2.0 and results["resolve_slow_pending"] == args.slow_lookups,
                   "<= 2x idle"))
    missed = 0
    for name, value, ok, target in checks:
        print(f"{'PASS' if ok else 'MISS'}  {name}: {value}  (target {target})")
        missed += not ok
    if "relay_mib_s" in results:
        print(f"info  a bare splice relay (bench/splice_relay): {results['relay_ratio']:.2f}x direct "
              f"({results['relay_mib_s']:.0f} MiB/s); the proxy is {results['proxy_vs_relay']:.2f}x the bare relay")
    for name in ("tinyproxy", "squid"):
        if f"{name}_ms" in results:
            print(f"info  {name}: throughput {results[f'{name}_throughput_ratio']:.2f}x direct "
                  f"({results[f'{name}_mib_s']:.0f} MiB/s; the proxy {results['proxy_mib_s'] / results[f'{name}_mib_s']:.2f}x "
                  f"{name}); first byte {results[f'{name}_ms']:.3f} ms (the proxy {results['proxy_ms'] / results[f'{name}_ms']:.2f}x "
                  f"{name}), CONNECT to the address")
    print(json.dumps(results))
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
