"""The egress allowlist proxy against real peers (`oarbank-agent egress-proxy`).

Upstream servers run in a network namespace this module creates, joined to
the host by a veth pair, with addresses only from the benchmarking block
198.18.0.0/15 (here 198.19.N.0/24), which the proxy is told is public
through its test-only --test-public-range. Names resolve through the
test-only --test-resolver file, which can change a name's answer between
two lookups, or through the real resolver (c-ares) pointed at a name
server the module runs in the namespace (harness/egress_dns.py, at
198.19.N.53), by a private mount of /etc/resolv.conf for the proxy alone,
whose search list must never be used. A "private" server listens on the host's loopback (127.0.0.1
and ::1): it is what a refused name points at, and it must never see a
connection. Every refusal is checked three ways: the HTTP status and its
one-line reason, one JSON log line from the proxy, and silence at the
server the request named; every allowed case is proven at its server.

Needs root (network namespaces, uid switching); CI runs as root.
"""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from testlib import AGENT, FAULTY, eventually, free_port, landlock_abi, sh

UPSTREAM = os.path.join(os.path.dirname(__file__), "egress_upstream.py")
DNS_SERVER = os.path.join(os.path.dirname(__file__), "egress_dns.py")

NET = 20 + os.getpid() % 200
SUBNET = f"198.19.{NET}"
HOST_SIDE = f"{SUBNET}.1"
ALLOWED, WILD_SUB, WILD_BARE, UNLISTED, CONFINED = (f"{SUBNET}.{i}" for i in range(2, 7))
DNS = f"{SUBNET}.53"  # the test's name server, in the test namespace
DNS2 = f"{SUBNET}.54"  # a second one, with other answers
SLOW_S = 2.0  # how long the name server takes to answer a slow name
NS = f"oeg-{os.getpid()}"
VETH_HOST, VETH_NS = f"oegh{os.getpid() % 100000}", f"oegn{os.getpid() % 100000}"

if os.geteuid() != 0:
    pytest.skip("network namespaces and uid switching need root (CI runs as root)", allow_module_level=True)


class Servers:
    """A egress_upstream.py process and its log."""

    def __init__(self, log, specs, netns=None):
        self.log = pathlib.Path(log)
        self.log.touch()
        cmd = ["python3", UPSTREAM, str(log), *specs]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line, "upstream servers did not start"
        self.ready = json.loads(line)["ready"]

    def events(self, local=None, event="accept"):
        out = []
        for line in self.log.read_text().splitlines():
            e = json.loads(line)
            if e["event"] == event and (local is None or e["local"] == local):
                out.append(e)
        return out

    def wait_close(self, local, count=1, timeout=5.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            closes = self.events(local, "close")
            if len(closes) >= count:
                return closes
            time.sleep(0.05)
        return self.events(local, "close")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def with_resolv_conf(resolv_conf, cmd):
    """cmd in a private mount namespace whose /etc/resolv.conf is
    resolv_conf: the real resolver, pointed at the test's name server."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(resolv_conf), *cmd]


class Proxy:
    def __init__(self, workdir, allow, *extra, public=True, resolver=None, resolv_conf=None, env=None):
        self.log = pathlib.Path(workdir) / f"proxy-{time.monotonic_ns()}.log"
        # A resolver file is the test-only build's alone.
        cmd = [FAULTY if resolver else AGENT, "egress-proxy", "--listen", "127.0.0.1:0"]
        for a in allow:
            cmd += ["--allow", a]
        if public:
            cmd += ["--test-public-range", f"{SUBNET}.0/24"]
        if resolver:
            cmd += ["--test-resolver", str(resolver)]
        cmd += list(extra)
        if resolv_conf:
            cmd = with_resolv_conf(resolv_conf, cmd)
        self.err = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, text=True,
                                     env=None if env is None else {**os.environ, **env})
        line = self.proc.stdout.readline()
        assert line, "proxy did not start: " + self.log.read_text()
        self.ready = json.loads(line)
        self.port = self.ready["port"]

    def events(self, event=None):
        out = [json.loads(l) for l in self.log.read_text().splitlines() if l.startswith("{")]
        return [e for e in out if event is None or e["event"] == event]

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=10)
        self.err.close()
        return rc


def request(port, raw, read_body=True, timeout=5):
    """Sends raw bytes to the proxy; returns (status, reason-line, socket, rest)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(raw)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else None
    length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")), None)
    if read_body and status != 200 and length is not None:
        while len(rest) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
    return status, rest.decode("latin-1"), s, rest


def connect(port, target, extra=b""):
    return request(port, b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()) + extra,
                   read_body=True)


def recv_line(s):
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(1)
        if not chunk:
            break
        data += chunk
    return data.decode()


