#!/usr/bin/env bash
# The main job: start the local 3-server ZooKeeper ensemble (zk-docker/ensemble.sh, no
# Docker needed), then run the demos against it:
#   1. the lock demo: workers on separate sessions increment a shared counter under the
#      mutex; the final count proves mutual exclusion;
#   2. the failover demo: three candidates elect a master, the master is killed (SIGKILL,
#      as in a crash) and a follower takes over once the dead master's session expires;
#   3. the command line: three shell loops increment one file, each step under
#      `zk-recipes lock`; the final count proves that no update was lost;
#   4. master/follower: three replicas join a group and an election; the master deals
#      6 partitions to the live members with a fenced write, each replica works on its
#      part; the master is killed and the new master deals them again;
#   5. partitioned workers: three replicas share 12 partitions through a Partitioner; a
#      fourth joins and takes its share (only the partitions the assignment moves are
#      handed over), one is killed (its partitions move once its session expired), one
#      leaves (its partitions move at once).
# The ensemble is stopped at the end unless KEEP_ENSEMBLE=1.
set -euo pipefail
cd "$(dirname "$0")/.."

export ZK_HOSTS="${ZK_HOSTS:-127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183}"
logs="$(mktemp -d)"
pids=()

cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "${KEEP_ENSEMBLE:-0}" != 1 ]; then bash zk-docker/ensemble.sh down; fi
    rm -rf "$logs"
}
trap cleanup EXIT

bash zk-docker/ensemble.sh up
cargo build --release --examples --quiet
cargo build --release -p zk-recipes-cli --quiet

echo
echo "=== 1. Mutex: 4 workers x 10 increments of one counter, each worker on its own session"
target/release/examples/lock 4 10

echo
echo "=== 2. Leader election: 3 candidates, kill the master, a follower takes over"
for id in node-a node-b node-c; do
    target/release/examples/leader_election "$id" >"$logs/$id.log" 2>&1 &
    pids+=("$!")
    echo "started $id (pid $!)"
done

# Prints the id (other than $1) of a candidate whose latest role line says MASTER.
master() {
    for id in node-a node-b node-c; do
        [ "$id" = "$1" ] && continue
        last=$(grep -E "role: " "$logs/$id.log" 2>/dev/null | tail -n 1 || true)
        case "$last" in *MASTER*) echo "$id"; return 0 ;; esac
    done
    return 1
}

await_master() { # $1: an id that must not be the answer; $2: seconds
    local deadline=$((SECONDS + $2))
    while [ $SECONDS -lt $deadline ]; do
        master "$1" && return 0
        sleep 0.1
    done
    return 1
}

