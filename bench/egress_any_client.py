"""The measuring side of bench/egress_any.sh: run once directly in the
supervisor's network namespace and once as an egress-any job, against the
same servers. Prints one JSON line.

Usage: egress_any_client.py ADDR COUNTED_PORT BANNER_PORT BYTES SAMPLES
"""
import json
import socket
import statistics
import sys
import time

addr, counted, banner, total, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def transfer():
    s = socket.create_connection((addr, counted), timeout=60)
    chunk = b"\0" * (1 << 20)
    t = time.perf_counter()
    s.sendall(f"{total}\n".encode())
    left = total
    while left > 0:
        n = min(left, len(chunk))
        s.sendall(chunk[:n])
        left -= n
    answer = s.makefile().readline().strip()
    seconds = time.perf_counter() - t
    s.close()
    assert int(answer) == total, answer
    return total / seconds / (1 << 20)


def first_byte():
    t = time.perf_counter()
    s = socket.create_connection((addr, banner), timeout=10)
    s.recv(1)
    seconds = time.perf_counter() - t
    s.close()
    return seconds * 1000


deadline = time.monotonic() + 120  # every loop bounded in count and time
mibs = max(transfer() for _ in range(3))
latencies = []
for _ in range(samples):
    if time.monotonic() > deadline:
        break
    latencies.append(first_byte())
print(json.dumps({"mib_per_s": round(mibs, 1), "connect_ms_median": round(statistics.median(latencies), 3),
                  "samples": len(latencies)}))
