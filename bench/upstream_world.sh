# Sourced by the egress-any benchmarks (bench/egress_any.sh, bench/stacks.sh):
# two network namespaces, `up` (where the agent or the stack runs) and `pub`
# (the public side), joined by a veth pair, with a counting and a banner
# server of harness/egress_upstream.py on 198.19.<N>.2 in `pub`, ports 5001
# and 5002. Addresses in 198.18.0.0/15 only. The caller names them and
# removes them (upstream_world_remove) on exit.
#
#   upstream_world_make UP PUB N WORKDIR   sets upstream_server_pid
upstream_world_make() {
  local up=$1 pub=$2 n=$3 work=$4
  ip netns add "$up"
  ip netns add "$pub"
  ip link add "ow$n-$$" netns "$up" type veth peer name "op$n-$$" netns "$pub"
  ip -n "$up" addr add "198.18.$n.1/24" dev "ow$n-$$"
  ip -n "$pub" addr add "198.18.$n.2/24" dev "op$n-$$"
  ip -n "$pub" addr add "198.19.$n.2/32" dev lo
  for ns in "$up" "$pub"; do ip -n "$ns" link set lo up; done
  ip -n "$up" link set "ow$n-$$" up
  ip -n "$pub" link set "op$n-$$" up
  ip -n "$up" route add default via "198.18.$n.2"
  ip netns exec "$pub" python3 harness/egress_upstream.py "$work/server.log" \
    "198.19.$n.2|5001|counted" "198.19.$n.2|5002|banner" >"$work/ready" &
  upstream_server_pid=$!
  for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.05; done
}

upstream_world_remove() {
  local up=$1 pub=$2
  if [ -n "${upstream_server_pid:-}" ]; then
    kill "$upstream_server_pid" 2>/dev/null || true
    wait "$upstream_server_pid" 2>/dev/null || true
  fi
  ip netns del "$up" 2>/dev/null || true
  ip netns del "$pub" 2>/dev/null || true
}