@pytest.fixture(scope="module")
def world():
    work = pathlib.Path(tempfile.mkdtemp(prefix="oeg-world-"))
    os.chmod(work, 0o755)
    sh("ip", "netns", "add", NS)
    try:
        sh("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS)
        sh("ip", "link", "set", VETH_NS, "netns", NS)
        sh("ip", "addr", "add", f"{HOST_SIDE}/24", "dev", VETH_HOST)
        sh("ip", "link", "set", VETH_HOST, "up")
        for a in (ALLOWED, WILD_SUB, WILD_BARE, UNLISTED, CONFINED, DNS, DNS2):
            sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{a}/24", "dev", VETH_NS)
        sh("ip", "netns", "exec", NS, "ip", "link", "set", VETH_NS, "up")
        sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")
        # The "private" server: the host's loopback, v4 and v6, one port.
        for _ in range(20):
            private_port = free_port()
            try:
                private = Servers(work / "private.log", [f"127.0.0.1|{private_port}|banner", f"::1|{private_port}|banner"])
                break
            except (AssertionError, json.JSONDecodeError):
                continue
        specs = []
        for a in (ALLOWED, WILD_SUB, WILD_BARE, UNLISTED, CONFINED):
            specs += [f"{a}|443|banner", f"{a}|8443|banner", f"{a}|80|http", f"{a}|{private_port}|banner"]
        upstream = Servers(work / "upstream.log", specs, netns=NS)
        resolver = work / "resolver.txt"
        names = {
            "allowed.test": ALLOWED, "a.wild.test": WILD_SUB, "deep.a.wild.test": WILD_SUB, "wild.test": WILD_BARE,
            "unlisted.test": UNLISTED, "confined.test": CONFINED,
            # Refused ranges, each behind a listed name (*.bad.test).
            "loopback.bad.test": "127.0.0.1", "loopback-other.bad.test": "127.8.9.10", "zero.bad.test": "0.0.0.0",
            "this-net.bad.test": "0.1.2.3", "rfc1918-10.bad.test": "10.1.2.3", "rfc1918-172.bad.test": "172.16.5.4",
            "rfc1918-192.bad.test": "192.168.1.1", "metadata.bad.test": "169.254.169.254",
            "link-local.bad.test": "169.254.1.1", "cgnat.bad.test": "100.64.0.1", "multicast.bad.test": "224.0.0.1",
            "broadcast.bad.test": "255.255.255.255", "reserved.bad.test": "240.0.0.1",
            "benchmark-outside.bad.test": "198.18.0.1", "documentation.bad.test": "192.0.2.1",
            "loopback6.bad.test": "::1", "unspecified6.bad.test": "::", "ula.bad.test": "fd00::1",
            "link-local6.bad.test": "fe80::1", "multicast6.bad.test": "ff02::1",
            "mapped-loopback.bad.test": "::ffff:127.0.0.1", "mapped-private.bad.test": "::ffff:10.0.0.1",
            "mapped-metadata.bad.test": "::ffff:169.254.169.254", "compat-loopback.bad.test": "::127.0.0.1",
            "nat64-private.bad.test": "64:ff9b::10.0.0.1", "documentation6.bad.test": "2001:db8::1",
            # One public and one private answer together: any non-public refuses.
            "mixed.bad.test": f"{ALLOWED},127.0.0.1",
            # Rebinding: the first lookup answers public, every later one loopback.
            "rebind.test": f"{ALLOWED} 127.0.0.1",
            "self.test": "127.0.0.1",
        }
        names["own-host.test"] = HOST_SIDE  # an address of the proxy's own host
        resolver.write_text("".join(f"{n} {a}\n" for n, a in names.items()))
        # A server on the host side of the veth: the proxy's own address.
        own = Servers(work / "own.log", [f"{HOST_SIDE}|443|banner", f"{HOST_SIDE}|80|http"])
        # The name server, and resolv.conf files that point at it.
        zone = {n: {"a": [a.split(",")[0].split()[0]]} for n, a in names.items()
                if ":" not in a.split(",")[0].split()[0]}
        zone.update({
            "real.dns.test": {"a": [ALLOWED]}, "fast.dns.test": {"a": [ALLOWED]},
            "own-host.dns.test": {"a": [HOST_SIDE]},
            # What a search list would reach: an unlisted server.
            "hijack.dns.test.corp.internal": {"a": [UNLISTED]}, "missing.dns.test.corp.internal": {"a": [UNLISTED]},
            "shared.dns.test": {"a": [ALLOWED], "delay": SLOW_S},
        })
        zone.update({f"slow-{i}.dns.test": {"a": [ALLOWED], "delay": SLOW_S} for i in range(60)})
        (work / "zone.json").write_text(json.dumps(zone))
        dns_log = work / "dns.log"
        dns_log.touch()
        dns = subprocess.Popen(["ip", "netns", "exec", NS, "python3", DNS_SERVER, str(dns_log), str(work / "zone.json"),
                                DNS], stdout=subprocess.PIPE, text=True)
        assert dns.stdout.readline(), "the name server did not start"
        for ndots in (1, 5):
            (work / f"resolv-ndots{ndots}.conf").write_text(
                f"nameserver {DNS}\nsearch corp.internal\noptions ndots:{ndots}\n")
        yield {"work": work, "private": private, "private_port": private_port, "upstream": upstream,
               "resolver": resolver, "names": names, "own": own, "dns_log": dns_log}
        dns.kill()
        dns.wait()
        own.stop()
        upstream.stop()
        private.stop()
    finally:
        sh("ip", "link", "del", VETH_HOST, check=False)
        sh("ip", "netns", "del", NS, check=False)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def proxy(world):
    allow = ["allowed.test", "allowed.test:80", "*.wild.test", "confined.test", f"*.bad.test:{world['private_port']}",
             f"rebind.test:{world['private_port']}"]
    p = Proxy(world["work"], allow, resolver=world["resolver"])
    yield p
    assert p.stop() == 0, "the proxy must exit 0 on SIGTERM (it never crashed)"


def accepts(world, address, port):
    return len(world["upstream"].events(f"{address}:{port}"))


def private_accepts(world):
    return len(world["private"].events())


def assert_refused(p, world, status, reason, expect_status=403, contains=""):
    assert status == expect_status, reason
    assert reason.startswith("egress: ") and reason.count("\n") == 1, reason
    assert contains in reason, reason
    refusals = p.events("egress_refused")
    assert refusals and refusals[-1]["status"] == expect_status and refusals[-1]["reason"] in reason, refusals


# --- allowed ---------------------------------------------------------------

def test_an_allowed_name_and_port_reaches_its_server(world, proxy):
    before = accepts(world, ALLOWED, 443)
    status, _, s, rest = connect(proxy.port, "allowed.test:443")
    assert status == 200
    banner = (rest + s.recv(100)).decode() if not rest.endswith(b"\n") else rest.decode()
    assert banner == f"BANNER {ALLOWED}:443\n"
    s.sendall(b"hello through the tunnel\n")
    assert recv_line(s) == "hello through the tunnel\n"
    s.close()
    closes = world["upstream"].wait_close(f"{ALLOWED}:443", before + 1)
    assert accepts(world, ALLOWED, 443) == before + 1
    assert closes[-1]["data"] == "hello through the tunnel\n"  # at the server
    assert closes[-1]["peer"].startswith(HOST_SIDE + ":")
    assert proxy.events("egress_connect")[-1]["address"] == f"{ALLOWED}:443"


def test_a_wildcard_admits_subdomains_but_not_the_bare_domain(world, proxy):
    sub_before, bare_before = accepts(world, WILD_SUB, 443), accepts(world, WILD_BARE, 443)
    for name in ("a.wild.test", "deep.a.wild.test"):
        status, _, s, rest = connect(proxy.port, f"{name}:443")
        assert status == 200, name
        assert (rest or s.recv(100)).decode().startswith(f"BANNER {WILD_SUB}:443")
        s.close()
    status, reason, s, _ = connect(proxy.port, "wild.test:443")
    s.close()
    assert_refused(proxy, world, status, reason, contains="wild.test:443 is not in the allowlist")
    time.sleep(0.2)
    assert accepts(world, WILD_SUB, 443) == sub_before + 2
    assert accepts(world, WILD_BARE, 443) == bare_before


def test_an_unlisted_name_is_refused(world, proxy):
    before = accepts(world, UNLISTED, 443)
    status, reason, s, _ = connect(proxy.port, "unlisted.test:443")
    s.close()
    assert_refused(proxy, world, status, reason, contains="unlisted.test:443 is not in the allowlist")
    time.sleep(0.2)
    assert accepts(world, UNLISTED, 443) == before


def test_an_unlisted_port_of_a_listed_name_is_refused(world, proxy):
    before = accepts(world, ALLOWED, 8443)
    status, reason, s, _ = connect(proxy.port, "allowed.test:8443")
    s.close()
    assert_refused(proxy, world, status, reason, contains="allowed.test:8443 is not in the allowlist")
    time.sleep(0.2)
    assert accepts(world, ALLOWED, 8443) == before


# A name that hides another behind the listed one: a resolver that stops at
# a NUL, a percent-escape, a fragment or a path would dial the first name
# after an allow check that read the whole string (the SOCKS5 NUL-byte
# bypass of an agent sandbox's proxy). The proxy refuses each: nothing
# reaches the unlisted host.
@pytest.mark.parametrize("target", ["unlisted.test\x00.allowed.test:443", "unlisted.test%00.allowed.test:443",
                                    "unlisted.test/.allowed.test:443", "unlisted.test#.allowed.test:443",
                                    "unlisted.test\\.allowed.test:443", "unlisted.test.:443",
                                    "UNLISTED.test:443", "unlisted.test..allowed.test:443"])
def test_a_name_hiding_another_behind_the_listed_one_is_refused(world, proxy, target):
    before = accepts(world, UNLISTED, 443)
    status, reason, s, _ = connect(proxy.port, target)
    s.close()
    assert status in (400, 403), reason
    assert reason.startswith("egress: ") and reason.count("\n") == 1, reason
    time.sleep(0.2)
    assert accepts(world, UNLISTED, 443) == before
    assert private_accepts(world) == 0


@pytest.mark.parametrize("target", [f"{ALLOWED}:443", "[::1]:443", "127.1:443", "2130706433:443", "0x7f.1:443",
                                    "[::ffff:198.19.0.2]:443"])
def test_an_ip_literal_is_refused(world, proxy, target):
    before = accepts(world, ALLOWED, 443)
    status, reason, s, _ = connect(proxy.port, target)
    s.close()
    assert_refused(proxy, world, status, reason)
    assert "IP" in reason, reason
    time.sleep(0.1)
    assert accepts(world, ALLOWED, 443) == before
    assert private_accepts(world) == 0


def test_names_resolving_to_each_refused_range_are_refused(world, proxy):
    port = world["private_port"]
    bad = sorted(n for n in world["names"] if n.endswith(".bad.test"))
    assert len(bad) >= 25
    for name in bad:
        status, reason, s, _ = connect(proxy.port, f"{name}:{port}")
        s.close()
        assert_refused(proxy, world, status, reason, contains=f"{name} resolves to ")
    time.sleep(0.2)
    assert private_accepts(world) == 0  # the loopback server never saw any of them
    assert accepts(world, ALLOWED, port) == 0  # nor the public half of mixed.bad.test
    assert len([e for e in proxy.events("egress_refused") if e["host"].endswith(".bad.test")]) == len(bad)


def test_the_benchmark_range_is_public_only_through_the_test_setting(world):
    """Positive control for the range tests: the servers' own addresses are
    refused as soon as the test-only setting is absent."""
    p = Proxy(world["work"], ["allowed.test"], public=False, resolver=world["resolver"])
    try:
        before = accepts(world, ALLOWED, 443)
        status, reason, s, _ = connect(p.port, "allowed.test:443")
        s.close()
        assert_refused(p, world, status, reason, contains="benchmarking (RFC 2544)")
        time.sleep(0.1)
        assert accepts(world, ALLOWED, 443) == before
    finally:
        assert p.stop() == 0


def test_dns_rebinding_between_check_and_connect_never_reaches_the_private_answer(world, proxy):
    port = world["private_port"]
    before = accepts(world, ALLOWED, port)
    status, _, s, rest = connect(proxy.port, f"rebind.test:{port}")
    assert status == 200
    assert (rest or s.recv(100)).decode() == f"BANNER {ALLOWED}:{port}\n"
    s.close()
    # The name now answers loopback: a second request is refused, which
    # proves the resolver did change its answer and the proxy had asked once.
    status, reason, s, _ = connect(proxy.port, f"rebind.test:{port}")
    s.close()
    assert_refused(proxy, world, status, reason, contains="resolves to 127.0.0.1")
    time.sleep(0.2)
    assert accepts(world, ALLOWED, port) == before + 1  # at the public server
    assert private_accepts(world) == 0  # the private one never got a connection


def test_a_connect_relayed_inside_a_tunnel_is_only_data_for_the_allowed_server(world, proxy):
    before_allowed, before_unlisted = accepts(world, ALLOWED, 443), accepts(world, UNLISTED, 443)
    status, _, s, rest = connect(proxy.port, "allowed.test:443")
    assert status == 200
    if not rest:
        recv_line(s)
    inner = b"CONNECT unlisted.test:443 HTTP/1.1\r\nHost: unlisted.test:443\r\n\r\n"
    s.sendall(inner)
    echoed = b""
    while len(echoed) < len(inner):
        echoed += s.recv(4096)
    s.close()
    assert echoed == inner  # the allowed server answered it (echo), not the proxy
    closes = world["upstream"].wait_close(f"{ALLOWED}:443", before_allowed + 1)
    assert closes[-1]["data"] == inner.decode()
    time.sleep(0.2)
    assert accepts(world, UNLISTED, 443) == before_unlisted
    assert len(proxy.events("egress_connect")) == 1


def test_a_connect_to_the_proxy_itself_is_refused(world, proxy):
    for target in (f"127.0.0.1:{proxy.port}", f"localhost:{proxy.port}", f"self.test:{proxy.port}"):
        status, reason, s, _ = connect(proxy.port, target)
        s.close()
        assert_refused(proxy, world, status, reason)
    assert proxy.events("egress_connect") == []


def test_plain_http_to_an_allowed_host_is_rewritten_and_reaches_it(world, proxy):
    before = accepts(world, ALLOWED, 80)
    # A second request rides along after the first: it must never be sent.
    raw = (b"GET http://allowed.test/path?q=1 HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: secret\r\n"
           b"Proxy-Connection: keep-alive\r\n\r\n"
           b"GET http://unlisted.test/ HTTP/1.1\r\nHost: unlisted.test\r\n\r\n")
    status, _, s, rest = request(proxy.port, raw, read_body=False)
    assert status == 200
    body = rest
    while not body.endswith(b"\n"):
        body += s.recv(4096)
    s.close()
    assert body.decode() == f"HTTP-OK {ALLOWED}:80 GET /path?q=1 HTTP/1.1 host=allowed.test\n"
    closes = world["upstream"].wait_close(f"{ALLOWED}:80", before + 1)
    received = closes[-1]["data"]
    assert received.startswith("GET /path?q=1 HTTP/1.1\r\nHost: allowed.test\r\n")
    assert "Proxy-Authorization" not in received and "Proxy-Connection" not in received
    assert "Connection: close\r\n" in received
    assert "unlisted.test" not in received  # nothing after the first request's body
    assert accepts(world, UNLISTED, 80) == 0


def test_plain_http_to_an_unlisted_host_is_refused(world, proxy):
    for raw in (b"GET http://unlisted.test/ HTTP/1.1\r\nHost: unlisted.test\r\n\r\n",
                b"POST http://unlisted.test/x HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 0\r\n\r\n",
                b"GET http://allowed.test:8443/ HTTP/1.1\r\n\r\n",
                b"GET http://" + ALLOWED.encode() + b"/ HTTP/1.1\r\n\r\n"):
        status, reason, s, _ = request(proxy.port, raw)
        s.close()
        assert_refused(proxy, world, status, reason)
    # Origin-form (a request for the proxy itself) and https:// are 400.
    for raw in (b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", b"GET https://allowed.test/ HTTP/1.1\r\n\r\n"):
        status, reason, s, _ = request(proxy.port, raw)
        s.close()
        assert_refused(proxy, world, status, reason, expect_status=400)
    time.sleep(0.2)
    assert accepts(world, UNLISTED, 80) == 0
    assert accepts(world, ALLOWED, 8443) == 0


@pytest.mark.parametrize("raw", [
    b"\r\n\r\n", b"CONNECT\r\n\r\n", b"CONNECT allowed.test HTTP/1.1\r\n\r\n",
    b"CONNECT allowed.test:99999 HTTP/1.1\r\n\r\n", b"CONNECT allowed.test:443 HTTP/2.0\r\n\r\n",
    b"CONNECT allowed.test:443  HTTP/1.1\r\n\r\n", b"CONNECT allowed.test:443 HTTP/1.1\r\nX: a\nb\r\n\r\n",
    b"CONNECT allowed.test:443 HTTP/1.1\r\n folded\r\n\r\n", b"CONNECT user@allowed.test:443 HTTP/1.1\r\n\r\n",
    b"GET http://allowed.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    b"GET http://allowed.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"\x00\xff\xfe CONNECT \x01\r\n\r\n", b"CONNECT allowed.test:443 HTTP/1.1\r\nBad Name: x\r\n\r\n",
])
def test_malformed_requests_get_400_and_the_proxy_keeps_serving(world, proxy, raw):
    status, reason, s, _ = request(proxy.port, raw)
    s.close()
    assert_refused(proxy, world, status, reason, expect_status=400)
    status, _, s, _ = connect(proxy.port, "allowed.test:443")  # still serving
    s.close()
    assert status == 200


def test_limits_on_head_size_head_time_and_connections(world):
    p = Proxy(world["work"], ["allowed.test"], "--header-timeout", "0.5", "--max-connections", "3",
              "--max-header-bytes", "1024", resolver=world["resolver"])
    try:
        status, reason, s, _ = request(p.port, b"CONNECT allowed.test:443 HTTP/1.1\r\nX: " + b"a" * 2000 + b"\r\n\r\n")
        s.close()
        assert_refused(p, world, status, reason, expect_status=431)
        t0 = time.time()
        status, reason, s, _ = request(p.port, b"CONNECT allowed.test:443 HTTP/1.1\r\n")  # never finished
        s.close()
        assert_refused(p, world, status, reason, expect_status=408)
        assert time.time() - t0 >= 0.4  # not before the header timeout (a bound a slow machine cannot break)
        held = [socket.create_connection(("127.0.0.1", p.port)) for _ in range(3)]

        def attempt(want):
            status, reason, s, _ = connect(p.port, "allowed.test:443")
            s.close()
            return (status, reason) if status == want else None

        # Once the proxy has taken the three it holds, the next finds no slot.
        status, reason = eventually(lambda: attempt(503)) or (None, None)
        assert_refused(p, world, status, reason, expect_status=503)
        for h in held:
            h.close()
        assert eventually(lambda: attempt(200)), "the slots did not come back"
    finally:
        assert p.stop() == 0


def test_an_idle_tunnel_is_closed(world):
    p = Proxy(world["work"], ["allowed.test"], "--idle-timeout", "0.5", resolver=world["resolver"])
    try:
        status, _, s, rest = connect(p.port, "allowed.test:443")
        assert status == 200
        if not rest:
            recv_line(s)
        s.settimeout(5)
        t0 = time.time()
        assert s.recv(10) == b""  # the proxy closed it
        assert time.time() - t0 >= 0.3  # not before the idle timeout
        s.close()
        assert p.events("egress_idle_close")
    finally:
        assert p.stop() == 0


def test_the_system_resolver_reads_etc_hosts_and_its_answer_is_checked(world):
    """The static binary's getaddrinfo (files + dns inside libc.a): a name
    that /etc/hosts maps to loopback is refused. /etc/hosts is replaced in a
    private mount namespace of the proxy alone."""
    hosts = world["work"] / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n127.0.0.1 sysloop.test\n{ALLOWED} syspublic.test\n")
    port = world["private_port"]
    log = world["work"] / "sysproxy.log"
    script = (f'mount --bind {hosts} /etc/hosts && exec {AGENT} egress-proxy --listen 127.0.0.1:0 '
              f'--allow sysloop.test:{port} --allow syspublic.test --test-public-range {SUBNET}.0/24')
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                            stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
    try:
        proxy_port = json.loads(proc.stdout.readline())["port"]
        status, reason, s, _ = connect(proxy_port, f"sysloop.test:{port}")
        s.close()
        assert status == 403 and "resolves to 127.0.0.1, loopback" in reason, reason
        before = accepts(world, ALLOWED, 443)
        status, _, s, rest = connect(proxy_port, "syspublic.test:443")
        assert status == 200
        assert (rest or s.recv(100)).decode() == f"BANNER {ALLOWED}:443\n"
        s.close()
        time.sleep(0.2)
        assert accepts(world, ALLOWED, 443) == before + 1
        assert private_accepts(world) == 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("args, message", [
    (["--listen", "0.0.0.0:0", "--allow", "a.test"], "--listen: the proxy listens on loopback only"),
    (["--listen", "198.19.0.1:0", "--allow", "a.test"], "--listen: the proxy listens on loopback only"),
    (["--listen", "127.0.0.1", "--allow", "a.test"], "--listen: expected 127.0.0.1:PORT"),
    (["--listen", "127.0.0.1:0", "--allow", "10.0.0.1"], "--allow 10.0.0.1: IP addresses are not allowed"),
    (["--listen", "127.0.0.1:0", "--allow", "a*.test"], "--allow a*.test: '*' is allowed only"),
    (["--listen", "127.0.0.1:0"], "expected --allow ENTRY or --policy"),
    (["--listen", "127.0.0.1:0", "--allow", "a.test", "--test-public-range", "10.0.0.0/8"],
     "only a range inside 198.18.0.0/15"),
    (["--listen", "127.0.0.1:0", "--allow", "a.test", "--test-public-range", "198.16.0.0/14"],
     "only a range inside 198.18.0.0/15"),
])
def test_bad_options_are_one_line_and_64(args, message):
    r = subprocess.run([AGENT, "egress-proxy", *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 64, r.stderr
    assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr


# --- exactly the listed name, exactly one request, bounded on every side ------

SMUGGLE = (b"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: Content-Length\r\n"
           b"Content-Length: 47\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: unlisted.test\r\n\r\n")
assert len(SMUGGLE.split(b"\r\n\r\n", 1)[1]) == 47


def test_a_connection_header_naming_the_framing_is_refused_and_nothing_rides_along(world, proxy):
    before_allowed, before_unlisted = accepts(world, ALLOWED, 80), accepts(world, UNLISTED, 80)
    for raw in (SMUGGLE,
                SMUGGLE.replace(b"Connection: Content-Length", b"Connection: close, transfer-encoding"),
                SMUGGLE.replace(b"Connection: Content-Length", b"Connection: Host")):
        status, reason, s, _ = request(proxy.port, raw)
        s.close()
        assert_refused(proxy, world, status, reason, expect_status=400, contains="Connection names ")
    time.sleep(0.2)
    assert accepts(world, ALLOWED, 80) == before_allowed  # nothing reached the upstream
    assert accepts(world, UNLISTED, 80) == before_unlisted
    # Positive control: the same request without that Connection header is
    # forwarded, framed by its Content-Length, as exactly one request.
    status, _, s, rest = request(proxy.port, SMUGGLE.replace(b"Connection: Content-Length\r\n", b""), read_body=False)
    assert status == 200
    while not rest.endswith(b"\n"):
        rest += s.recv(4096)
    s.close()
    closes = world["upstream"].wait_close(f"{ALLOWED}:80", before_allowed + 1)
    assert closes[-1]["data"].startswith("POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 47\r\n")
    assert closes[-1]["data"].endswith("\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: unlisted.test\r\n\r\n")


def test_a_name_resolving_to_an_address_of_the_proxys_host_is_refused(world, proxy_own):
    """own-host.test answers the host side of the veth: inside the range the
    test declares public, and yet the proxy's own address."""
    p = proxy_own
    for target in ("own-host.test:443", "own-host.test:80"):
        status, reason, s, _ = connect(p.port, target)
        s.close()
        assert_refused(p, world, status, reason, contains=f"resolves to {HOST_SIDE}, an address of the proxy's own host")
    time.sleep(0.2)
    assert world["own"].events() == []  # the host's server never saw a connection
    status, _, s, _ = connect(p.port, "allowed.test:443")  # positive control, same proxy
    s.close()
    assert status == 200


@pytest.fixture
def proxy_own(world):
    p = Proxy(world["work"], ["allowed.test", "own-host.test", "own-host.test:80"], resolver=world["resolver"])
    yield p
    assert p.stop() == 0


def refused_lines(events):
    refused = [e for e in events if e["event"] == "egress_refused"]
    counted = sum(e.get("dropped_before", 0) for e in refused)
    counted += sum(e["dropped"] for e in events if e["event"] == "egress_refusals_dropped")
    return refused, counted


def test_refusal_logs_are_bounded_per_field_and_rate_limited_per_client(world):
    p = Proxy(world["work"], ["allowed.test"], resolver=world["resolver"])
    try:
        head = b"CONNECT " + b"a" * 16000 + b".test:443 HTTP/1.1\r\n\r\n"
        assert len(head) <= 16 * 1024
        deadline = time.time() + 60
        for _ in range(300):
            assert time.time() < deadline
            status, reason, s, _ = request(p.port, head)
            s.close()
            assert status == 403
    finally:
        assert p.stop() == 0
    text = p.log.read_text()
    lines = text.splitlines()
    assert len(text) < 64 * 1024, f"{len(text)} bytes of log for 300 refusals"
    assert all(len(line) < 2048 for line in lines)
    events = [json.loads(line) for line in lines]
    refused, counted = refused_lines(events)
    assert 0 < len(refused) < 300 and len(refused) + counted == 300  # every refusal logged or counted
    assert all(e["host"].endswith("bytes)") and len(e["host"]) < 300 for e in refused)
    # Positive control: a few refusals are each logged in full.
    q = Proxy(world["work"], ["allowed.test"], resolver=world["resolver"])
    try:
        for _ in range(3):
            status, reason, s, _ = connect(q.port, "unlisted.test:443")
            s.close()
    finally:
        assert q.stop() == 0
    refused, counted = refused_lines(q.events())
    assert len(refused) == 3 and counted == 0 and refused[0]["host"] == "unlisted.test"


def test_one_client_cannot_take_every_connection(world):
    p = Proxy(world["work"], ["allowed.test"], "--max-connections-per-client", "3", resolver=world["resolver"])
    held = []
    try:
        for _ in range(3):
            status, _, s, _ = connect(p.port, "allowed.test:443")
            assert status == 200
            held.append(s)
        status, reason, s, _ = connect(p.port, "allowed.test:443")
        s.close()
        assert_refused(p, world, status, reason, expect_status=503, contains="too many connections from 127.0.0.1")
        # Another client (another source address) still gets a slot.
        other = socket.create_connection(("127.0.0.1", p.port), source_address=("127.0.0.2", 0), timeout=5)
        other.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n")
        assert other.recv(100).startswith(b"HTTP/1.1 200 ")
        other.close()
        held.pop().close()
        time.sleep(0.2)
        status, _, s, _ = connect(p.port, "allowed.test:443")  # the slot came back
        s.close()
        assert status == 200
    finally:
        for h in held:
            h.close()
        assert p.stop() == 0


def test_lookups_under_a_wildcard_entry_are_rate_limited(world):
    """A wildcard is a DNS channel (the client picks the labels looked up):
    its lookups are bounded per entry. Rate 1 a second: a burst of 5."""
    p = Proxy(world["work"], ["allowed.test", "*.wild.test"], "--wildcard-lookups-per-second", "1",
              resolver=world["resolver"])
    try:
        statuses = []
        for _ in range(6):
            status, reason, s, _ = connect(p.port, "a.wild.test:443")
            s.close()
            statuses.append(status)
        assert statuses == [200] * 5 + [429], statuses
        assert "too many lookups under *.wild.test:443" in reason, reason
        status, _, s, _ = connect(p.port, "allowed.test:443")  # an exact entry is not counted
        s.close()
        assert status == 200
    finally:
        assert p.stop() == 0


@pytest.mark.parametrize("point", ["proxy-head-limit", "proxy-wildcard-rate", "proxy-connection-caps"])
def test_each_limit_removed_as_the_mutation_run_removes_it_stops_refusing(world, point):
    """The mutation run's proxy limits are real points: with the variable
    the analysis sets, the test-only build admits what the limit refuses
    above (no probe can turn a limit into reach, so the analysis explains
    them and these tests are the evidence that each one answers)."""
    limit = {"proxy-head-limit": ["--max-header-bytes", "1024"],
             "proxy-wildcard-rate": ["--wildcard-lookups-per-second", "1"],
             "proxy-connection-caps": ["--max-connections", "2", "--max-connections-per-client", "1"]}[point]
    p = Proxy(world["work"], ["allowed.test", "*.wild.test"], *limit, resolver=world["resolver"],
              env={"OARBANK_FAULT_SKIP_STEP": point})
    held = []
    try:
        if point == "proxy-head-limit":
            status, reason, s, _ = request(p.port, b"CONNECT allowed.test:443 HTTP/1.1\r\nX: " + b"a" * 2000 + b"\r\n\r\n")
            held.append(s)
            assert status == 200, reason
        elif point == "proxy-wildcard-rate":
            for _ in range(7):
                status, reason, s, _ = connect(p.port, "a.wild.test:443")
                s.close()
                assert status == 200, reason
        else:
            for _ in range(3):
                status, reason, s, _ = connect(p.port, "allowed.test:443")
                held.append(s)
                assert status == 200, reason
    finally:
        for h in held:
            h.close()
        assert p.stop() == 0


def dns_queries(world):
    return [json.loads(l) for l in world["dns_log"].read_text().splitlines()]


@pytest.mark.parametrize("ndots", [5, 1])
def test_the_real_resolver_looks_up_exactly_the_name_never_a_search_domain(world, ndots):
    """resolv.conf has `search corp.internal` and ndots 5 (a Kubernetes
    pod's default) or 1; the name server has hijack.dns.test.corp.internal
    and missing.dns.test.corp.internal (an unlisted server) but neither
    name without the suffix."""
    p = Proxy(world["work"], ["*.dns.test"], resolv_conf=world["work"] / f"resolv-ndots{ndots}.conf")
    try:
        before = accepts(world, UNLISTED, 443)
        for name in ("hijack.dns.test", "missing.dns.test"):
            status, reason, s, _ = connect(p.port, f"{name}:443")
            s.close()
            assert_refused(p, world, status, reason, expect_status=502, contains=f"{name}: cannot resolve")
        status, _, s, rest = connect(p.port, "real.dns.test:443")  # positive control: the real resolver answers
        assert status == 200
        assert (rest or s.recv(100)).decode() == f"BANNER {ALLOWED}:443\n"
        s.close()
    finally:
        assert p.stop() == 0
    time.sleep(0.2)
    assert accepts(world, UNLISTED, 443) == before
    asked = {q["name"] for q in dns_queries(world) if q["event"] == "query"}
    assert {"hijack.dns.test", "missing.dns.test", "real.dns.test"} <= asked
    assert not [n for n in asked if n.endswith("corp.internal")], asked


def test_the_real_resolver_follows_a_changed_resolv_conf(world):
    """A long-running proxy reads /etc/resolv.conf again when it changes
    (between lookups), as getaddrinfo did: the second name server answers
    real.dns.test with another address."""
    zone = world["work"] / "zone2.json"
    zone.write_text(json.dumps({"real.dns.test": {"a": [WILD_SUB]}}))
    log = world["work"] / "dns2.log"
    dns2 = subprocess.Popen(["ip", "netns", "exec", NS, "python3", DNS_SERVER, str(log), str(zone), DNS2],
                            stdout=subprocess.PIPE, text=True)
    conf = world["work"] / "resolv-switch.conf"
    conf.write_text(f"nameserver {DNS}\n")
    p = None
    try:
        assert dns2.stdout.readline(), "the second name server did not start"
        p = Proxy(world["work"], ["*.dns.test"], resolv_conf=conf)
        status, _, s, rest = connect(p.port, "real.dns.test:443")
        assert status == 200 and (rest or s.recv(100)).decode() == f"BANNER {ALLOWED}:443\n"
        s.close()
        conf.write_text(f"nameserver {DNS2}\n")

        def banner():
            status, _, s, rest = connect(p.port, "real.dns.test:443")
            said = (rest or s.recv(100)).decode() if status == 200 else ""
            s.close()
            return said

        # The proxy looks at the file at most once a second: until then the old server answers.
        assert eventually(lambda: banner() == f"BANNER {WILD_SUB}:443\n", timeout=15), banner()
    finally:
        if p is not None:
            assert p.stop() == 0
        dns2.kill()
        dns2.wait()


def test_slow_lookups_delay_no_one_else_and_one_name_is_one_query(world):
    """Eight names whose answers take SLOW_S seconds, and five requests for
    one more slow name, are pending; a fast name is answered meanwhile
    (checked by order, not by time: no slow answer has been sent yet)."""
    p = Proxy(world["work"], ["*.dns.test"], resolv_conf=world["work"] / "resolv-ndots1.conf")
    slow = []
    try:
        names = [f"slow-{i}.dns.test" for i in range(8)] + ["shared.dns.test"] * 5
        start = len(dns_queries(world))
        for name in names:
            s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
            s.sendall(b"CONNECT %s:443 HTTP/1.1\r\n\r\n" % name.encode())
            slow.append(s)
        deadline = time.time() + 5
        while time.time() < deadline:
            asked = {q["name"] for q in dns_queries(world)[start:] if q["event"] == "query"}
            if set(names) <= asked:
                break
            time.sleep(0.02)
        assert set(names) <= asked, asked
        status, _, s, rest = connect(p.port, "fast.dns.test:443")
        answered = [q for q in dns_queries(world)[start:] if q["event"] == "answer" and q["name"] in names]
        assert status == 200 and answered == [], answered  # the fast name did not wait for a slow one
        s.close()
        for s in slow:
            s.settimeout(SLOW_S + 8)
            assert s.recv(100).startswith(b"HTTP/1.1 200 ")
        queries = [q for q in dns_queries(world)[start:] if q["event"] == "query" and q["type"] == "A"]
        assert [q["name"] for q in queries].count("shared.dns.test") == 1  # five requests, one query
    finally:
        for s in slow:
            s.close()
        assert p.stop() == 0


# --- a confined module ---------------------------------------------------------

MODULE = r'''
import errno, json, os, socket, sys
proxy = os.environ["HTTPS_PROXY"]
host, port = proxy.rsplit("//", 1)[1].rsplit(":", 1)
target, direct, private_port = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {}
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"CONNECT %s HTTP/1.1\r\n\r\n" % target.encode())
data = b""
while data.count(b"\n") < 3:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
out["via_proxy"] = data.decode()
s.close()
def attempt(family, kind, addr):
    try:
        c = socket.socket(family, kind)
    except OSError as e:
        return "socket " + errno.errorcode[e.errno]
    try:
        c.settimeout(3)
        if kind == socket.SOCK_DGRAM:
            c.sendto(b"x", addr)
            return "sent"
        c.connect(addr)
        return "connected"
    except OSError as e:
        return "connect " + errno.errorcode.get(e.errno, str(e.errno))
    finally:
        c.close()
out["direct"] = attempt(socket.AF_INET, socket.SOCK_STREAM, (direct, 443))
out["direct_80"] = attempt(socket.AF_INET, socket.SOCK_STREAM, (direct, 80))
out["udp"] = attempt(socket.AF_INET, socket.SOCK_DGRAM, (direct, 53))
out["udp6"] = attempt(socket.AF_INET6, socket.SOCK_DGRAM, ("::1", 53))
out["loopback_other_port"] = attempt(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", private_port))
out["loopback6_other_port"] = attempt(socket.AF_INET6, socket.SOCK_STREAM, ("::1", private_port))
# The proxy's port number on other addresses: Landlock allows the port.
out["remote_proxy_port"] = attempt(socket.AF_INET, socket.SOCK_STREAM, (direct, int(port)))
out["loopback2_proxy_port"] = attempt(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.2", int(port)))
try:
    out["links"] = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])
except OSError as e:
    out["links"] = "unreadable " + errno.errorcode.get(e.errno, str(e.errno))
try:
    socket.getaddrinfo("confined.test", 443)
    out["resolve"] = "resolved"
except OSError as e:
    out["resolve"] = "failed"
print(json.dumps(out))
'''


@pytest.fixture
def module_tree(world):
    tree = pathlib.Path(tempfile.mkdtemp(prefix="oeg-module-"))
    for d in ("bundle", "work", "work/tmp", "data"):
        (tree / d).mkdir()
        os.chmod(tree / d, 0o777)
    os.chmod(tree, 0o755)
    os.chmod(tree / "bundle", 0o755)
    (tree / "bundle" / "module.py").write_text(MODULE)
    yield tree
    shutil.rmtree(tree, ignore_errors=True)


@pytest.mark.parametrize("uid", [0, 65534], ids=["root", "nobody"])
@pytest.mark.parametrize("launcher", ["sandbox-exec", "run"])
def test_a_confined_module_reaches_the_allowed_host_through_the_proxy_and_nothing_else(world, module_tree, uid,
                                                                                      launcher):
    """sandbox-exec: the module is in the host's network, with a proxy the
    test starts there; Landlock limits TCP to the proxy's port, so a listener
    on that port number at another address is reachable (the documented
    limit). run: the supervisor gives the job a network namespace whose only
    listener is its own proxy, serving the policy's list from the host's
    network; the same listeners are out of reach."""
    if landlock_abi() < 4:
        pytest.skip("Landlock ABI < 4: egress-allowlist is refused here (exit 70), tested below")
    p = None
    if launcher == "sandbox-exec":
        p = Proxy(world["work"], ["confined.test"], resolver=world["resolver"])
        port = p.port
    else:
        port = free_port()
    # Listeners on the proxy's port number elsewhere: at the upstream address
    # (the test namespace) and at 127.0.0.2 on the host.
    bypass_ns = Servers(world["work"] / f"bypass-ns-{launcher}-{uid}.log", [f"{CONFINED}|{port}|banner"], netns=NS)
    bypass_lo = Servers(world["work"] / f"bypass-lo-{launcher}-{uid}.log", [f"127.0.0.2|{port}|banner"])
    try:
        policy = {"contract": 1, "role": "runner", "bundle": str(module_tree / "bundle"),
                  "work": str(module_tree / "work"), "data": str(module_tree / "data"),
                  "tmp": str(module_tree / "work/tmp"),
                  "net": {"mode": "egress-allowlist", "allow": ["confined.test"], "proxy_port": port}}
        (module_tree / "policy.json").write_text(json.dumps(policy))
        argv = ["/usr/bin/python3", str(module_tree / "bundle" / "module.py"), "confined.test:443", CONFINED,
                str(world["private_port"])]
        env = {"PATH": "/usr/bin:/bin"}
        if launcher == "sandbox-exec":  # the launcher alone: the agent would set this environment
            env["HTTPS_PROXY"] = f"http://127.0.0.1:{port}"
            cmd = [AGENT, "sandbox-exec", str(module_tree / "policy.json"), "--", *argv]
        else:  # the supervisor builds the job's environment and serves its proxy
            cmd = [FAULTY, "run", "--unproven", "--egress-test-public-range", f"{SUBNET}.0/24",
                   "--egress-test-resolver", str(world["resolver"]), str(module_tree / "policy.json"), "--", *argv]
        if uid != 0:
            cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
        before = {q: accepts(world, CONFINED, q) for q in (443, 80, world["private_port"])}
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        time.sleep(0.2)
        if launcher == "run":
            # Nothing but the job's own proxy answers on the proxy's port.
            assert out["remote_proxy_port"] == "connect ENETUNREACH", out
            assert out["loopback2_proxy_port"] == "connect ECONNREFUSED", out
            assert bypass_ns.events() == [] and bypass_lo.events() == []
            assert out["links"] == ["lo"], out
        else:
            # The documented limit of the launcher alone (docs/egress.md, the known limits).
            assert out["remote_proxy_port"] == "connected", out
            assert out["loopback2_proxy_port"] == "connected", out
            assert len(bypass_ns.events()) == 1 and len(bypass_lo.events()) == 1
            assert "lo" in out["links"] and len(out["links"]) > 1, out
        assert out["via_proxy"] == f"HTTP/1.1 200 Connection established\r\n\r\nBANNER {CONFINED}:443\n", out
        # Landlock: TCP connect to the proxy port alone (EACCES); seccomp: no UDP (EPERM).
        assert out["direct"] == "connect EACCES", out
        assert out["direct_80"] == "connect EACCES", out
        assert out["loopback_other_port"] == "connect EACCES", out
        assert out["loopback6_other_port"] == "connect EACCES", out
        assert out["udp"] == "socket EPERM", out
        assert out["udp6"] == "socket EPERM", out
        assert out["resolve"] == "failed", out
        # At the servers: exactly the one proxied connection arrived.
        assert accepts(world, CONFINED, 443) == before[443] + 1
        assert accepts(world, CONFINED, 80) == before[80]
        assert accepts(world, CONFINED, world["private_port"]) == before[world["private_port"]]
        assert private_accepts(world) == 0
        if p is not None:
            connects = p.events("egress_connect")
        else:  # the supervisor's proxy logs on the agent's stderr
            connects = [json.loads(l) for l in r.stderr.splitlines() if l.startswith('{"event":"egress_connect"')]
        assert [e["address"] for e in connects] == [f"{CONFINED}:443"], r.stderr
    finally:
        bypass_ns.stop()
        bypass_lo.stop()
        if p is not None:
            assert p.stop() == 0


def test_run_stops_the_jobs_proxy_when_the_job_ends(world, module_tree):
    """The supervisor's proxy lives as long as the job: a module that leaves
    a connection open to it and exits, and one killed at the timeout, both
    end `run` promptly, and the agent leaves no process behind."""
    if landlock_abi() < 4:
        pytest.skip("Landlock ABI < 4: egress-allowlist is refused here (exit 70)")
    port = free_port()
    policy = {"contract": 1, "role": "runner", "bundle": str(module_tree / "bundle"),
              "work": str(module_tree / "work"), "data": str(module_tree / "data"), "tmp": str(module_tree / "work/tmp"),
              "net": {"mode": "egress-allowlist", "allow": ["confined.test"], "proxy_port": port}}
    (module_tree / "policy.json").write_text(json.dumps(policy))
    hold = ("import os,socket,time\ns=socket.create_connection(('127.0.0.1', %d))\n"
            "s.sendall(b'CONNECT confined.test:443 HTTP/1.1\\r\\n\\r\\n')\nprint(s.recv(200).decode().split(chr(13))[0], flush=True)\n" % port)
    base = [FAULTY, "run", "--unproven", "--egress-test-public-range", f"{SUBNET}.0/24", "--egress-test-resolver",
            str(world["resolver"])]
    for extra, code, script in ((["--timeout", "1"], 137, hold + "time.sleep(30)\n"), ([], 0, hold)):
        before = accepts(world, CONFINED, 443)
        start = time.monotonic()
        r = subprocess.run([*base, *extra, str(module_tree / "policy.json"), "--", "/usr/bin/python3", "-c", script],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == code, r.stderr
        assert r.stdout == "HTTP/1.1 200 Connection established\n", r.stdout + r.stderr
        assert time.monotonic() - start < 10
        assert accepts(world, CONFINED, 443) == before + 1
        # The tunnel the module held open is closed at the server's end.
        assert len(world["upstream"].wait_close(f"{CONFINED}:443", before + 1)) >= before + 1


def test_below_landlock_abi_4_the_egress_policy_is_refused_with_70(module_tree):
    policy = {"contract": 1, "role": "runner", "bundle": str(module_tree / "bundle"),
              "work": str(module_tree / "work"), "data": str(module_tree / "data"), "tmp": str(module_tree / "work/tmp"),
              "net": {"mode": "egress-allowlist", "allow": ["confined.test"], "proxy_port": 3128}}
    (module_tree / "policy.json").write_text(json.dumps(policy))
    r = subprocess.run([AGENT, "sandbox-exec", "--landlock-abi-max", "3", str(module_tree / "policy.json"), "--",
                        "/bin/true"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 70, r.stderr
    assert r.stderr.startswith("sandbox: CAPABILITY_NOT_ENFORCED: ") and "net.egress-allowlist" in r.stderr
    r = subprocess.run([AGENT, "sandbox-exec", "--landlock-abi-max", "4", str(module_tree / "policy.json"), "--",
                        "/bin/true"], capture_output=True, text=True, timeout=30)
    assert "net.egress-allowlist" not in r.stderr  # positive control: ABI 4 enforces it


def test_the_proxy_takes_its_list_and_port_from_a_policy(world, module_tree):
    port = free_port()
    policy = {"contract": 1, "role": "runner", "bundle": str(module_tree / "bundle"),
              "work": str(module_tree / "work"), "data": str(module_tree / "data"), "tmp": str(module_tree / "work/tmp"),
              "net": {"mode": "egress-allowlist", "allow": ["Allowed.Test", "*.wild.test"], "proxy_port": port}}
    (module_tree / "policy.json").write_text(json.dumps(policy))
    log = open(world["work"] / "policy-proxy.log", "w")
    proc = subprocess.Popen([FAULTY, "egress-proxy", "--policy", str(module_tree / "policy.json"),
                             "--test-public-range", f"{SUBNET}.0/24", "--test-resolver", str(world["resolver"])],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["port"] == port and ready["allow"] == ["allowed.test:443", "*.wild.test:443"]
        status, _, s, _ = connect(port, "allowed.test:443")
        s.close()
        assert status == 200
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_run_refuses_a_test_public_range_outside_the_benchmark_block_with_64(module_tree):
    policy = {"contract": 1, "role": "runner", "bundle": str(module_tree / "bundle"),
              "work": str(module_tree / "work"), "data": str(module_tree / "data"), "tmp": str(module_tree / "work/tmp"),
              "net": {"mode": "egress-allowlist", "allow": ["confined.test"], "proxy_port": 3128}}
    (module_tree / "policy.json").write_text(json.dumps(policy))
    for bad in ("10.0.0.0/8", "127.0.0.0/8"):
        r = subprocess.run([AGENT, "run", "--unproven", "--egress-test-public-range", bad, str(module_tree / "policy.json"), "--",
                            "/bin/true"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 64, r.stderr
        assert r.stderr.startswith(f"usage: --egress-test-public-range {bad}: ") and r.stderr.count("\n") == 1, r.stderr
    r = subprocess.run([AGENT, "run", "--unproven", "--egress-test-public-range", f"{SUBNET}.0/24", str(module_tree / "policy.json"),
                        "--", "/bin/true"], capture_output=True, text=True, timeout=30)
    # Positive control: a range inside the block is taken (the job runs where egress-allowlist is enforced).
    assert r.returncode == (0 if landlock_abi() >= 4 else 70), r.stderr
    # A resolver file decides where an allowed name leads: the production agent has no such option, in any
    # command, and says so on one line; the test-only build takes it.
    resolver = module_tree / "resolver"
    resolver.write_text(f"confined.test {SUBNET}.2\n")
    for command in (["run", "--unproven", "--egress-test-resolver", str(resolver), str(module_tree / "policy.json"),
                     "--", "/bin/true"],
                    ["cage", "--unproven", "--egress-test-resolver", str(resolver), "--worktree", str(module_tree / "work"),
                     "--", "/bin/true"],
                    ["egress-proxy", "--listen", "127.0.0.1:0", "--allow", "confined.test", "--test-resolver",
                     str(resolver)]):
        r = subprocess.run([AGENT, *command], capture_output=True, text=True, timeout=30)
        assert r.returncode == 64 and "resolver" in r.stderr and r.stderr.count("\n") == 1, (command, r.stderr)
    r = subprocess.run([FAULTY, "run", "--unproven", "--egress-test-resolver", str(resolver),
                        str(module_tree / "policy.json"), "--", "/bin/true"], capture_output=True, text=True, timeout=30)
    assert r.returncode == (0 if landlock_abi() >= 4 else 70), r.stderr


# --- the same guarantees under `run` --------------------------------------------

def agent_run(policy_path, argv, uid, *extra, resolv_conf=None, timeout=90):
    """`oarbank-agent run` as `uid`, the real resolver pointed at the test's
    name server when resolv_conf is given."""
    cmd = [AGENT, "run", "--unproven", *extra, str(policy_path), "--", *argv]
    if uid != 0:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    if resolv_conf:
        cmd = with_resolv_conf(resolv_conf, cmd)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={"PATH": "/usr/bin:/bin"})


MODULE_21 = r"""
import json, os, select, socket, sys, time
host, port = os.environ["HTTPS_PROXY"].rsplit("//", 1)[1].rsplit(":", 1)
cap = int(sys.argv[1])
def send(raw):
    s = socket.create_connection((host, int(port)), timeout=15)
    s.sendall(raw)
    return s
def status(s):
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.1 ") else None
def once(raw):
    s = send(raw)
    try:
        return status(s)
    finally:
        s.close()
out = {}
# 5: eight slow names pending, then a fast one.
slow = [send(b"CONNECT slow-%d.dns.test:443 HTTP/1.1\r\n\r\n" % (20 + i)) for i in range(8)]
time.sleep(0.5)
fast = send(b"CONNECT fast.dns.test:443 HTTP/1.1\r\n\r\n")
out["fast"] = status(fast)
out["slow_answered_before_fast"] = len(select.select(slow, [], [], 0)[0])
out["slow"] = [status(s) for s in slow]
for s in slow + [fast]:
    s.close()
# 1: the smuggling head.
out["smuggle"] = once(sys.argv[2].encode("latin-1"))
# 3: the proxy's own address; 2: a name only a search domain would find.
out["own_host"] = once(b"CONNECT own-host.dns.test:443 HTTP/1.1\r\n\r\n")
out["hijack"] = once(b"CONNECT hijack.dns.test:443 HTTP/1.1\r\n\r\n")
# 4: 300 refused 16 KiB requests.
big = b"CONNECT " + b"a" * 16000 + b".test:443 HTTP/1.1\r\n\r\n"
out["big"] = sorted(set(once(big) for _ in range(300)))
# 6: the job's share of connections.
time.sleep(0.3)
held = [send(b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n") for _ in range(cap)]
out["held"] = [status(s) for s in held]
out["over_cap"] = once(b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n")
for s in held:
    s.close()
print(json.dumps(out))
"""


@pytest.mark.parametrize("uid", [0, 65534], ids=["root", "nobody"])
def test_under_run_one_request_the_listed_name_bounded_logs_and_a_share(world, module_tree, uid):
    """Items 1-6 of the proxy's guarantees through a job's own proxy, with
    the real resolver and a resolv.conf with a search list (ndots 5)."""
    if landlock_abi() < 4:
        pytest.skip("Landlock ABI < 4: egress-allowlist is refused here (exit 70)")
    cap = 10
    (module_tree / "bundle" / "module21.py").write_text(MODULE_21)
    policy = {"contract": 1, "role": "runner", "bundle": str(module_tree / "bundle"),
              "work": str(module_tree / "work"), "data": str(module_tree / "data"), "tmp": str(module_tree / "work/tmp"),
              "net": {"mode": "egress-allowlist", "allow": ["allowed.test", "allowed.test:80", "*.dns.test"],
                      "proxy_port": free_port()}}
    (module_tree / "policy.json").write_text(json.dumps(policy))
    before = {"allowed80": accepts(world, ALLOWED, 80), "unlisted": accepts(world, UNLISTED, 443),
              "unlisted80": accepts(world, UNLISTED, 80)}
    start = len(dns_queries(world))
    r = agent_run(module_tree / "policy.json",
                  ["/usr/bin/python3", str(module_tree / "bundle" / "module21.py"), str(cap), SMUGGLE.decode()], uid,
                  "--egress-test-public-range", f"{SUBNET}.0/24", "--egress-max-connections", str(cap),
                  resolv_conf=world["work"] / "resolv-ndots5.conf")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["fast"] == 200 and out["slow_answered_before_fast"] == 0, out
    assert out["slow"] == [200] * 8, out
    assert out["smuggle"] == 400, out
    assert out["own_host"] == 403, out
    assert out["hijack"] == 502, out
    assert out["big"] == [403], out
    assert out["held"] == [200] * cap and out["over_cap"] == 503, out
    time.sleep(0.2)
    assert accepts(world, ALLOWED, 80) == before["allowed80"]  # the smuggling request never left
    assert accepts(world, UNLISTED, 80) == before["unlisted80"]
    assert accepts(world, UNLISTED, 443) == before["unlisted"]  # nor the search domain's answer
    assert world["own"].events() == []
    asked = {q["name"] for q in dns_queries(world)[start:] if q["event"] == "query"}
    assert "hijack.dns.test" in asked and not [n for n in asked if n.endswith("corp.internal")], asked
    # The agent's stderr: bounded lines, every refusal logged or counted.
    lines = [l for l in r.stderr.splitlines() if l.startswith("{")]
    assert len(r.stderr) < 64 * 1024 and all(len(l) < 2048 for l in lines), len(r.stderr)
    refused, counted = refused_lines([json.loads(l) for l in lines])
    assert len(refused) < 304 and len(refused) + counted == 304, (len(refused), counted)
    reasons = " ".join(e["reason"] for e in refused)
    assert "Connection names Content-Length" in reasons and "an address of the proxy's own host" in reasons
