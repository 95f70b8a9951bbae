#!/usr/bin/env bash
# two_nodes_test.sh BUILD_DIR: ampgrad across two "hosts" made on this machine: two network
# namespaces on one bridge (netns_hosts.sh, shared with three_nodes_test.sh). Each
# host runs its own ampgrad-run (--nnodes 2, --master-addr the first host), with no
# GLOO_SOCKET_IFNAME: each rank finds its address by itself (dist/socket_address.hpp). It checks
#   - every collective in every dtype (dist_worker collectives, 2 ranks per host);
#   - `ampgrad train`, data parallel and --zero 1/2/3, one rank per host: the same metrics (losses,
#     evals) as 2 ranks on one host;
#   - data parallel --until 3, then --resume across hosts: the same losses as 6 steps straight;
#   - a rank SIGKILLed on the second host: the first host's launcher fails naming rank 1 and its
#     address, well within the group's 60 s timeout;
#   - both hosts advertising 127.0.0.1 (GLOO_SOCKET_IFNAME=lo, the issue's cloud-image case): the
#     rank whose connect is refused fails and the other stops at once, naming it (fail-fast start-up);
#   - a wrong --master-addr, and a master port already in use: their errors, within the timeout;
#   - ZeRO checkpoints into a folder per host: without --ckpt-node-local, the shared-disk error; with
#     it, each host holds its rank's file, the manifest and `latest`, and --until 3 + --resume equals
#     6 steps straight; one process cannot resume it (naming the missing file) until the files are
#     copied into one folder;
#   - a hang with every process alive (issue 36): rank 1, on the second host, skips one all_reduce;
#     both ranks write their flight recorder, and `ampgrad fr` names rank 1 and collective #2;
#   - SIGKILL of rank 0 in the middle of a --ckpt-async background save: `latest` still names the
#     previous checkpoint, which loads;
#   - ampgrad-run --max-restarts 2 (issue 36): rank 1 SIGKILLed on the second host mid-run; both
#     launchers restart their ranks, `train --resume auto` continues, and the final weights equal an
#     uninterrupted run's bit for bit (`ampgrad verify`);
#   - --nnodes 1:2 with the second host gone for good: the first host finishes alone at world size 1
#     with the same tokens per step.
# Traffic stays inside the namespaces; they are removed on exit, pass or fail. Skipped (exit 77)
# where namespaces cannot be made (not root, or no CAP_SYS_ADMIN in a container).
set -uo pipefail
build="$(cd "$1" && pwd)"
run="$build/tools/ampgrad-run" ampgrad="$build/app/ampgrad" worker="$build/tests/dist_worker"
source "$(dirname "$0")/netns_hosts.sh"   # make_hosts, node, fail, show, restart_flags, wait_for_checkpoint
make_hosts 2 "two-node test"
ns_a="${hosts[0]}" ns_b="${hosts[1]}"

# two_hosts NAME NPROC [ENV...] -- PROG ARGS...: node 0 on the first host, node 1 on the second; rc_a, rc_b.
two_hosts() {
    local name=$1 nproc=$2
    shift 2
    port=$((port + 1))
    node "$ns_a" 0 "$nproc" "$work/$name.a.log" "$@" &
    local pid_a=$!
    node "$ns_b" 1 "$nproc" "$work/$name.b.log" "$@"
    rc_b=$?
    wait "$pid_a"
    rc_a=$?
}

# one_host NAME PROG ARGS...: 2 ranks on the first host alone, over its loopback.
one_host() {
    local name=$1
    shift
    port=$((port + 1))
    timeout 60 ip netns exec "$ns_a" env OMP_NUM_THREADS=1 "$run" --nproc-per-node 2 --master-port "$port" "$@" \
        > "$work/$name.log" 2>&1
}

# same_metrics A B: the two metrics.jsonl files have the same steps, losses and evaluations.
same_metrics() {
    python3 - "$1" "$2" <<'PY'
import json, sys
def records(path):
    keys = ("kind", "step", "loss", "train_loss", "val_loss", "grad_norm")
    return [tuple(json.loads(line).get(k) for k in keys) for line in open(path)]
a, b = records(sys.argv[1]), records(sys.argv[2])
if not a or a != b:
    print("metrics differ:\n  " + "\n  ".join(map(str, a)) + "\nvs\n  " + "\n  ".join(map(str, b)))
    sys.exit(1)
PY
}