first=$(await_master none 30) || { echo "no master elected"; tail -n 5 "$logs"/*.log; exit 1; }
echo "master: $first"
sleep 2
echo "--- $first's work so far:"
grep wrote "$logs/$first.log" | tail -n 3

index=0
for id in node-a node-b node-c; do [ "$id" = "$first" ] && break; index=$((index + 1)); done
killed_at=$(date +%s%3N)
kill -KILL "${pids[$index]}"
echo "--- killed $first with SIGKILL at $killed_at; its session expires after the 4 s session timeout"

second=$(await_master "$first" 30) || { echo "no follower took over"; tail -n 5 "$logs"/*.log; exit 1; }
took_over_at=$(grep "role: MASTER" "$logs/$second.log" | tail -n 1 | cut -d' ' -f1)
echo "new master: $second, took over $((took_over_at - killed_at)) ms after the kill"
sleep 2
echo "--- $second's work (counter restarts in the new term; a stale term's write would be refused):"
grep wrote "$logs/$second.log" | tail -n 3

echo "--- every candidate's log:"
for id in node-a node-b node-c; do sed "s/^/  /" "$logs/$id.log"; done
echo "failover demo done"

echo
echo "=== 3. Command line: 3 shell loops x 10 increments of one file, each under zk-recipes lock"
counter="$logs/counter"
echo 0 >"$counter"
increment='n=$(cat "$0"); sleep 0.01; echo $((n + 1)) >"$0"'
loops=()
for worker in 1 2 3; do
    (
        for _ in $(seq 10); do
            target/release/zk-recipes lock --hosts "$ZK_HOSTS" /zk-recipes-demo/file-lock \
                -- sh -c "$increment" "$counter" || exit 1
        done
    ) &
    loops+=("$!")
done
for pid in "${loops[@]}"; do wait "$pid"; done
echo "counter file: $(cat "$counter") (expected 30; without the lock, increments get lost)"
[ "$(cat "$counter")" = 30 ]
echo "command line demo done"

echo
echo "=== 4. Master/follower: 3 replicas share 6 partitions; kill the master, they are dealt again"
replicas=(replica-1 replica-2 replica-3)
for id in "${replicas[@]}"; do
    target/release/examples/master_follower "$id" 6 >"$logs/$id.log" 2>&1 &
    pids+=("$!")
    echo "started $id (pid $!)"
done

# Prints the id (other than $1) whose latest assignment deals to exactly $2 members.
dealt_to() {
    for id in "${replicas[@]}"; do
        [ "$id" = "$1" ] && continue
        n=$(awk '/ published v/ { n = NF - 5 } END { print n + 0 }' "$logs/$id.log" 2>/dev/null)
        [ "$n" = "$2" ] && { echo "$id"; return 0; }
    done
    return 1
}

await_dealt() { # $1: an id that must not be the answer; $2: members; $3: seconds
    local deadline=$((SECONDS + $3))
    while [ $SECONDS -lt $deadline ]; do
        dealt_to "$1" "$2" && return 0
        sleep 0.1
    done
    return 1
}

master=$(await_dealt none 3 30) || { echo "no assignment to 3 members"; tail -n 5 "$logs"/replica-*.log; exit 1; }
echo "master: $master; the assignment and who works on what:"
grep -h -E "published|working on" "$logs"/replica-*.log | sed "s/^/  /"
echo "--- the group, as \`zk-recipes members\` shows it:"
target/release/zk-recipes members --hosts "$ZK_HOSTS" /zk-recipes-demo/service/members

index=0
for id in "${replicas[@]}"; do [ "$id" = "$master" ] && break; index=$((index + 1)); done
killed_at=$(date +%s%3N)
kill -KILL "${pids[$((${#pids[@]} - 3 + index))]}"
echo "--- killed $master with SIGKILL; its session expires after the 4 s session timeout"

second=$(await_dealt "$master" 2 30) || { echo "the partitions were not dealt again"; tail -n 5 "$logs"/replica-*.log; exit 1; }
dealt_at=$(grep " published v" "$logs/$second.log" | tail -n 1 | cut -d' ' -f1)
echo "new master: $second, dealt the partitions to 2 members $((dealt_at - killed_at)) ms after the kill:"
for id in "${replicas[@]}"; do
    [ "$id" = "$master" ] && continue
    grep -E "role: MASTER|published|working on" "$logs/$id.log" | tail -n 2 | sed "s/^/  /"
done
echo "master/follower demo done"

echo
echo "=== 5. Partitioned workers: 3 replicas share 12 partitions; a 4th joins, one is killed, one leaves"
declare -A worker_pid
start_worker() {
    DEMO_ROOT=/zk-recipes-demo/partitioned target/release/examples/partitioned_worker "$1" 12 \
        >"$logs/$1.log" 2>&1 &
    pids+=("$!")
    worker_pid[$1]=$!
    echo "started $1 (pid $!)"
}

# How many partitions worker $1 works now.
working() {
    awk '/\] working on / { n++ } /\] stopped working on / { n-- } END { print n + 0 }' "$logs/$1.log"
}

# Waits at most $1 seconds until the workers named after it work the 12 partitions between
# them, each its share (12/N, rounded down or up).
await_balanced() {
    local deadline=$((SECONDS + $1)) n total ok
    shift
    while [ $SECONDS -lt $deadline ]; do
        total=0 ok=1
        for id in "$@"; do
            n=$(working "$id")
            total=$((total + n))
            { [ "$n" -ge $((12 / $#)) ] && [ "$n" -le $(((12 + $# - 1) / $#)) ]; } || ok=0
        done
        [ $ok = 1 ] && [ $total = 12 ] && return 0
        sleep 0.1
    done
    echo "not balanced among $* within the time"
    tail -n 5 "$logs"/worker-*.log
    return 1
}

show() {
    for id in "$@"; do grep "the assignment gives me" "$logs/$id.log" | tail -n 1 | sed "s/^/  /"; done
}

for id in worker-1 worker-2 worker-3; do start_worker "$id"; done
await_balanced 30 worker-1 worker-2 worker-3
echo "balanced, each works its 4:"
show worker-1 worker-2 worker-3

joined_at=$(date +%s%3N)
start_worker worker-4
await_balanced 30 worker-1 worker-2 worker-3 worker-4
echo "worker-4 joined and took its 3; the partitions handed over (each once its next owner waited for it):"
cat "$logs"/worker-*.log | awk -v since="$joined_at" '$1 >= since && /stopped working on/' | sort | sed "s/^/  /"
echo "  (every other partition went on being worked, never released)"

killed_at=$(date +%s%3N)
kill -KILL "${worker_pid[worker-1]}"
echo "--- killed worker-1 with SIGKILL; its session expires after the 4 s session timeout"
await_balanced 30 worker-2 worker-3 worker-4
echo "its partitions worked again $(($(date +%s%3N) - killed_at)) ms after the kill:"
show worker-2 worker-3 worker-4

left_at=$(date +%s%3N)
kill -TERM "${worker_pid[worker-2]}"
echo "--- stopped worker-2 with SIGTERM: it leaves the group, then lets each partition go as its next owner waits"
await_balanced 30 worker-3 worker-4
echo "its partitions worked again $(($(date +%s%3N) - left_at)) ms after it was told to leave:"
show worker-3 worker-4
echo "partitioned worker demo done"
