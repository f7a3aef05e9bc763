#!/usr/bin/env bash
# The ensemble of docker-compose.yml without Docker: three ZooKeeper servers
# (ids 1-3) from Debian's `zookeeper` package, client ports 2181-2183 on
# 127.0.0.1, quorum/election ports 2888-2890/3888-3890.
#
#   bash zk-docker/ensemble.sh up       # install if missing, start, wait for a leader
#   bash zk-docker/ensemble.sh up --secure   # the same, plus TLS client ports 2281-2283
#   bash zk-docker/ensemble.sh status   # each server's mode
#   bash zk-docker/ensemble.sh pki      # only make the TLS + auth files (docker-compose.secure.yml)
#   bash zk-docker/ensemble.sh down     # stop and remove all state
#
# --secure: TLS client ports 2281-2283 that need a client certificate (the plaintext
# ports stay on 127.0.0.1 for the four-letter words), and a test CA, server and client
# certificates and a digest credentials file made with openssl and keytool in $DIR/pki.
# It prints the environment the examples need (ZK_HOSTS, ZK_AUTH_FILE, ZK_TLS_*).
#
# State (configs, data, logs, pid files, pki) lives in ${ZK_ENSEMBLE_DIR:-/tmp/zk-recipes-ensemble}.
set -euo pipefail

DIR="${ZK_ENSEMBLE_DIR:-/tmp/zk-recipes-ensemble}"
PKI="$DIR/pki"
JAR=/usr/share/java/zookeeper.jar
# Debian's zookeeper.jar manifest leaves out netty-codec, which the TLS (Netty) server needs.
CLASSPATH="$JAR:/usr/share/java/netty-codec.jar:/usr/share/java/slf4j-simple.jar"
IDS=(1 2 3)
SECURE=0
STORE_PASSWORD=zk-recipes-demo

client_port() { echo $((2180 + $1)); }
secure_port() { echo $((2280 + $1)); }

die() {
    echo "ensemble.sh: $*" >&2
    exit 1
}

install_zookeeper() {
    [[ -f $JAR ]] && command -v java >/dev/null && command -v openssl >/dev/null && return 0
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    echo "ensemble.sh: installing Debian's zookeeper and openssl packages" >&2
    "${sudo[@]}" apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq zookeeper openssl >/dev/null
    [[ -f $JAR ]] || die "$JAR still missing after installing zookeeper"
}

# make_pki: a test CA, a server certificate for 127.0.0.1/localhost in a PKCS12 keystore,
# a truststore with the CA, a client certificate and key, and a digest credentials file.
make_pki() {
    [[ -f $PKI/auth ]] && return 0
    mkdir -p "$PKI"
    (
        cd "$PKI"
        umask 077
        local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
        openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 30 -subj /CN=zk-recipes-demo-ca \
            -addext basicConstraints=critical,CA:true -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext
        printf 'extendedKeyUsage=clientAuth\n' >client.ext
        local name serial=1
        for name in server client; do
            openssl req -new "${ec[@]}" -keyout "$name.key" -out "$name.csr" -subj "/CN=$name" 2>/dev/null
            openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -set_serial "$serial" -days 30 \
                -extfile "$name.ext" -out "$name.pem" 2>/dev/null
            serial=$((serial + 1))
        done
        openssl pkcs12 -export -name server -in server.pem -inkey server.key -certfile ca.pem \
            -out server.p12 -passout "pass:$STORE_PASSWORD"
        keytool -importcert -noprompt -alias ca -file ca.pem -keystore trust.p12 -storetype PKCS12 \
            -storepass "$STORE_PASSWORD" >/dev/null 2>&1
        chmod 644 ca.pem server.p12 trust.p12 # the containers' zookeeper user reads them
        echo "orders-svc:$(openssl rand -hex 16)" >auth
    )
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
    if ((SECURE)); then
        cat >>"$dir/zoo.cfg" <<EOF
secureClientPort=$(secure_port "$id")
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=$PKI/server.p12
ssl.keyStore.password=$STORE_PASSWORD
ssl.trustStore.location=$PKI/trust.p12
ssl.trustStore.password=$STORE_PASSWORD
ssl.clientAuth=need
EOF
    fi
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
    [[ ${1:-} == --secure ]] && SECURE=1
    install_zookeeper
    mkdir -p "$DIR"
    ((SECURE)) && make_pki
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
    ((SECURE)) && secure_env
    return 0
}

# secure_env: what the examples need to use the TLS ports and the digest credentials.
secure_env() {
    echo "TLS ports: 127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283. For the examples:"
    echo "  export ZK_HOSTS=127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283"
    echo "  export ZK_AUTH_FILE=$PKI/auth ZK_TLS_CA=$PKI/ca.pem ZK_TLS_CERT=$PKI/client.pem ZK_TLS_KEY=$PKI/client.key"
    echo "  cargo run --features tls --example lock -- 4 10"
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
    up) up "${2:-}" ;;
    pki)
        install_zookeeper
        make_pki
        secure_env
        ;;
    down) down ;;
    status) status ;;
    *)
        echo "usage: $0 up [--secure]|pki|down|status" >&2
        exit 2
        ;;
esac