train_args=(train --n-layer 1 --n-embd 32 --n-head 2 --block-size 16 --batch-size 4 --steps 6 --warmup 2
            --eval-every 3 --eval-iters 1 --sample-tokens 0 --dropout 0.1 --progress plain --log-every 1)

# ---- every collective, 2 ranks per host
two_hosts collectives 2 -- "$worker" collectives
[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] || { fail "collectives across hosts (exit $rc_a, $rc_b)"; show "$work"/collectives.*.log; }

# ---- ampgrad train: data parallel and ZeRO 1/2/3, across hosts and on one host
for mode in ddp zero1 zero2 zero3; do
    extra=()
    [ "$mode" != ddp ] && extra=(--zero "${mode#zero}")
    two_hosts "$mode" 1 -- "$ampgrad" "${train_args[@]}" "${extra[@]}" --out "$work/$mode.hosts"
    if [ "$rc_a" -ne 0 ] || [ "$rc_b" -ne 0 ]; then
        fail "$mode across hosts (exit $rc_a, $rc_b)"; show "$work/$mode".*.log; continue
    fi
    one_host "$mode.one" "$ampgrad" "${train_args[@]}" "${extra[@]}" --out "$work/$mode.one"
    [ $? -eq 0 ] || { fail "$mode on one host"; show "$work/$mode.one.log"; continue; }
    same_metrics "$work/$mode.hosts/metrics.jsonl" "$work/$mode.one/metrics.jsonl" ||
        fail "$mode: two hosts and one host disagree"
    [ -e "$work/$mode.one/metrics.jsonl" ] && echo "$mode: two hosts = one host ($(grep -c '"train"' "$work/$mode.hosts/metrics.jsonl") steps)"
done
grep -q "2 ranks, batch 4" "$work/ddp.a.log" || fail "ddp: the progress line does not show 2 ranks and batch 4"

# ---- data parallel: --until 3, then --resume on both hosts
two_hosts resume1 1 -- "$ampgrad" "${train_args[@]}" --until 3 --out "$work/resumed"
two_hosts resume2 1 -- "$ampgrad" "${train_args[@]}" --resume "$work/resumed" --out "$work/resumed"
if [ "$rc_a" -ne 0 ] || [ "$rc_b" -ne 0 ]; then
    fail "resume across hosts (exit $rc_a, $rc_b)"; show "$work"/resume*.log
elif same_metrics "$work/resumed/metrics.jsonl" "$work/ddp.hosts/metrics.jsonl"; then
    echo "resume across hosts: 3 + 3 steps = 6 steps straight"
else
    fail "resume across hosts: metrics differ from the straight run"
fi

# ---- ZeRO checkpoints with each host writing under its own folder (no shared disk)
# split_hosts LOG DIR ARGS...: like two_hosts, where @DIR@ in ARGS is $work/DIR.a on the first host, $work/DIR.b on the second.
split_hosts() {
    local log=$1 dir=$2
    shift 2
    port=$((port + 1))
    node "$ns_a" 0 1 "$work/$log.a.log" -- "$ampgrad" "${@//@DIR@/$work/$dir.a}" &
    local pid_a=$!
    node "$ns_b" 1 1 "$work/$log.b.log" -- "$ampgrad" "${@//@DIR@/$work/$dir.b}"
    rc_b=$?
    wait "$pid_a"
    rc_a=$?
}
split_hosts shared shared "${train_args[@]}" --zero 2 --until 3 --out @DIR@
if [ "$rc_a" -eq 0 ] || [ "$rc_b" -eq 0 ] || ! grep -q "must be on a disk that every host shares" "$work/shared.b.log"; then
    fail "ZeRO save into per-host folders without --ckpt-node-local: expected the shared-disk error (exit $rc_a, $rc_b)"
    show "$work"/shared.*.log
