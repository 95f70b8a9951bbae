# netns_hosts.sh: sourced by two_nodes_test.sh and three_nodes_test.sh. It makes N "hosts" on this
# machine: N network namespaces, each with one veth whose peer sits on a bridge in a namespace of its
# own (a switch), on a private /24 that no interface or route here uses; host i (0-based) has the
# address $net.(i+1). Nothing changes in this machine's own namespace, and every namespace is removed
# on exit, pass or fail. Where namespaces cannot be made (not root, no CAP_SYS_ADMIN in a container)
# the calling script is skipped (exit 77).
#
# After `make_hosts N WHAT`: hosts=(ns0 ns1 ...), net, work (a temporary folder), port, failures, and
# the helpers below: node, fail, show, restart_flags, wait_for_checkpoint, kill_in_host.

unset GLOO_SOCKET_IFNAME AMPGRAD_SOCKET_IFNAME MASTER_ADDR MASTER_PORT WORLD_SIZE RANK
tag="ag$$"
hosts=()
switch_ns="${tag}sw"
failures=0
# Master ports in [12000, 20000) and rendezvous ports 10000 above them, both below the namespaces' own
# ephemeral range (32768-60999), where Gloo's pairs and every outgoing connection take their ports: a
# port from that range could be held by a live pair of an earlier round when the launcher listens on it
# ("Address already in use", seen once in the --nnodes 1:2 scenario, 2026-12-07). Each scenario takes
# the next port; the namespaces are fresh, so nothing else on this machine competes for them.
port=$(( 12000 + $$ % 8000 ))

cleanup_hosts() {
    for ns in "${hosts[@]}" "$switch_ns"; do ip netns del "$ns" 2>/dev/null; done
    [ -n "${work:-}" ] && rm -rf "$work"
}

# A private /24 that no interface or route on this machine uses.
pick_net() {
    local used
    used="$(ip -4 addr show; ip -4 route show)"
    for i in $(seq 0 40); do
        local net="10.$(( 200 + (i + $$) % 50 )).$(( ($$ / 7 + i) % 250 ))"
        if ! grep -q "$net\." <<< "$used"; then echo "$net"; return; fi
    done
    echo "10.254.254"
}

# make_hosts N WHAT: N hosts on one bridge (WHAT names the test in the skip message).
make_hosts() {
    local count=$1 what=$2
    net="$(pick_net)"
    trap cleanup_hosts EXIT
    if ! ip netns add "$switch_ns" 2>/dev/null; then
        echo "$what skipped: cannot create a network namespace (needs root / CAP_SYS_ADMIN)"
        exit 77
    fi
    work="$(mktemp -d "${TMPDIR:-/tmp}/ampgrad_${count}_hosts.XXXXXX")"
    set -e
    ip -n "$switch_ns" link add "${tag}br" type bridge
    ip -n "$switch_ns" link set "${tag}br" up
    for i in $(seq 0 $((count - 1))); do
        local ns="${tag}h$i" host_if="${tag}v$i" switch_if="${tag}p$i"
        hosts+=("$ns")
        ip netns add "$ns"
        ip link add "$host_if" type veth peer name "$switch_if"
        ip link set "$host_if" netns "$ns"
        ip link set "$switch_if" netns "$switch_ns"
        ip -n "$switch_ns" link set "$switch_if" master "${tag}br"
        ip -n "$switch_ns" link set "$switch_if" up
        ip -n "$ns" addr add "$net.$((i + 1))/24" dev "$host_if"
        ip -n "$ns" link set lo up
        ip -n "$ns" link set "$host_if" up
    done
    set +e
    echo "hosts: ${hosts[*]} ($net.1 to $net.$count, one bridge); work in $work"
}

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
show() { for f in "$@"; do echo "---- $f"; tail -n 30 "$f"; done; }

# node NS NODE_RANK NPROC LOG [ENV=VALUE...] -- PROG ARGS...: one launcher on host NS, as node NODE_RANK
# of ${#hosts[@]} (--nnodes in ARGS overrides that), the master on the first host.
node() {
    local ns=$1 rank=$2 nproc=$3 log=$4
    shift 4
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    timeout 60 ip netns exec "$ns" env OMP_NUM_THREADS=1 "${envs[@]}" "$run" --nnodes "${#hosts[@]}" --node-rank "$rank" \
        --nproc-per-node "$nproc" --master-addr "$net.1" --master-port "$port" "$@" > "$log" 2>&1
}

# restart_flags: the launcher's flags for a self-restarting run (its store beside the master port).
restart_flags() { echo --max-restarts 2 --monitor-interval 0.2 --rdzv-timeout 3 --rdzv-port $((port + 10000)); }

# wait_for_checkpoint DIR STEP: until DIR's latest names step STEP or a later one.
wait_for_checkpoint() {
    local name
    for _ in $(seq 1 1500); do
        name="$(cat "$1/checkpoints/latest" 2>/dev/null)"
        [ -n "$name" ] && [ $((10#${name#step-})) -ge "$2" ] && return 0
        sleep 0.02
    done
    return 1
}

# kill_in_host NS [COMM]: SIGKILL every process in host NS (only those named COMM, when given).
kill_in_host() {
    for pid in $(ip netns pids "$1"); do
        if [ -z "${2:-}" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; then kill -KILL "$pid" 2>/dev/null; fi
    done
}
