#!/bin/sh
# /oarbank/workloads/run in a kernel-matrix guest whose row asks for
# workloads (scripts/initramfs-workloads.sh packs it): the everyday
# programs that need unix sockets of the job's own, each run in
#   oarbank-agent cage --worktree WT --writable --scratch S
# as root and as uid 65534, judged by what it prints; and one job's socket
# in a scratch two jobs share, which a process outside every cage reaches
# and the other job must not (Landlock answers only the sockets a domain
# bound itself). Writes one JSON object to $1: {"root": {...}, "nobody":
# {...}}, each member true when the workload printed what it must. Never
# run on a host.
out="$1"
O=/oarbank
W=/run/oarbank-workloads
MANAGER='from multiprocessing import Manager
m = Manager(); d = m.dict(); d["k"] = 7; print("manager", d["k"]); m.shutdown()'
FORKSERVER='import multiprocessing as mp
def square(x): return x * x
if __name__ == "__main__":
    mp.set_start_method("forkserver")
    with mp.Pool(2) as p: print("forkserver", sum(p.map(square, range(4))))'
# One job's server: takes one connection (the bare client's), or gives up.
PEER_SERVER='import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); s.settimeout(30)
c, _ = s.accept(); c.sendall(b"peer\n"); c.close()'
PEER_CLIENT='import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("connected", s.recv(16).decode().strip())
except OSError as e:
    print("refused", errno.errorcode.get(e.errno, e.errno))'
TMUX='tmux new-session -d -s oarbank "sleep 3" && tmux list-sessions -F "tmux #{session_name}" && tmux kill-server'

one() {  # USER: the three workloads as USER, one JSON object
  user="$1"
  base="$W/$user"
  mkdir -p "$base/wt" "$base/scratch"
  [ "$user" = nobody ] && chown -R 65534:65534 "$base"
  printf '%s\n' "$MANAGER" >"$base/wt/manager.py"
  printf '%s\n' "$FORKSERVER" >"$base/wt/forkserver.py"
  printf '%s\n' "$TMUX" >"$base/wt/tmux.sh"
  printf '%s\n' "$PEER_SERVER" >"$base/wt/peer_server.py"
  printf '%s\n' "$PEER_CLIENT" >"$base/wt/peer_client.py"
  # Every argument is a plain word, so su's one command line keeps it whole.
  as() {
    if [ "$user" = root ]; then "$@"; else su -s /bin/sh nobody -c "$*"; fi
  }
  cage="$O/sandbox/oarbank-agent cage --unproven --timeout 60 --worktree $base/wt --writable --scratch $base/scratch"
  as $cage -- /usr/bin/python3 -I "$base/wt/manager.py" >"$base/manager.out" 2>&1
  as $cage -- /usr/bin/python3 -I "$base/wt/forkserver.py" >"$base/forkserver.out" 2>&1
  # tmux runs a session's command with $SHELL (nobody's login shell is /bin/false).
  as $cage --env TMUX_TMPDIR=$base/scratch --env TERM=dumb --env SHELL=/bin/sh -- /bin/sh "$base/wt/tmux.sh" \
    >"$base/tmux.out" 2>&1
  # Another job's socket: one cage serves in the scratch, the other shares
  # that scratch and tries it, then a bare client proves it was there.
  sock="$base/scratch/peer.sock"
  as $cage -- /usr/bin/python3 -I "$base/wt/peer_server.py" "$sock" >"$base/peer_server.out" 2>&1 &
  server=$!
  i=0
  while [ ! -S "$sock" ] && [ $i -lt 30 ]; do sleep 1; i=$((i + 1)); done
  as $cage -- /usr/bin/python3 -I "$base/wt/peer_client.py" "$sock" >"$base/peer_cage.out" 2>&1
  as /usr/bin/python3 -I "$base/wt/peer_client.py" "$sock" >"$base/peer_bare.out" 2>&1
  wait $server
  m=false f=false t=false o=false
  grep -qx 'manager 7' "$base/manager.out" && m=true
  grep -qx 'forkserver 14' "$base/forkserver.out" && f=true
  grep -qx 'tmux oarbank' "$base/tmux.out" && t=true
  grep -qx 'refused EACCES' "$base/peer_cage.out" && grep -qx 'connected peer' "$base/peer_bare.out" && o=true
  printf '{"python_manager": %s, "python_forkserver": %s, "tmux": %s, "other_jobs_socket_refused": %s}' \
    "$m" "$f" "$t" "$o"
}
{
  printf '{"root": %s, ' "$(one root)"
  printf '"nobody": %s}\n' "$(one nobody)"
} >"$out"
for f in "$W"/*/*.out; do echo "== $f"; tail -5 "$f"; done >"${out%.json}.log" 2>&1