fi
split_hosts local1 local "${train_args[@]}" --zero 2 --ckpt-node-local --until 3 --out @DIR@
split_hosts local2 local "${train_args[@]}" --zero 2 --ckpt-node-local --resume @DIR@ --out @DIR@
step_b="$work/local.b/checkpoints/step-00000006"
if [ "$rc_a" -ne 0 ] || [ "$rc_b" -ne 0 ]; then
    fail "node-local ZeRO checkpoints: save and resume (exit $rc_a, $rc_b)"; show "$work"/local*.log
elif ! same_metrics "$work/local.a/metrics.jsonl" "$work/zero2.hosts/metrics.jsonl"; then
    fail "node-local ZeRO checkpoints: 3 + resume + 3 steps differ from 6 straight"
elif [ ! -e "$step_b/rank-00001-of-00002.safetensors" ] || [ -e "$step_b/rank-00000-of-00002.safetensors" ] ||
     [ ! -e "$step_b/manifest.json" ] || [ "$(cat "$work/local.b/checkpoints/latest")" != step-00000006 ]; then
    fail "node-local ZeRO checkpoints: the second host's folder should hold its rank's file, the manifest and latest"
    ls -la "$step_b"
else
    echo "node-local ZeRO checkpoints: saved per host, resumed = 6 steps straight"
    # Another world size needs every file in one folder: the error names the missing one, then a copy fixes it.
    ip netns exec "$ns_a" env OMP_NUM_THREADS=1 "$ampgrad" "${train_args[@]}" --zero 2 --resume "$work/local.a" \
        --out "$work/local.one" > "$work/reshard1.log" 2>&1
    rc=$?
    grep -q "missing here: rank-00001-of-00002.safetensors" "$work/reshard1.log" && [ "$rc" -ne 0 ] ||
        { fail "node-local checkpoint at another world size: expected the missing-file error (exit $rc)"; show "$work/reshard1.log"; }
    cp "$step_b/rank-00001-of-00002.safetensors" "$work/local.a/checkpoints/step-00000006/"
    ip netns exec "$ns_a" env OMP_NUM_THREADS=1 "$ampgrad" "${train_args[@]}" --zero 2 --resume "$work/local.a" \
        --out "$work/local.one" > "$work/reshard2.log" 2>&1 ||
        { fail "node-local checkpoint gathered into one folder: the resume at 1 rank failed"; show "$work/reshard2.log"; }
fi

# ---- a rank SIGKILLed on the second host during training
port=$((port + 1))
node "$ns_a" 0 1 "$work/kill.a.log" -- "$ampgrad" "${train_args[@]}" --steps 100000 --out "$work/kill" &
pid_a=$!
node "$ns_b" 1 1 "$work/kill.b.log" -- "$ampgrad" "${train_args[@]}" --steps 100000 --out "$work/kill" &
pid_b=$!
for _ in $(seq 1 300); do grep -q "step *5/" "$work/kill.a.log" 2>/dev/null && break; sleep 0.1; done
for pid in $(ip netns pids "$ns_b"); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = ampgrad ] && kill -KILL "$pid"
done
wait "$pid_a"; rc_a=$?
wait "$pid_b"; rc_b=$?
if [ "$rc_a" -eq 0 ] || [ "$rc_a" -eq 124 ] || ! grep -q "lost rank 1" "$work/kill.a.log" ||
   ! grep -q "$net.2" "$work/kill.a.log"; then
    fail "a rank killed on the second host: the first host exited $rc_a without naming rank 1 at $net.2"
    show "$work"/kill.*.log
else
    echo "killed rank: $(grep -m1 -o 'lost rank 1[^)]*)' "$work/kill.a.log")"
fi

# ---- both hosts advertise 127.0.0.1: one connect is refused, and the other rank stops at once
two_hosts loopback 1 GLOO_SOCKET_IFNAME=lo AMPGRAD_TEST_TIMEOUT_MS=60000 -- "$worker" init
if [ "$rc_a" -eq 0 ] || [ "$rc_b" -eq 0 ] || [ "$rc_a" -eq 124 ] || [ "$rc_b" -eq 124 ] ||
   ! grep -q "stopped because rank [01] on host .* failed" "$work"/loopback.*.log; then
    fail "hosts advertising 127.0.0.1: expected one refused connect and a fail-fast stop (exit $rc_a, $rc_b)"
    show "$work"/loopback.*.log
