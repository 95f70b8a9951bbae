#!/usr/bin/env bash
# two_nodes_test.sh BUILD_DIR: `ampgrad-run --nnodes 2` across two "hosts" made on this machine:
# two network namespaces joined by a veth pair (10.77.x.1 and 10.77.x.2). Each runs
# `ampgrad-run --nnodes 2 --node-rank K --nproc-per-node 2 --master-addr <first host>` on
# dist_worker's collectives scenario (4 ranks, every collective and dtype). GLOO_SOCKET_IFNAME
# tells Gloo which interface to use in each namespace. Skipped (exit 77) where namespaces cannot
# be made (not root, or no CAP_SYS_ADMIN in a container).
set -uo pipefail
build="$1"
tag="ag$$"
ns_a="${tag}a" ns_b="${tag}b" if_a="${tag}va" if_b="${tag}vb"
net="10.77.$(( $$ % 250 ))"
cleanup() { ip netns del "$ns_a" 2>/dev/null; ip netns del "$ns_b" 2>/dev/null; }
trap cleanup EXIT
if ! ip netns add "$ns_a" 2>/dev/null; then echo "two-node test skipped: cannot create a network namespace"; exit 77; fi
set -e
ip netns add "$ns_b"
ip link add "$if_a" type veth peer name "$if_b"
ip link set "$if_a" netns "$ns_a"
ip link set "$if_b" netns "$ns_b"
ip -n "$ns_a" addr add "$net.1/24" dev "$if_a"
ip -n "$ns_b" addr add "$net.2/24" dev "$if_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$if_a" up
ip -n "$ns_b" link set "$if_b" up
set +e

run_node() {   # run_node NAMESPACE IFACE NODE_RANK
    GLOO_SOCKET_IFNAME="$2" OMP_NUM_THREADS=1 timeout 60 ip netns exec "$1" "$build/tools/ampgrad-run" \
        --nnodes 2 --node-rank "$3" --nproc-per-node 2 --master-addr "$net.1" --master-port 29513 \
        "$build/tests/dist_worker" collectives
}
run_node "$ns_a" "$if_a" 0 > "$build/two_nodes_a.log" 2>&1 &
pid_a=$!
run_node "$ns_b" "$if_b" 1 > "$build/two_nodes_b.log" 2>&1
rc_b=$?
wait "$pid_a"
rc_a=$?
echo "node 0 (ranks 0,1) exit $rc_a; node 1 (ranks 2,3) exit $rc_b"
if [ "$rc_a" -ne 0 ] || [ "$rc_b" -ne 0 ]; then
    cat "$build/two_nodes_a.log" "$build/two_nodes_b.log"
    exit 1
fi
echo "two-node run over a veth pair: OK"
