"""egress-any under `run`: a network namespace of the job's own whose only
way out is slirp4netns, filtered by the agent's nftables ruleset
(sandbox/supervise/job_network.h).

The whole world lives in network namespaces this module creates, with no
route off the machine:
  up   the supervisor's namespace (the stack's outside end); its only
       uplink is a veth to `pub`; its loopback and its own veth address
       stand for the host's
  pub  the "public" servers, at 198.19.N.2 and its NAT64 form
       64:ff9b::198.19.N.2 (declared public by run's test-only
       --egress-test-public-range, which accepts nothing outside
       198.18.0.0/15), a name server at 198.19.N.53 (the stack's resolver
       forwards there: /etc/netns/<up>/resolv.conf), and decoys on every
       non-public class that can be assigned there
Every decoy logs what reaches it (harness/egress_any_peers.py): "sees
nothing" is checked at the decoy, not only by the job's errors.

Needs root (network namespaces, uid switching); CI runs as root.
"""
import ipaddress
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from testlib import AGENT, BUILD, FAULTY
PEERS = os.path.join(os.path.dirname(__file__), "egress_any_peers.py")
DNS_SERVER = os.path.join(os.path.dirname(__file__), "egress_dns.py")

N = 20 + os.getpid() % 200
PUBLIC_RANGE = f"198.19.{N}.0/24"
PUBLIC4 = f"198.19.{N}.2"
PUBLIC6 = str(ipaddress.ip_address(f"64:ff9b::198.19.{N}.2"))  # its NAT64 form, canonical
DNS = f"198.19.{N}.53"
LAN_DNS = "10.99.0.53"  # the name server the host's resolv.conf names: on the LAN, not public
UP_ADDR = f"198.18.{N}.1"  # the supervisor's own address: not public, and the host's
PUB_ADDR = f"198.18.{N}.2"
PORT = 4443
# Decoys: one per non-public class that can be assigned to an interface.
DECOYS4 = {
    "rfc1918_10": "10.77.0.2", "rfc1918_172": "172.16.77.2", "rfc1918_192": "192.168.77.2",
    "cgnat": "100.64.77.2", "metadata": "169.254.169.254", "test_net": "192.0.2.77",
    "benchmark_undeclared": f"198.18.{N}.3", "ietf": "192.0.0.77",
}
DECOYS6 = {
    "ula": "fd77::2", "documentation6": "2001:db8::77", "sixtofour_private": "2002:a4d:2::1",
    "nat64_private": "64:ff9b::a4d:2", "teredo": "2001::77", "site_local": "fec0::77",
}
UP, PUB = f"oea-up-{os.getpid()}", f"oea-pub-{os.getpid()}"
VETH_UP, VETH_PUB = f"oeau{os.getpid() % 100000}", f"oeap{os.getpid() % 100000}"

if os.geteuid() != 0:
    pytest.skip("network namespaces and uid switching need root (CI runs as root)", allow_module_level=True)

# The job's side: every probe named on its command line, one JSON object out.
MODULE = r'''
import errno, json, os, random, socket, struct, subprocess, sys
spec = json.loads(sys.argv[1])
out = {}
def err(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
def tcp(addr, port):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((addr, port))
        return s.recv(200).decode().strip()
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return "connect " + err(e)
    finally:
        s.close()
def udp(addr, port):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(1.5)
    try:
        s.sendto(b"ping", (addr, port))
        return s.recv(200).decode()
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return "sendto " + err(e)
    finally:
        s.close()
def dns(server, name, qtype):
    q = struct.pack("!HHHHHH", random.randrange(65536), 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack("!HH", qtype, 1)
    fam = socket.AF_INET6 if ":" in server else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(3)
    try:
        s.sendto(q, (server, 53))
        data = s.recv(4096)
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return "dns " + err(e)
    finally:
        s.close()
    ancount = struct.unpack("!H", data[6:8])[0]
    pos = len(q)
    addrs = []
    for _ in range(ancount):
        pos += 2  # a compressed name pointer to the question
        rtype, _c, _ttl, rdlen = struct.unpack("!HHIH", data[pos:pos + 10])
        pos += 10
        rdata = data[pos:pos + rdlen]
        pos += rdlen
        if rtype == 1:
            addrs.append(socket.inet_ntop(socket.AF_INET, rdata))
        elif rtype == 28:
            addrs.append(socket.inet_ntop(socket.AF_INET6, rdata))
    return addrs
for label, addr, port in spec.get("tcp", []):
    out["tcp " + label] = tcp(addr, port)
for label, addr, port in spec.get("udp", []):
    out["udp " + label] = udp(addr, port)
for name in spec.get("resolve", []):
    try:
        infos = socket.getaddrinfo(name, spec["port"], 0, socket.SOCK_STREAM)
        addr = infos[0][4][0]
        out["resolve " + name] = sorted({i[4][0] for i in infos})
        out["resolve-connect " + name] = tcp(addr, spec["port"])
    except OSError as e:
        out["resolve " + name] = "gaierror " + str(e.errno)
for label, server, name, qtype in spec.get("dns", []):
    answer = dns(server, name, qtype)
    out["dns " + label] = answer
    if isinstance(answer, list) and answer:
        out["dns-connect " + label] = tcp(answer[0], spec["port"])
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
    out["netlink"] = "opened"
except OSError as e:
    out["netlink"] = err(e)
for args in (["flush", "ruleset"], ["add", "rule", "inet", "oarbank", "output", "accept"]):
    r = subprocess.run(["/usr/sbin/nft", *args], capture_output=True, text=True)
    out["nft " + args[0]] = [r.returncode, r.stderr.strip()[:200]]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.bind(("0.0.0.0", spec["port"]))
    s.listen(1)
    out["listen"] = "listening"
except OSError as e:
    out["listen"] = err(e)
print(json.dumps(out))
'''


def sh(*args, check=True):
    return subprocess.run(args, capture_output=True, text=True, check=check, timeout=30)


