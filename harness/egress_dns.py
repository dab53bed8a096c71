"""A small authoritative DNS server over UDP for the egress tests and bench
(harness/test_egress.py, bench/egress_bench.py), run in the network
namespace they create. Standard library only.

Usage: egress_dns.py LOG ZONE.json ADDR [PORT]
ZONE.json maps a name (lower case, no trailing dot) to
  {"a": ["198.19.7.2", ...], "aaaa": ["..."], "delay": SECONDS}
A name in the zone gets its A or AAAA records (none: an empty NOERROR
answer), after `delay` seconds if set (each delayed answer on a timer of
its own, so a slow name never holds another); any other name is NXDOMAIN.
Every query and every answer is a JSON line in LOG:
  {"event": "query", "name": "a.test", "type": "A", "t": 1.0}
  {"event": "answer", "name": "a.test", "type": "A", "rcode": 0, "t": 1.1}
Prints {"ready": "ADDR:PORT"} once it listens.
"""
import json
import socket
import struct
import sys
import threading
import time

TYPES = {1: "A", 28: "AAAA"}
lock = threading.Lock()


def log(f, event):
    event["t"] = time.time()
    with lock:
        f.write(json.dumps(event) + "\n")
        f.flush()


def parse_question(data):
    (qid, flags, qd, _an, _ns, _ar) = struct.unpack("!HHHHHH", data[:12])
    pos, labels = 12, []
    while True:
        n = data[pos]
        if n == 0:
            pos += 1
            break
        if n & 0xC0:
            raise ValueError("compressed question")
        labels.append(data[pos + 1:pos + 1 + n].decode("ascii", "replace"))
        pos += 1 + n
    qtype, qclass = struct.unpack("!HH", data[pos:pos + 4])
    return qid, flags, ".".join(labels).lower(), qtype, qclass, data[12:pos + 4]


def answer(qid, flags, question, qtype, records, rcode):
    rd = flags & 0x0100
    head = struct.pack("!HHHHHH", qid, 0x8400 | rd | rcode, 1, len(records), 0, 0)
    body = b""
    for rdata in records:
        body += struct.pack("!HHHIH", 0xC00C, qtype, 1, 30, len(rdata)) + rdata
    return head + question + body


def main():
    log_file = open(sys.argv[1], "a")
    zone = json.load(open(sys.argv[2]))
    addr, port = sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 53
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    print(json.dumps({"ready": f"{addr}:{port}"}), flush=True)
    while True:
        data, peer = s.recvfrom(4096)
        try:
            qid, flags, name, qtype, _qclass, question = parse_question(data)
        except (ValueError, IndexError, struct.error):
            continue
        tname = TYPES.get(qtype, str(qtype))
        log(log_file, {"event": "query", "name": name, "type": tname})
        entry = zone.get(name)
        if entry is None:
            records, rcode = [], 3
        else:
            rcode = 0
            if qtype == 1:
                records = [socket.inet_pton(socket.AF_INET, a) for a in entry.get("a", [])]
            elif qtype == 28:
                records = [socket.inet_pton(socket.AF_INET6, a) for a in entry.get("aaaa", [])]
            else:
                records = []
        reply = answer(qid, flags, question, qtype, records, rcode)

        def send(reply=reply, peer=peer, name=name, tname=tname, rcode=rcode):
            s.sendto(reply, peer)
            log(log_file, {"event": "answer", "name": name, "type": tname, "rcode": rcode})

        delay = (entry or {}).get("delay", 0)
        if delay:
            threading.Timer(delay, send).start()
        else:
            send()


if __name__ == "__main__":
    main()
