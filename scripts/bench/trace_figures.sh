# shellcheck shell=bash
# Sourced by scripts/bench.sh (its settings and globals are in scope).
# Figure (13): what traces cost the accept path (issue 37). The accept path of (2) on a freshly
# started gateway with traces off, on at 1 % (traceidratio 0.01) and on at 100 % (always_on),
# in BENCH_TRACE_ROUNDS alternated rounds (each round starts one further along), exporting
# OTLP/HTTP to a sink that answers 200 and counts what it got (a process of its own, so its
# CPU is not the gateway's). scripts/bench/trace_line.py prints the gateway's CPU per accept
# of each, and the two "on" over "off" as ratios with their 95 % intervals.

if want 13; then
    new_namespace t
    SINK_PORT=$((GW_PORTS[0] + 900))
    python3 - "$SINK_PORT" "$OUT/f13-sink.json" >>"$OUT/f13-sink.log" 2>&1 <<'PY' &
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port, out = int(sys.argv[1]), sys.argv[2]
got = {"requests": 0, "bytes": 0}
lock = threading.Lock()
class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        self.rfile.read(n)
        with lock:
            got["requests"] += 1
            got["bytes"] += n
            json.dump(got, open(out, "w"))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()
PY
    PIDS[sink]=$!
    wait_for -t 10 -m "the OTLP sink" bash -c "exec 3<>/dev/tcp/127.0.0.1/$SINK_PORT"
    SINK=http://127.0.0.1:$SINK_PORT
    trace_run() { # mode round
        local name=f13-$1-r$2 vars=()
        case $1 in
            off) ;;
            1) vars=("OTEL_EXPORTER_OTLP_ENDPOINT=$SINK" OTEL_TRACES_SAMPLER=traceidratio
                OTEL_TRACES_SAMPLER_ARG=0.01) ;;
            100) vars=("OTEL_EXPORTER_OTLP_ENDPOINT=$SINK" OTEL_TRACES_SAMPLER=always_on) ;;
        esac
        stop_proc g0
        start_gateway 0 "${vars[@]}"
        P=$(new_product 0 1000000000)
        load "$name" --gateway "http://127.0.0.1:${GW_PORTS[0]}" --users 1000000000 \
            --first-user $((1 + $2 * 100000000)) --duration "$D" --settle-timeout 0 \
            --no-history --product "$P" || warn "(13) $1 round $2 failed: $OUT/$name.log"
    }
    ran 13
    TRACE_ORDER=(off 1 100)
    for ((round = 1; round <= BENCH_TRACE_ROUNDS; round++)); do
        log "(13) traces round $round of $BENCH_TRACE_ROUNDS: off, 1 %, 100 %, ${D} s each"
        for ((i = 0; i < 3; i++)); do trace_run "${TRACE_ORDER[(round - 1 + i) % 3]}" "$round"; done
    done
    stop_proc g0
    stop_proc sink
fi