class Peers:
    def __init__(self, log, netns, specs):
        self.log = pathlib.Path(log)
        self.log.touch()
        self.proc = subprocess.Popen(["ip", "netns", "exec", netns, "python3", PEERS, str(log), *specs],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line, "peers did not start"

    def events(self, local=None):
        out = [json.loads(l) for l in self.log.read_text().splitlines() if l.strip()]
        return [e for e in out if local is None or e["local"] == local]

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def fmt(addr, port):
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


@pytest.fixture(scope="module")
def world():
    work = pathlib.Path(tempfile.mkdtemp(prefix="oea-"))
    os.chmod(work, 0o755)
    made = []
    procs = []
    try:
        for ns in (UP, PUB):
            sh("ip", "netns", "add", ns)
            made.append(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", VETH_UP, "netns", UP, "type", "veth", "peer", "name", VETH_PUB, "netns", PUB)
        sh("ip", "-n", UP, "addr", "add", f"{UP_ADDR}/24", "dev", VETH_UP)
        sh("ip", "-n", UP, "addr", "add", "fd99::1/64", "dev", VETH_UP, "nodad")
        sh("ip", "-n", PUB, "addr", "add", f"{PUB_ADDR}/24", "dev", VETH_PUB)
        sh("ip", "-n", PUB, "addr", "add", "fd99::2/64", "dev", VETH_PUB, "nodad")
        for ns, dev in ((UP, VETH_UP), (PUB, VETH_PUB)):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", UP, "route", "add", "default", "via", PUB_ADDR)
        sh("ip", "-n", UP, "-6", "route", "add", "default", "via", "fd99::2")
        for a in [PUBLIC4, DNS, LAN_DNS, *DECOYS4.values()]:
            sh("ip", "-n", PUB, "addr", "add", f"{a}/32", "dev", "lo")
        for a in [PUBLIC6, *DECOYS6.values()]:
            sh("ip", "-n", PUB, "addr", "add", f"{a}/128", "dev", "lo", "nodad")
        # The stack's resolver forwards to the up namespace's name server.
        etc = pathlib.Path("/etc/netns") / UP
        etc.mkdir(parents=True, exist_ok=True)
        # The up namespace's (the host's) name server is on the LAN: the
        # stack's resolver forwards there from the host's side, and the
        # job's own queries to it (the same resolv.conf) go to the stack's
        # resolver instead.
        (etc / "resolv.conf").write_text(f"nameserver {LAN_DNS}\n")
        zone = work / "zone.json"
        zone.write_text(json.dumps({
            "pub.test": {"a": [PUBLIC4], "aaaa": [PUBLIC6]},
            "decoy.test": {"a": [DECOYS4["rfc1918_10"]], "aaaa": [DECOYS6["ula"]]},
            "meta.test": {"a": [DECOYS4["metadata"]]},
            "loop.test": {"a": ["127.0.0.1"], "aaaa": ["::1"]},
        }))
        dns_log = work / "dns.log"
        dns = subprocess.Popen(["ip", "netns", "exec", PUB, "python3", DNS_SERVER, str(dns_log), str(zone), DNS],
                               stdout=subprocess.PIPE, text=True)
        procs.append(dns)
        assert dns.stdout.readline(), "name server did not start"
        lan_dns = subprocess.Popen(["ip", "netns", "exec", PUB, "python3", DNS_SERVER, str(work / "lan-dns.log"),
                                    str(zone), LAN_DNS], stdout=subprocess.PIPE, text=True)
        procs.append(lan_dns)
        assert lan_dns.stdout.readline(), "the LAN name server did not start"
        public = Peers(work / "public.log", PUB, [f"{PUBLIC4}|{PORT}", f"{PUBLIC6}|{PORT}"])
        decoys = Peers(work / "decoys.log", PUB,
                       [f"{a}|{PORT}" for a in [*DECOYS4.values(), *DECOYS6.values(), PUB_ADDR]])
        # The host's side: its loopback and its own address, where the
        # supervisor's sockets live.
        host = Peers(work / "host.log", UP, [f"127.0.0.1|{PORT}", f"::1|{PORT}", f"{UP_ADDR}|{PORT}",
                                             f"fd99::1|{PORT}"])
        module = work / "bundle"
        module.mkdir()
        (module / "module.py").write_text(MODULE)
        for d in ("work", "data"):
            (work / d).mkdir()
            os.chmod(work / d, 0o777)
        policy = work / "policy.json"
        policy.write_text(json.dumps({"contract": 1, "role": "runner", "bundle": str(module),
                                      "work": str(work / "work"), "data": str(work / "data"),
                                      "net": {"mode": "egress-any"}}))
        yield {"work": work, "public": public, "decoys": decoys, "host": host, "policy": policy,
               "module": module / "module.py", "dns_log": dns_log}
        for p in (public, decoys, host):
            p.stop()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(pathlib.Path("/etc/netns") / UP, ignore_errors=True)
        for ns in made:
            sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(work, ignore_errors=True)


def in_up(cmd, uid):
    """cmd in the up namespace, as `uid`. /dev/net/tun is the kernel's own
    device; Debian makes it 0666, this machine may not: an unprivileged
    supervisor gets a 0666 node of it in a private mount namespace."""
    if uid != 0:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o mode=0755 oea /mnt && mknod -m 0666 /mnt/tun c 10 200 && '
               'mount --bind /mnt/tun /dev/net/tun && umount -l /mnt && exec "$@"', "oea", *cmd]
    return ["ip", "netns", "exec", UP, *cmd]


def run_job(world, uid, spec, extra=()):
    cmd = [AGENT, "run", "--json", "--unproven", "--timeout", "60", "--egress-test-public-range", PUBLIC_RANGE,
           *extra, str(world["policy"]), "--", "/usr/bin/python3", str(world["module"]), json.dumps(spec)]
    return subprocess.run(in_up(cmd, uid), capture_output=True, text=True, timeout=90)


def spec_all():
    tcp = [["public4", PUBLIC4, PORT], ["public6", PUBLIC6, PORT]]
    tcp += [[k, v, PORT] for k, v in {**DECOYS4, **DECOYS6}.items()]
    tcp += [["mapped_private", "::ffff:" + DECOYS4["rfc1918_10"], PORT],
            ["gateway", "10.0.2.2", PORT],  # the stack's gateway: never the host's loopback
            ["host_loopback4", "127.0.0.1", PORT], ["host_loopback6", "::1", PORT],
            ["host_address", UP_ADDR, PORT], ["host_address6", "fd99::1", PORT],
            ["pub_veth", PUB_ADDR, PORT]]
    udp = [["public4", PUBLIC4, PORT], ["public6", PUBLIC6, PORT],
           ["rfc1918_10", DECOYS4["rfc1918_10"], PORT], ["metadata", DECOYS4["metadata"], PORT],
           ["ula", DECOYS6["ula"], PORT], ["gateway", "10.0.2.2", PORT], ["host_address", UP_ADDR, PORT]]
    dns = [["pub A", "10.0.2.3", "pub.test", 1], ["pub AAAA", "10.0.2.3", "pub.test", 28],
           ["decoy A", "10.0.2.3", "decoy.test", 1], ["decoy AAAA", "10.0.2.3", "decoy.test", 28],
           ["meta A", "10.0.2.3", "meta.test", 1], ["loop A", "10.0.2.3", "loop.test", 1]]
    dns += [["lan server", LAN_DNS, "pub.test", 1]]
    return {"tcp": tcp, "udp": udp, "dns": dns, "port": PORT, "resolve": ["pub.test", "decoy.test"]}


@pytest.mark.parametrize("uid", [0, 65534], ids=["root", "nobody"])
def test_public_servers_answer_and_nothing_else_is_reached(world, uid):
    before = {name: len(world[name].events()) for name in ("public", "decoys", "host")}
    r = run_job(world, uid, spec_all())
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["exit_code"] == 0, result
    assert "net" in result["container"]["namespaces"], result
    out = json.loads(result["stdout"])
    # The public servers answer, TCP and UDP, IPv4 and IPv6 (NAT64 form).
    assert out["tcp public4"] == f"HELLO {PUBLIC4}:{PORT}", out
    assert out["tcp public6"] == f"HELLO [{PUBLIC6}]:{PORT}", out
    assert out["udp public4"] == f"UDP {PUBLIC4}:{PORT}", out
    assert out["udp public6"] == f"UDP [{PUBLIC6}]:{PORT}", out
    # The stack's resolver answers; names that point at decoys lead nowhere.
    assert out["dns pub A"] == [PUBLIC4] and out["dns pub AAAA"] == [PUBLIC6], out
    assert out["dns-connect pub A"] == f"HELLO {PUBLIC4}:{PORT}", out
    assert out["dns decoy A"] == [DECOYS4["rfc1918_10"]], out
    # Every decoy, the host's own addresses and the stack's gateway: refused
    # by the ruleset, at once (a TCP reset: ECONNREFUSED, where each of them
    # listens; EPERM for a datagram). Loopback is the job's own namespace's,
    # where nothing listens: ECONNREFUSED too, and not counted below.
    for label, addr, _port in spec_all()["tcp"][2:]:
        assert out["tcp " + label] == "connect ECONNREFUSED", (label, out)
    for label, addr, _port in spec_all()["udp"][2:]:
        assert out["udp " + label] == "sendto EPERM", (label, out)
    for name in ("decoy A", "decoy AAAA", "meta A", "loop A"):
        assert out["dns-connect " + name] == "connect ECONNREFUSED", out
    # The job's own resolver (libc, the host's resolv.conf naming a LAN name
    # server) works: its queries go to the stack's resolver, which answers.
    assert out["dns lan server"] == [PUBLIC4], out
    assert out["resolve pub.test"] == sorted([PUBLIC4, PUBLIC6]), out
    assert out["resolve-connect pub.test"].startswith("HELLO "), out
    assert out["resolve decoy.test"] == sorted([DECOYS4["rfc1918_10"], DECOYS6["ula"]]), out
    assert not out["resolve-connect decoy.test"].startswith("HELLO"), out
    # The job cannot touch the rules, nor listen.
    assert out["netlink"] == "EPERM", out
    for op in ("nft flush", "nft add"):
        assert out[op][0] != 0 and "Operation not permitted" in out[op][1], (op, out)
    assert out["listen"] == "EPERM", out
    time.sleep(0.3)
    # At the receiving end: the public servers saw exactly the job's
    # connections; no decoy and nothing of the host saw anything.
    public = world["public"].events()[before["public"]:]
    answered = [v.split()[1] for k, v in out.items()
                if k.startswith(("tcp ", "dns-connect ", "resolve-connect ")) and v.startswith("HELLO ")]
    assert len(answered) == 6, out  # public4, public6, pub A, pub AAAA, the LAN server's answer, resolve pub.test
    assert sorted(e["local"] for e in public if e["event"] == "tcp") == sorted(answered), public
    assert world["decoys"].events()[before["decoys"]:] == []
    assert world["host"].events()[before["host"]:] == []
    # The ruleset counted what it refused: at least every refused connect
    # and datagram above.
    refused = sum(1 for k, v in out.items() if k.startswith(("tcp ", "udp ", "dns-connect ")) and
                  "loop" not in k and v.startswith(("connect ECONNREFUSED", "sendto EPERM")))
    assert refused >= 27, out
    assert result["container"]["net_dropped"] >= refused, result


@pytest.mark.parametrize("uid", [0, 65534], ids=["root", "nobody"])
def test_explain_names_the_ruleset_class_and_leaves_public_addresses_alone(world, uid):
    # run --explain: a private address refused by the ruleset (TCP reset,
    # UDP EPERM) is named with its class; a public server reached is not a
    # refusal at all.
    spec = {"tcp": [["public4", PUBLIC4, PORT], ["rfc1918_10", DECOYS4["rfc1918_10"], PORT]],
            "udp": [["metadata", DECOYS4["metadata"], PORT]], "port": PORT}
    r = run_job(world, uid, spec, extra=("--explain",))
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    out = json.loads(result["stdout"])
    assert out["tcp public4"] == f"HELLO {PUBLIC4}:{PORT}", out
    refusals = result["explain"]["refusals"]
    by_target = {d["target"]: d for d in refusals}
    assert {f"{DECOYS4['rfc1918_10']}:{PORT}", f"{DECOYS4['metadata']}:{PORT}"} <= set(by_target), refusals
    assert not any(PUBLIC4 in target for target in by_target), refusals
    for target in (f"{DECOYS4['rfc1918_10']}:{PORT}", f"{DECOYS4['metadata']}:{PORT}"):
        d = by_target[target]
        assert d["denied_by"] == "egress-any ruleset" and d["grant"] is None, d
    assert "private" in by_target[f"{DECOYS4['rfc1918_10']}:{PORT}"]["explanation"], refusals
    assert by_target[f"{DECOYS4['rfc1918_10']}:{PORT}"]["errno"] == "ECONNREFUSED", refusals
    assert by_target[f"{DECOYS4['metadata']}:{PORT}"]["kind"] == "send", refusals


def test_the_gate_reads_the_ruleset_back_and_the_report_says_enforced(world):
    r = subprocess.run(in_up([AGENT, "sandbox-report", str(world["policy"])], 0), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["supervisor"]["net_egress_any"]["status"] == "enforced", report["supervisor"]
    assert report["supervisor"]["placement"]["verdict"] == "ok", report["supervisor"]
    # sandbox-exec alone: unavailable, and it refuses with 70.
    assert report["placement"]["verdict"] == "CAPABILITY_NOT_ENFORCED", report["placement"]
    caps = {c["id"]: c for c in report["capabilities"]}
    assert caps["net.egress-any"]["status"] == "unavailable"
    r = subprocess.run([AGENT, "sandbox-exec", str(world["policy"]), "--", "/bin/true"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 70 and "net.egress-any" in r.stderr, r.stderr


def test_without_the_stack_run_refuses_with_70_naming_it(world):
    """A host without slirp4netns: the part is named, nothing runs."""
    marker = world["work"] / "ran"
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
           'mount -t tmpfs -o mode=0755 oea /usr/bin/slirp4netns 2>/dev/null || '
           'mount --bind /dev/null /usr/bin/slirp4netns; exec "$@"', "oea",
           AGENT, "run", "--unproven", str(world["policy"]), "--", "/usr/bin/touch", str(marker)]
    r = subprocess.run(["ip", "netns", "exec", UP, *cmd], capture_output=True, text=True, timeout=60)
    assert r.returncode == 70, r.stdout + r.stderr
    assert "net.egress-any" in r.stderr and "slirp4netns" in r.stderr, r.stderr
    assert not marker.exists()


def test_without_the_netfilter_helper_run_refuses_with_70_naming_nftables(world):
    marker = world["work"] / "ran2"
    helper = os.path.join(BUILD, "sandbox", "oarbank-netfilter")
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
           f'mount --bind /dev/null {helper}; exec "$@"', "oea",
           AGENT, "run", "--unproven", str(world["policy"]), "--", "/usr/bin/touch", str(marker)]
    r = subprocess.run(["ip", "netns", "exec", UP, *cmd], capture_output=True, text=True, timeout=60)
    assert r.returncode == 70, r.stdout + r.stderr
    assert "net.egress-any" in r.stderr and "nftables" in r.stderr, r.stderr
    assert not marker.exists()


def test_an_unprivileged_agent_facing_a_root_only_tun_device_refuses_in_one_line(world):
    """Where /dev/net/tun is root's only (0600, as on some hosts), a uid-65534
    agent has no way to a tap device: egress-any is refused with 70 and one
    line naming the device and its mode, before anything starts. The 0600
    node is made in a private mount namespace, whatever this host has."""
    marker = world["work"] / "ran_tun"
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
           'mount -t tmpfs -o mode=0755 oea /mnt && mknod -m 0600 /mnt/tun c 10 200 && '
           'mount --bind /mnt/tun /dev/net/tun && umount -l /mnt && exec "$@"', "oea",
           "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
           AGENT, "run", "--unproven", str(world["policy"]), "--", "/usr/bin/touch", str(marker)]
    r = subprocess.run(["ip", "netns", "exec", UP, *cmd], capture_output=True, text=True, timeout=60)
    assert r.returncode == 70, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "net.egress-any" in lines[0] and "/dev/net/tun is mode 0600 owned by uid 0" in lines[0], r.stderr
    assert "uid 65534" in lines[0], r.stderr
    assert not marker.exists()


@pytest.mark.skipif(not os.access("/usr/bin/strace", os.X_OK), reason="needs strace (Debian: strace) to fail a step")
@pytest.mark.parametrize("inject,step", [
    ("setns:error=EPERM:when=1", "join the job's user namespace (setns): Operation not permitted"),
    ("setns:error=EPERM:when=2", "join the job's network namespace (setns): Operation not permitted"),
    ("ioctl:error=EBUSY:when=1", "the stack's tap device: create tap0 (TUNSETIFF): Device or resource busy"),
    ("ioctl:error=EPERM:when=2", "the stack's tap device: make tap0 persistent (TUNSETPERSIST): Operation not permitted"),
])
def test_each_failing_step_of_the_stacks_tap_refuses_in_one_line_naming_it(world, inject, step):
    """The helper joins the job's namespaces and makes the stack's tap0
    there before the stack starts; strace fails one of its system calls
    (its count is the helper's own: it makes no setns and no ioctl before
    these). The job is refused with 70 and one line naming the step, nothing
    of the job's runs and no stack is left."""
    marker = world["work"] / "ran_tap"
    cmd = ["strace", "-f", "-o", "/dev/null", "-e", "trace=" + inject.split(":")[0], "-e", "inject=" + inject,
           AGENT, "run", "--unproven", str(world["policy"]), "--", "/usr/bin/touch", str(marker)]
    r = subprocess.run(["ip", "netns", "exec", UP, *cmd], capture_output=True, text=True, timeout=60)
    assert r.returncode == 70, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "net.egress-any (nftables: oarbank-netfilter: " + step in lines[0], r.stderr
    assert not marker.exists()
    assert stacks_in_up() == []


def stacks_in_up():
    up = os.stat(f"/run/netns/{UP}").st_ino
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and pathlib.Path(f"/proc/{p}/comm").read_text().strip() == "slirp4netns" and \
                    os.stat(f"/proc/{p}/ns/net").st_ino == up:
                out.append(int(p))
        except OSError:
            pass
    return out


def test_no_stack_outlives_the_job_nor_a_killed_agent(world):
    r = run_job(world, 0, {"port": PORT})
    assert r.returncode == 0, r.stdout + r.stderr
    assert stacks_in_up() == []
    started = world["work"] / "work" / "started"
    started.unlink(missing_ok=True)
    cmd = [AGENT, "run", "--unproven", str(world["policy"]), "--", "/bin/sh", "-c", f"touch {started}; sleep 30"]
    agent = subprocess.Popen(in_up(cmd, 0))
    deadline = time.time() + 20
    while time.time() < deadline and not started.exists():
        time.sleep(0.05)
    assert started.exists(), "the job never started"
    assert len(stacks_in_up()) == 1
    os.kill(agent.pid, 9)
    agent.wait()
    deadline = time.time() + 5
    while time.time() < deadline and stacks_in_up():
        time.sleep(0.05)
    assert stacks_in_up() == []




def _paused_job(world, point, name, job):
    """`run` of `job` through the faulty agent, paused at `point`; the
    agent's process and the job's init once it is there."""
    pause = world["work"] / f"pause-{name}"
    pause.unlink(missing_ok=True)
    env = dict(os.environ, OARBANK_FAULT_PAUSE=point, OARBANK_FAULT_PAUSE_FILE=str(pause))
    cmd = ["ip", "netns", "exec", UP, FAULTY, "run", "--unproven", str(world["policy"]), "--", *job]
    agent = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and not pause.exists():
        time.sleep(0.02)
    if not pause.exists():
        agent.kill()
        out, err = agent.communicate()
        pytest.fail(f"the agent never reached {point}: {out}{err}")
    return agent, int(pause.read_text().split()[2]), pathlib.Path(str(pause) + ".go")


def _nft_in(init, *args):
    return subprocess.run(["nsenter", "-t", str(init), "-U", "-n", "--preserve-credentials", "nft", *args],
                          capture_output=True, text=True, timeout=10)


@pytest.mark.skipif(not os.path.exists(FAULTY), reason="no oarbank-agent-faulty (OARBANK_TEST_HOOKS=OFF)")
@pytest.mark.parametrize("tamper", [[["flush", "ruleset"]],
                                    [["insert", "rule", "inet", "oarbank", "output", "accept"]],
                                    [["add", "table", "ip", "x"], ["delete", "table", "ip", "x"]]],
                         ids=["flush", "accept-all", "changed-and-undone"])
def test_the_gate_refuses_a_ruleset_changed_after_it_was_installed(world, tamper):
    """The gate reads the namespace's nftables generation, which the kernel
    moves on with every change committed to its ruleset: changed between
    its installation and the gate (by whoever could: here root, from
    outside), even by a change undone since, the job is refused with 70 and
    the module never runs."""
    marker = world["work"] / "work" / "tampered-ran"
    marker.unlink(missing_ok=True)
    agent, init, go = _paused_job(world, "supervisor-init-reported", tamper[0][0],
                                  ["/usr/bin/touch", str(marker)])
    try:
        for change in tamper:
            r = _nft_in(init, *change)
            assert r.returncode == 0, r.stderr
        go.touch()
        out, err = agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 70, out + err
    assert re.search(r"gate: the job's network: the ruleset changed after it was installed "
                     r"\(nftables generation (\d+) at its install, (\d+) now\)", err), err
    assert len(err.strip().splitlines()) == 1, err
    assert not marker.exists()


@pytest.mark.skipif(not os.path.exists(FAULTY), reason="no oarbank-agent-faulty (OARBANK_TEST_HOOKS=OFF)")
def test_a_table_added_before_the_install_is_gone_when_the_job_runs(world):
    """Whatever the job's namespace held before the ruleset went in goes in
    the same transaction: a NAT chain added there first (after the
    ruleset's filter, it could turn a public destination the filter let
    through into a private one) is not there once the job runs, and the
    job runs."""
    started = world["work"] / "work" / "early-started"
    started.unlink(missing_ok=True)
    agent, init, go = _paused_job(world, "supervisor-before-job-network", "early",
                                  ["/bin/sh", "-c", f"touch {started}; sleep 3"])
    try:
        r = _nft_in(init, "add table ip early { chain late { type nat hook output priority 100; policy accept; "
                          "ip daddr 198.18.0.0/15 dnat to 10.0.2.2; }; }")
        assert r.returncode == 0, r.stderr
        assert "table ip early" in _nft_in(init, "list", "tables").stdout
        go.touch()
        deadline = time.time() + 20
        while time.time() < deadline and not started.exists() and agent.poll() is None:
            time.sleep(0.02)
        assert started.exists(), "the job never started"
        tables = _nft_in(init, "list", "tables")
        assert tables.returncode == 0, tables.stderr
        assert tables.stdout.split("\n")[:-1] == ["table inet oarbank"], tables.stdout
        out, err = agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 0, out + err


def test_the_stack_leaves_the_hosts_shared_mounts_alone(world):
    """slirp4netns --enable-sandbox detaches its old root: in the host's
    mount namespace that unmount would propagate to every shared mount (the
    network namespaces of /run/netns). The agent gives it a private mount
    namespace first. Run here in the host's mount namespace, not through
    `ip netns exec` (whose own mount namespace would hide the damage)."""
    probe_ns = f"oea-keep-{os.getpid()}"
    sh("ip", "netns", "add", probe_ns)
    try:
        r = subprocess.run([AGENT, "sandbox-report"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([AGENT, "run", "--unproven", str(world["policy"]), "--", "/bin/true"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        for ns in (probe_ns, UP, PUB):
            assert sh("ip", "netns", "exec", ns, "true", check=False).returncode == 0, ns
    finally:
        sh("ip", "netns", "del", probe_ns, check=False)


PLATFORM = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}.get(os.uname().machine, "linux/" + os.uname().machine)


@pytest.fixture(scope="module")
def image_store(world):
    """A busybox-static image in a throw-away broker state directory
    (as harness/test_broker.py's store; nothing is pulled)."""
    if shutil.which("podman") is None or shutil.which("runc") is None or not os.path.exists("/bin/busybox"):
        pytest.skip("podman, runc or busybox-static is not installed (scripts/setup.sh installs them)")
    root = pathlib.Path(tempfile.mkdtemp(prefix="oeak-", dir="/tmp"))
    os.chmod(root, 0o755)
    state = root / "state"
    state.mkdir(mode=0o700)
    (root / "prep").mkdir()
    r = subprocess.run([AGENT, "broker", "--socket", str(root / "prep.sock"), "--work", str(root / "prep"), "--job",
                        "oea-prepare", "--state-dir", str(state), "--", "true"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    image = root / "image"
    (image / "bin").mkdir(parents=True)
    shutil.copy("/bin/busybox", image / "bin" / "busybox")
    for applet in ("sh", "nc", "echo", "cat"):
        os.symlink("busybox", image / "bin" / applet)
    import tarfile
    with tarfile.open(root / "image.tar", "w") as tar:
        tar.add(image, arcname=".")
    env = {"CONTAINERS_CONF": f"{state}/containers.conf", "CONTAINERS_STORAGE_CONF": f"{state}/storage.conf",
           "PATH": os.environ["PATH"], "HOME": f"{state}/home", "TMPDIR": f"{state}/tmp"}
    podman = ["podman", f"--root={state}/storage", f"--runroot={state}/run", f"--tmpdir={state}/tmp",
              f"--runtime={shutil.which('runc')}", "--storage-driver=vfs", "--cgroup-manager=cgroupfs",
              "--events-backend=file"]
    subprocess.run([*podman, "import", "--quiet", str(root / "image.tar"), "localhost/oea-broker:1"], env=env,
                   check=True, capture_output=True, timeout=120)
    digest = subprocess.run([*podman, "image", "inspect", "--format", "{{.Digest}}", "localhost/oea-broker:1"],
                            env=env, check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    yield {"root": root, "state": state, "ref": "localhost/oea-broker@" + digest}
    shutil.rmtree(root, ignore_errors=True)


def broker_run(sock, ref, script):
    import socket as sk
    s = sk.socket(sk.AF_UNIX)
    s.settimeout(120)
    s.connect(str(sock))
    s.sendall((json.dumps({"op": "container.run", "image": ref, "platform": PLATFORM, "args": ["sh", "-c", script],
                           "network": "egress", "timeout_s": 60}) + "\n").encode())
    answer = json.loads(s.makefile("rb").readline())
    s.close()
    return answer


@pytest.mark.parametrize("uid", [0, 65534], ids=["root", "nobody"])
def test_a_broker_container_joins_the_jobs_network_and_its_ruleset(world, image_store, uid):
    """The broker gives a container of an egress-any job the job's own
    network namespace (run --publish-netns, broker --job-netns), never
    Podman's bridge: the public servers answer, the decoys, the stack's
    gateway and the host see nothing."""
    links = image_store["root"] / "links"  # where the job's uid may make its link
    links.mkdir(exist_ok=True)
    os.chmod(links, 0o1777)
    link = links / f"job-netns-{uid}"
    started, stop = world["work"] / "work" / f"started-broker-{uid}", world["work"] / "work" / f"stop-broker-{uid}"
    started.unlink(missing_ok=True)
    stop.unlink(missing_ok=True)
    job = subprocess.Popen(in_up([AGENT, "run", "--unproven", "--egress-test-public-range", PUBLIC_RANGE,
                                  "--publish-netns", str(link), str(world["policy"]), "--", "/bin/sh", "-c",
                                  f"touch {started}; while [ ! -e {stop} ]; do sleep 0.05; done"], uid))
    work = image_store["root"] / f"work-{uid}"
    work.mkdir(exist_ok=True)
    broker = None
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not started.exists():
            time.sleep(0.05)
        assert started.exists() and os.path.islink(link), "the job never started"
        sock = image_store["root"] / f"broker-{uid}.sock"
        # The broker in the host's namespaces (ip netns exec would hide the
        # cgroup mounts Podman needs): its containers join the job's network
        # by the published path, whatever network the broker is in.
        broker = subprocess.Popen([AGENT, "broker", "--socket", str(sock), "--work", str(work), "--job", f"oea-broker-{uid}",
                                   "--state-dir", str(image_store["state"]), "--image",
                                   f"{image_store['ref']}={PLATFORM}", "--network-granted", "--job-netns", str(link),
                                   "--", "/bin/sleep", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        assert broker.stdout.readline().startswith("broker: listening on "), broker.stderr.read()
        before = {name: len(world[name].events()) for name in ("public", "decoys", "host")}
        targets = [PUBLIC4, PUBLIC6, DECOYS4["rfc1918_10"], DECOYS4["metadata"], DECOYS6["ula"], "10.0.2.2", UP_ADDR]
        script = "; ".join(f"echo {t} $(echo | nc -w 2 {t} {PORT} 2>&1 || echo failed)" for t in targets)
        script += "; readlink /proc/self/ns/net"
        answer = broker_run(sock, image_store["ref"], script)
        assert answer.get("exit_code") == 0, json.dumps(answer)
        lines = answer["stdout_tail"].strip().splitlines()
        out = {l.split(" ", 1)[0]: l.split(" ", 1)[1] if " " in l else "" for l in lines[:-1]}
        assert out[PUBLIC4] == f"HELLO {PUBLIC4}:{PORT}", answer
        assert out[PUBLIC6] == f"HELLO [{PUBLIC6}]:{PORT}", answer
        for t in targets[2:]:
            assert "HELLO" not in out[t], (t, answer)
        # The container's network namespace is the job's.
        assert lines[-1] == os.readlink(os.readlink(link)), (lines[-1], os.readlink(link))
        time.sleep(0.3)
        assert world["decoys"].events()[before["decoys"]:] == []
        assert world["host"].events()[before["host"]:] == []
        assert len([e for e in world["public"].events()[before["public"]:] if e["event"] == "tcp"]) == 2
    finally:
        if broker is not None:
            broker.kill()
            broker.wait()
        stop.touch()
        try:
            job.wait(timeout=30)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
    assert job.returncode == 0
    deadline = time.time() + 10
    while time.time() < deadline and os.path.lexists(link):
        time.sleep(0.05)
    assert not os.path.lexists(link), "the job's namespace link outlived the job"


def test_a_network_grant_without_the_jobs_namespace_is_refused(image_store):
    r = subprocess.run([AGENT, "broker", "--socket", str(image_store["root"] / "x.sock"), "--work",
                        str(image_store["root"]), "--job", "oea-x", "--state-dir", str(image_store["state"]),
                        "--network-granted", "--", "true"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 64, r.stderr
    assert "--job-netns" in r.stderr and "never Podman's bridge" in r.stderr, r.stderr


def test_an_allowlist_jobs_container_sees_only_the_jobs_proxy(world, image_store):
    """egress-allowlist: the container joins the job's network namespace,
    where the only listener is the job's proxy, and has HTTPS_PROXY and
    HTTP_PROXY pointing at it: the listed name is reached through it, a
    direct connect to the same server is not."""
    port = 20000 + os.getpid() % 20000
    resolver = world["work"] / "resolver.txt"
    resolver.write_text(f"pub.test {PUBLIC4}\n")
    policy = world["work"] / "allowlist.json"
    policy.write_text(json.dumps({"contract": 1, "role": "runner", "bundle": str(world["module"].parent),
                                  "work": str(world["work"] / "work"), "data": str(world["work"] / "data"),
                                  "net": {"mode": "egress-allowlist", "allow": [f"pub.test:{PORT}"],
                                          "proxy_port": port}}))
    link = image_store["root"] / "allow-netns"
    started, stop = world["work"] / "work" / "started-allow", world["work"] / "work" / "stop-allow"
    started.unlink(missing_ok=True)
    stop.unlink(missing_ok=True)
    job = subprocess.Popen(in_up([FAULTY, "run", "--unproven", "--egress-test-public-range", PUBLIC_RANGE,
                                  "--egress-test-resolver", str(resolver), "--publish-netns", str(link), str(policy),
                                  "--", "/bin/sh", "-c", f"touch {started}; while [ ! -e {stop} ]; do sleep 0.05; done"],
                                 0), stderr=subprocess.DEVNULL)
    work = image_store["root"] / "work-allow"
    work.mkdir(exist_ok=True)
    broker = None
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not started.exists():
            time.sleep(0.05)
        assert started.exists() and os.path.islink(link), "the job never started"
        sock = image_store["root"] / "broker-allow.sock"
        broker = subprocess.Popen([AGENT, "broker", "--socket", str(sock), "--work", str(work), "--job", "oea-allow",
                                   "--state-dir", str(image_store["state"]), "--image",
                                   f"{image_store['ref']}={PLATFORM}", "--network-granted", "--job-netns", str(link),
                                   "--job-proxy-port", str(port), "--", "/bin/sleep", "120"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert broker.stdout.readline().startswith("broker: listening on "), broker.stderr.read()
        before = len(world["public"].events())
        script = (f'echo "proxy $HTTPS_PROXY $HTTP_PROXY"; '
                  f'printf "CONNECT pub.test:{PORT} HTTP/1.1\\r\\n\\r\\n" | nc -w 3 127.0.0.1 {port} | tr -d "\\r" | '
                  f'tr "\\n" " "; echo; echo "direct $(echo | nc -w 2 {PUBLIC4} {PORT} 2>&1 || echo failed)"')
        answer = broker_run(sock, image_store["ref"], script)
        assert answer.get("exit_code") == 0, json.dumps(answer)
        lines = answer["stdout_tail"].strip().splitlines()
        assert lines[0] == f"proxy http://127.0.0.1:{port} http://127.0.0.1:{port}", lines
        assert lines[1].startswith("HTTP/1.1 200 Connection established") and f"HELLO {PUBLIC4}:{PORT}" in lines[1], \
            lines
        assert lines[2].startswith("direct") and "HELLO" not in lines[2], lines
        time.sleep(0.3)
        # Exactly the one tunnel arrived, from the supervisor's side.
        arrived = [e for e in world["public"].events()[before:] if e["event"] == "tcp"]
        assert len(arrived) == 1 and arrived[0]["local"] == f"{PUBLIC4}:{PORT}", arrived
    finally:
        if broker is not None:
            broker.kill()
            broker.wait()
        stop.touch()
        try:
            job.wait(timeout=30)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
    assert job.returncode == 0


def _netfilter_session(requests, wrap=(), during=None, namespaces=True):
    """oarbank-netfilter fed `requests` (bytes) at once, after (where
    `namespaces`) the first request, which hands it a fresh user and network
    namespace as the agent does (a callable sends its own first request,
    given the socket and the two namespaces' descriptors); its answers, exit
    status and stderr. `wrap` goes before the helper's command line;
    `during(pid)` runs once the requests are sent, with a pid whose
    namespaces are the helper's."""
    helper = os.path.join(BUILD, "sandbox", "oarbank-netfilter")
    holder = subprocess.Popen(["unshare", "-Urn", "sleep", "60"])
    try:
        ns = f"/proc/{holder.pid}/ns"
        deadline = time.monotonic() + 5
        while os.readlink(f"{ns}/net") == os.readlink("/proc/self/ns/net") and time.monotonic() < deadline:
            time.sleep(0.01)
        ours, theirs = socket.socketpair()
        with ours, theirs:
            proc = subprocess.Popen([*wrap, helper], stdin=theirs, stdout=theirs, stderr=subprocess.PIPE)
            theirs.close()
            with open(f"{ns}/user") as user, open(f"{ns}/net") as net:
                if callable(namespaces):
                    namespaces(ours, user.fileno(), net.fileno())
                elif namespaces:
                    socket.send_fds(ours, [b"namespaces\n"], [user.fileno(), net.fileno()])
            ours.sendall(requests)
            ours.shutdown(socket.SHUT_WR)
            if during:
                during(holder.pid)
            answers = b""
            try:
                while chunk := ours.recv(65536):
                    answers += chunk
            except ConnectionResetError:  # it ended with requests unread
                pass
            err = proc.stderr.read().decode()
            return answers, proc.wait(timeout=30), err
    finally:
        holder.kill()
        holder.wait()


def test_the_netfilter_helper_answers_in_order_and_refuses_anything_else():
    """The agent's helper takes one job's requests on one socket: the
    namespaces (first, answered once it has joined them and made tap0),
    apply (once, answered with the namespace's nftables generation once
    installed), then generation and dropped, each answered "ok N" and N
    bytes; the end of its input ends it (0). A request out of order, a size
    that is none or too large, or a ruleset nftables refuses ends it with 1
    and one line naming what was wrong; so does an overlong or unfinished
    request line."""
    ruleset = b"table inet oarbank {\n\tcounter dropped {\n\t\tpackets 5 bytes 300\n\t}\n" \
              b"\tchain out {\n\t\ttype filter hook output priority 0; policy accept;\n" \
              b"\t\tcounter name \"dropped\" drop\n\t}\n}\n"
    apply = b"apply %d\n" % len(ruleset) + ruleset
    # Sent at once, as the agent pipelines them: the generation the install
    # made (a fresh namespace's first change), the same generation again
    # (nothing changed since; no stack brings tap0 up here, so no wait for
    # its IPv6 address), then the named counter `dropped` (which starts at
    # 5: only a ruleset the kernel holds answers that).
    answers, code, err = _netfilter_session(apply + b"generation\ndropped\n")
    assert code == 0, err
    assert answers.startswith(b"ok 0\n"), "the namespaces joined and tap0 made: " + repr(answers)
    parts = answers[len(b"ok 0\n"):].split(b"\n")
    assert parts[0] == b"ok %d" % (len(parts[1]) + 1) and parts[1].isdigit() and int(parts[1]) > 0, answers
    assert parts[2:4] == parts[0:2], "generation answers the install's: " + repr(answers)
    assert parts[4:] == [b"ok 2", b"5", b""], answers
    for requests, why in [(b"generation\n", "apply comes first, not: generation"),
                          (b"dropped\n", "apply comes first, not: dropped"),
                          (b"apply x\n", "apply: not a size: x"),
                          (b"apply 2000000\n", "the ruleset is larger than 1 MiB"),
                          (b"apply 10\n", "read the ruleset: the input ended"),
                          (apply + apply, "unexpected request: apply"),
                          (apply + b"flush ruleset\n", "unexpected request: flush ruleset"),
                          (b"apply 9\nnot rules", "install the ruleset: Error:"),
                          (b"x" * 100, "a request line longer than 64 bytes"),
                          (apply + b"rules\n", "unexpected request: rules"),
                          (b"dropped", "the input ended inside a request line")]:
        answers, code, err = _netfilter_session(requests)
        assert code == 1 and len(err.strip().splitlines()) == 1 and why in err, (requests, code, err)
        assert answers.startswith(b"ok 0\n"), "the namespaces joined and tap0 made: " + repr(answers)
        answers = answers[len(b"ok 0\n"):]
        if requests.startswith(apply):  # its answer, and nothing after it
            head, _, rest = answers.partition(b"\n")
            assert head.startswith(b"ok ") and len(rest) == int(head[3:]), answers
        else:
            assert answers == b"", answers


@pytest.mark.parametrize("first,code,why", [
    (lambda sock, user, net: None, 0, ""),
    (lambda sock, user, net: sock.sendall(b"namesp"), 1, "the input ended inside the namespaces request"),
    (lambda sock, user, net: sock.sendall(b"apply 10\n0123456789"), 1, "the namespaces come first, not: apply 10"),
    (lambda sock, user, net: sock.sendall(b"namespaces\n"), 1, "the namespaces request carries 0 descriptors, not 2"),
    (lambda sock, user, net: socket.send_fds(sock, [b"namespaces\n"], [user]), 1,
     "the namespaces request carries 1 descriptors, not 2"),
    (lambda sock, user, net: socket.send_fds(sock, [b"namespaces\n"], [user, net, user]), 1,
     "the namespaces request carries more than 2 descriptors"),
    (lambda sock, user, net: socket.send_fds(sock, [b"namespaces\n"], [net, user]), 1,
     "join the job's user namespace (setns): Invalid argument"),
], ids=["nothing", "cut-short", "apply-first", "no-fds", "one-fd", "three-fds", "swapped"])
def test_the_netfilter_helper_joins_only_the_two_namespaces_it_is_handed_first(first, code, why):
    """The helper is started before the job's namespaces exist; its first
    request hands it their two descriptors, user then network. Anything
    else first (another request, too few or too many descriptors, the wrong
    kinds) ends it with 1 and one line; an input that ends before it is a
    job ended before its namespaces were made: 0, nothing said."""
    answers, rc, err = _netfilter_session(b"", namespaces=first)
    assert rc == code and answers == b"", (rc, answers, err)
    if why:
        assert len(err.strip().splitlines()) == 1 and why in err, err
    else:
        assert err == "", err


@pytest.mark.skipif(not os.access("/usr/bin/strace", os.X_OK), reason="needs strace (Debian: strace) to hold the install")
def test_the_netfilter_helper_refuses_an_install_another_change_was_committed_with():
    """The install's generation is the gate's reference only if the install
    was the one change the kernel counted: strace holds the helper for a
    second right after libnftables sends its transaction, while a table is
    added from outside; the helper ends with 1 and one line saying so, and
    answers nothing."""
    ruleset = b"table inet oarbank {\n}\n"
    def commit_beside(pid):
        time.sleep(0.4)
        r = subprocess.run(["nsenter", "-t", str(pid), "-U", "-n", "--preserve-credentials", "nft", "add", "table",
                            "ip", "beside"], capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, r.stderr
    answers, code, err = _netfilter_session(
        b"apply %d\n" % len(ruleset) + ruleset,
        wrap=("strace", "-o", "/dev/null", "-e", "trace=sendmsg", "-e", "inject=sendmsg:delay_exit=1000000"),
        during=commit_beside)
    assert code == 1 and answers == b"ok 0\n", "tap0 made, the install unanswered: " + repr((code, answers, err))
    assert len(err.strip().splitlines()) == 1 and re.search(
        r"install the ruleset: the nftables generation went from (\d+) to (\d+) across it: another change was "
        r"committed with it", err), err


def _children(pid):
    out = []
    for d in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append((int(d.name), (d / "comm").read_text().strip()))
        except (OSError, IndexError, ValueError):
            continue
    return out


def _alive(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_agent_killed_mid_job_leaves_no_helper_and_no_stack(world):
    """SIGKILL to the agent while its egress-any job runs: the nftables
    helper (waiting on its request socket for the drop counters) and the
    stack (on its exit fd) end by themselves, within 5 s. This process is a
    subreaper meanwhile, as systemd is for an agent, so their ends are seen."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    ready = world["work"] / "work" / "killed_ready"
    agent = None
    before = {pid for pid, _ in _children(os.getpid())}  # the world's servers
    try:
        agent = subprocess.Popen(in_up([AGENT, "run", "--unproven", "--egress-test-public-range", PUBLIC_RANGE,
                                        str(world["policy"]), "--", "/bin/sh", "-c", f"echo > {ready}; exec sleep 60"],
                                       0))
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready.exists(), "the job never ran"
        parts = [(pid, comm) for pid, comm in _children(agent.pid) if comm in ("oarbank-netfilt", "slirp4netns")]
        assert sorted(comm for _, comm in parts) == ["oarbank-netfilt", "slirp4netns"], _children(agent.pid)
        agent.kill()
        agent.wait()
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid, _ in parts) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not [comm for pid, comm in parts if _alive(pid)], "outlived the agent"
    finally:
        if agent and agent.poll() is None:
            agent.kill()
            agent.wait()
        libc.prctl(36, 0, 0, 0, 0)
        deadline = time.monotonic() + 10  # the orphans of the job end with their keeper: reaped here
        while time.monotonic() < deadline:
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                break
            if {pid for pid, _ in _children(os.getpid())} <= before:
                break
            time.sleep(0.02)
