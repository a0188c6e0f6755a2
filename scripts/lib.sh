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

# The services, one file each.
# shellcheck source=lib/redis.sh
. "$ROOT/scripts/lib/redis.sh"
# shellcheck source=lib/mariadb.sh
. "$ROOT/scripts/lib/mariadb.sh"
# shellcheck source=lib/zookeeper.sh
. "$ROOT/scripts/lib/zookeeper.sh"
# shellcheck source=lib/kafka.sh
. "$ROOT/scripts/lib/kafka.sh"

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
