"""Upstream servers for the egress tests (harness/test_egress.py), run inside
a network namespace the tests create (or on the host's loopback, as the
"private" server nothing may reach). Every connection is written to the log
as JSON lines, so a test can prove at the receiving end what arrived:
  {"event": "accept", "local": "198.19.7.2:443", "peer": "198.19.7.1:40000"}
  {"event": "close", "local": ..., "peer": ..., "data": "<bytes received, latin-1>"}

Usage: egress_upstream.py LOG ADDR|PORT|KIND ...
KIND banner: sends "BANNER <local>\\n", then echoes what it receives (a
stand-in for a TLS server behind CONNECT). KIND http: reads one request
head, answers "200 OK" with "HTTP-OK <local> <request line> host=<Host>".
KIND sink: counts bytes and answers their number when the client half-closes.
KIND counted: reads a line "N", then N bytes, and answers their number
without waiting for a half-close, which not every proxy passes on (the
benchmark's transfer). Prints {"ready": [...]} once every socket listens.
"""
import json
import socket
import sys
import threading

lock = threading.Lock()
log_file = None


def log(event):
    with lock:
        log_file.write(json.dumps(event) + "\n")
        log_file.flush()


def fmt(addr):
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def serve(conn, kind, local):
    peer = fmt(conn.getpeername())
    log({"event": "accept", "local": local, "peer": peer})
    data = bytearray()
    conn.settimeout(30)
    try:
        if kind == "banner":
            conn.sendall(f"BANNER {local}\n".encode())
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                if len(data) < 65536:
                    data += chunk[: 65536 - len(data)]
                conn.sendall(chunk)
        elif kind == "http":
            while b"\r\n\r\n" not in data and len(data) < 65536:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
            lines = head.split("\r\n")
            host = next((l.split(":", 1)[1].strip() for l in lines[1:] if l.lower().startswith("host:")), "")
            body = f"HTTP-OK {local} {lines[0]} host={host}\n".encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            conn.settimeout(0.5)
            try:  # whatever else the client (or the proxy) sends is recorded too
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
        elif kind == "counted":
            line = b""
            while not line.endswith(b"\n"):
                chunk = conn.recv(1)
                if not chunk:
                    break
                line += chunk
            want, total = int(line or b"0"), 0
            while total < want:
                n = len(conn.recv(min(1 << 20, want - total)))
                if n == 0:
                    break
                total += n
            conn.sendall(f"{total}\n".encode())
            data = f"<{total} bytes>".encode()
        elif kind == "sink":
            total = 0
            while True:
                n = len(conn.recv(1 << 20))
                if n == 0:
                    break
                total += n
            conn.sendall(f"{total}\n".encode())
            data = f"<{total} bytes>".encode()
    except OSError:
        pass
    finally:
        conn.close()
        log({"event": "close", "local": local, "peer": peer, "data": data.decode("latin-1")})


def listen(spec):
    addr, port, kind = spec.split("|")
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, int(port)))
    s.listen(512)
    local = fmt(s.getsockname())

    def loop():
        while True:
            conn, _ = s.accept()
            threading.Thread(target=serve, args=(conn, kind, local), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return local


def main():
    global log_file
    log_file = open(sys.argv[1], "a")
    ready = [listen(spec) for spec in sys.argv[2:]]
    print(json.dumps({"ready": ready}), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
