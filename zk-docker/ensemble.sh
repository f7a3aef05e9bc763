#!/usr/bin/env bash
# The ensemble of docker-compose.yml without Docker: three ZooKeeper servers
# (ids 1-3) from Debian's `zookeeper` package, client ports 2181-2183 on
# 127.0.0.1, quorum/election ports 2888-2890/3888-3890.
#
#   bash zk-docker/ensemble.sh up       # install if missing, start, wait for a leader
#   bash zk-docker/ensemble.sh status   # each server's mode
#   bash zk-docker/ensemble.sh down     # stop and remove all state
#
# State (configs, data, logs, pid files) lives in ${ZK_ENSEMBLE_DIR:-/tmp/zk-recipes-ensemble}.
set -euo pipefail

DIR="${ZK_ENSEMBLE_DIR:-/tmp/zk-recipes-ensemble}"
JAR=/usr/share/java/zookeeper.jar
CLASSPATH="$JAR:/usr/share/java/slf4j-simple.jar"
IDS=(1 2 3)

client_port() { echo $((2180 + $1)); }

die() {
    echo "ensemble.sh: $*" >&2
    exit 1
}

install_zookeeper() {
    [[ -f $JAR ]] && command -v java >/dev/null && return 0
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    echo "ensemble.sh: installing Debian's zookeeper package" >&2
    "${sudo[@]}" apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq zookeeper >/dev/null
    [[ -f $JAR ]] || die "$JAR still missing after installing zookeeper"
}

# four_letter PORT CMD: the server's answer, empty if none within 2 s.
four_letter() {
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' _ "$1" "$2" 2>/dev/null || true
}

mode() {
    four_letter "$(client_port "$1")" srvr | sed -n 's/^Mode: //p'
}

running() {
    local pidfile="$DIR/s$1/server.pid"
    [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

write_config() {
    local id=$1 dir="$DIR/s$1"
    mkdir -p "$dir/data"
    echo "$id" >"$dir/data/myid"
    cat >"$dir/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$(client_port "$id")
clientPortAddress=127.0.0.1
4lw.commands.whitelist=*
admin.enableServer=false
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
preAllocSize=4096
autopurge.purgeInterval=1
reconfigEnabled=false
server.1=127.0.0.1:2888:3888
server.2=127.0.0.1:2889:3889
server.3=127.0.0.1:2890:3890
EOF
}

start_server() {
    local id=$1 dir="$DIR/s$1"
    running "$id" && return 0
    if [[ -n $(four_letter "$(client_port "$id")" ruok) ]]; then
        die "port $(client_port "$id") is already served by another process"
    fi
    write_config "$id"
    # setsid: the server outlives this script and the shell that ran it.
    setsid java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
        -Djava.net.preferIPv4Stack=true -Dzookeeper.jmx.log4j.disable=true \
        -Dzookeeper.cnxTimeout=1000 -Dzookeeper.fastleader.maxNotificationInterval=1000 \
        -Dorg.slf4j.simpleLogger.showDateTime=true \
        -cp "$CLASSPATH" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
        >>"$dir/server.log" 2>&1 </dev/null &
    echo $! >"$dir/server.pid"
}

up() {
    install_zookeeper
    mkdir -p "$DIR"
    for id in "${IDS[@]}"; do start_server "$id"; done
    local deadline=$((SECONDS + 60))
    while :; do
        local serving=0 leader=0
        for id in "${IDS[@]}"; do
            running "$id" || die "server $id exited; see $DIR/s$id/server.log: $(tail -n 5 "$DIR/s$id/server.log")"
            case "$(mode "$id")" in
                leader) serving=$((serving + 1)) leader=1 ;;
                follower) serving=$((serving + 1)) ;;
            esac
        done
        ((serving == 3 && leader == 1)) && break
        ((SECONDS < deadline)) || die "no leader after 60 s; logs in $DIR/s*/server.log"
        sleep 0.2
    done
    echo "ZooKeeper ensemble up: 127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183"
}

status() {
    local down=0
    for id in "${IDS[@]}"; do
        local m=""
        running "$id" && m=$(mode "$id")
        if [[ -z $m ]]; then
            m="down"
            down=1
        fi
        echo "server $id 127.0.0.1:$(client_port "$id") $m"
    done
    return "$down"
}

down() {
    local pids=()
    for id in "${IDS[@]}"; do
        local pidfile="$DIR/s$id/server.pid"
        [[ -f $pidfile ]] && pids+=("$(cat "$pidfile")")
    done
    if ((${#pids[@]})); then
        kill "${pids[@]}" 2>/dev/null || true
        for _ in $(seq 1 30); do
            kill -0 "${pids[@]}" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "${pids[@]}" 2>/dev/null || true
    fi
    rm -rf "$DIR"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    *)
        echo "usage: $0 up|down|status" >&2
        exit 2
        ;;
esac
