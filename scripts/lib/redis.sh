# shellcheck shell=bash
# Sourced by scripts/lib.sh (its basics are in scope).
# Redis: one server, and the local Redis Cluster.

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