else
    echo "fail-fast start-up: $(cat "$work"/loopback.*.log | grep -m1 -o 'stopped because rank [01] on host [^:]*')"
fi

# ---- a wrong --master-addr: the second host cannot reach it
port=$((port + 1))
timeout 60 ip netns exec "$ns_b" env AMPGRAD_TEST_TIMEOUT_MS=2000 "$run" --nnodes 2 --node-rank 1 --master-addr "$net.9" \
    --master-port "$port" "$worker" init > "$work/wrong_addr.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || ! grep -q "cannot reach the master at $net.9:$port" "$work/wrong_addr.log"; then
    fail "wrong --master-addr (exit $rc)"; show "$work/wrong_addr.log"
fi

# ---- the master port already in use on the first host
port=$((port + 1))
ip netns exec "$ns_a" python3 -c "import socket, time; s = socket.socket(); s.bind(('$net.1', $port)); s.listen(); time.sleep(30)" &
holder=$!
sleep 0.5
timeout 60 ip netns exec "$ns_a" env AMPGRAD_TEST_TIMEOUT_MS=2000 "$run" --nnodes 2 --node-rank 0 --master-addr "$net.1" \
    --master-port "$port" "$worker" init > "$work/port_used.log" 2>&1
rc=$?
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
if [ "$rc" -eq 0 ] || ! grep -q "cannot listen on $net.1:$port.*Address already in use" "$work/port_used.log"; then
    fail "master port in use (exit $rc)"; show "$work/port_used.log"
fi

# ---- a skipped all_reduce (every process alive): the flight recorders name rank 1 and collective #2
two_hosts skip 1 AMPGRAD_TEST_TIMEOUT_MS=2000 AMPGRAD_FR_DIR="$work/fr" -- "$worker" skip_all_reduce
"$ampgrad" fr "$work/fr" > "$work/fr.log" 2>&1
if [ "$rc_a" -eq 0 ] || [ "$rc_a" -eq 124 ] || [ "$rc_b" -eq 124 ] ||
   ! grep -q "first disagreement at collective_seq_id 2: different call site" "$work/fr.log" ||
   ! grep -q "rank 1 is behind: its last collective is #3, the others reached #4" "$work/fr.log"; then
    fail "skipped all_reduce across hosts: ampgrad fr should name rank 1 and #2 (exit $rc_a, $rc_b)"
    show "$work"/skip.*.log "$work/fr.log"
else
    echo "skipped all_reduce: $(grep -m1 'is behind' "$work/fr.log" | sed 's/^ *//')"
fi

# ---- SIGKILL during a --ckpt-async background save on the first host: latest stays whole
port=$((port + 1))
node "$ns_a" 0 1 "$work/async.a.log" AMPGRAD_TEST_STOP_IN_SAVE=4 -- "$ampgrad" "${train_args[@]}" --ckpt-every 2 \
    --ckpt-async --out "$work/async" &
pid_a=$!
node "$ns_b" 1 1 "$work/async.b.log" -- "$ampgrad" "${train_args[@]}" --ckpt-every 2 --ckpt-async --out "$work/async.b" &
pid_b=$!
stopped=""
for _ in $(seq 1 300); do
    for pid in $(ip netns pids "$ns_a"); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = ampgrad ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = T ] &&
            stopped=$pid
    done
    [ -n "$stopped" ] && break
    sleep 0.1
done
[ -n "$stopped" ] && kill -KILL "$stopped"
wait "$pid_a"; wait "$pid_b"
if [ -z "$stopped" ] || [ "$(cat "$work/async/checkpoints/latest" 2>/dev/null)" != step-00000002 ] ||
   ! "$ampgrad" eval --ckpt "$work/async" > "$work/async.eval.log" 2>&1 || ! grep -q '"step":2' "$work/async.eval.log"; then
    fail "SIGKILL during an async save: latest should name the whole step-00000002 (stopped: ${stopped:-no})"
    show "$work"/async.*.log
else
    echo "SIGKILL during an async save: latest = $(cat "$work/async/checkpoints/latest"), loads"
fi

# ---- issue 36: self-restart and elastic size (wait_for_checkpoint and restart_flags: netns_hosts.sh).
restart_args=("${train_args[@]}" --steps 40 --ckpt-every 4 --resume auto)

