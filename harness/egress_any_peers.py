"""TCP and UDP peers for the egress-any tests (harness/test_egress_any.py),
run inside the network namespaces they create: the "public" servers, and
the decoys nothing may reach. Every TCP accept and every UDP datagram is a
JSON line in LOG, so a test proves at the receiving end what arrived:
  {"event": "tcp", "local": "198.19.7.2:443", "peer": "198.18.7.1:40000"}
  {"event": "udp", "local": "[fd77::2]:443", "peer": "..."}
A TCP peer sends "HELLO <local>\\n" and closes; a UDP peer answers each
datagram with "UDP <local>".

Usage: egress_any_peers.py LOG ADDR|PORT ...   (IPv6 addresses bare)
Prints {"ready": N} once every socket listens. Standard library only.
"""
import json
import socket
import sys
import threading

lock = threading.Lock()


def fmt(addr):
    return f"[{addr[0]}]:{addr[1]}" if ":" in addr[0] else f"{addr[0]}:{addr[1]}"


def log(f, event):
    with lock:
        f.write(json.dumps(event) + "\n")
        f.flush()


def tcp(f, s, local):
    while True:
        conn, peer = s.accept()
        log(f, {"event": "tcp", "local": local, "peer": fmt(peer)})
        try:
            conn.sendall(f"HELLO {local}\n".encode())
        except OSError:
            pass
        conn.close()


def udp(f, s, local):
    while True:
        data, peer = s.recvfrom(65536)
        log(f, {"event": "udp", "local": local, "peer": fmt(peer)})
        try:
            s.sendto(f"UDP {local}".encode(), peer)
        except OSError:
            pass


def main():
    f = open(sys.argv[1], "a")
    threads = []
    for spec in sys.argv[2:]:
        addr, port = spec.rsplit("|", 1)
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        local = fmt((addr, int(port)))
        for kind, serve in ((socket.SOCK_STREAM, tcp), (socket.SOCK_DGRAM, udp)):
            s = socket.socket(family, kind)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((addr, int(port)))
            if kind == socket.SOCK_STREAM:
                s.listen(64)
            t = threading.Thread(target=serve, args=(f, s, local), daemon=True)
            t.start()
            threads.append(t)
    print(json.dumps({"ready": len(threads)}), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