# A rank SIGKILLed on the second host under --max-restarts 2: both launchers stop their ranks, meet
# again, and `train --resume auto` continues from the newest checkpoint; the final weights equal an
# uninterrupted run's bit for bit (`ampgrad verify`), and metrics.jsonl has the restart and its cause.
two_hosts restart_straight 1 -- $(restart_flags) "$ampgrad" "${restart_args[@]}" --out "$work/restart_straight"
[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] || { fail "uninterrupted run under --max-restarts (exit $rc_a, $rc_b)"; show "$work"/restart_straight.*.log; }
port=$((port + 1))
node "$ns_a" 0 1 "$work/restart.a.log" -- $(restart_flags) "$ampgrad" "${restart_args[@]}" --out "$work/restart" &
pid_a=$!
node "$ns_b" 1 1 "$work/restart.b.log" -- $(restart_flags) "$ampgrad" "${restart_args[@]}" --out "$work/restart" &
pid_b=$!
wait_for_checkpoint "$work/restart" 8
for pid in $(ip netns pids "$ns_b"); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = ampgrad ] && kill -KILL "$pid"
done
wait "$pid_a"; rc_a=$?
wait "$pid_b"; rc_b=$?
"$ampgrad" verify "$work/restart_straight" "$work/restart" > "$work/restart.verify.log" 2>&1
rc_v=$?
if [ "$rc_a" -ne 0 ] || [ "$rc_b" -ne 0 ] || [ "$rc_v" -ne 0 ] || ! grep -q "step 40: .* identical" "$work/restart.verify.log" ||
   ! grep '"kind":"restart"' "$work/restart/metrics.jsonl" | grep -q '"cause":"rank 1 (host 1) was killed by signal 9 at step'; then
    fail "a rank killed on the second host under --max-restarts 2: expected a restart and the straight run's weights (exit $rc_a, $rc_b, verify $rc_v)"
    show "$work"/restart.*.log "$work/restart/metrics.jsonl"
else
    echo "self-restart: $(grep -m1 -o 'round 1: [^;]*; restarting after: .*' "$work/restart.b.log"); final weights = uninterrupted run's"
fi

# --nnodes 1:2, and the second host gone for good (every process in its namespace SIGKILLed): after
# --rdzv-timeout the first host goes on alone at world size 1, from the newest checkpoint, with the
# same global batch (tokens per step), to the last step.
port=$((port + 1))
node "$ns_a" 0 1 "$work/shrink.a.log" -- $(restart_flags) --nnodes 1:2 "$ampgrad" "${restart_args[@]}" --out "$work/shrink" &
pid_a=$!
node "$ns_b" 1 1 "$work/shrink.b.log" -- $(restart_flags) --nnodes 1:2 "$ampgrad" "${restart_args[@]}" --out "$work/shrink" \
    2>/dev/null &   # (bash's "Killed" line for the host we take away)
pid_b=$!
wait_for_checkpoint "$work/shrink" 8
for pid in $(ip netns pids "$ns_b"); do kill -KILL "$pid" 2>/dev/null; done
wait "$pid_a"; rc_a=$?
wait "$pid_b" 2>/dev/null
batches="$(python3 -c "import json, sys; print(sorted({r['tokens_per_step'] for r in map(json.loads, open(sys.argv[1])) if r['kind'] == 'train'}), max(r['step'] for r in map(json.loads, open(sys.argv[1]))))" "$work/shrink/metrics.jsonl" 2>&1)"
if [ "$rc_a" -ne 0 ] || ! grep -q "round 1: 1 host(s), world size 1" "$work/shrink.a.log" || [ "$batches" != "[64] 40" ]; then
    fail "second host gone for good under --nnodes 1:2: expected the first host to finish alone with 64 tokens per step (exit $rc_a; tokens per step, last step: $batches)"
    show "$work"/shrink.*.log
else
    echo "elastic: $(grep -m1 -o 'round 1: 1 host(s), world size 1' "$work/shrink.a.log"): host 0 finished alone; tokens per step, last step: $batches"
fi

if [ "$failures" -gt 0 ]; then echo "two-host test: $failures failure(s)"; exit 1; fi
echo "two-host test over a bridge: OK"
