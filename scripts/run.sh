#!/usr/bin/env bash
# Set up and run the whole system locally: the dev services, two gateways (8081, 8082) and
# two workers, a simulated payment provider (8099), plus a demo product. Ctrl-C stops
# everything this script started.
# Settings: SECKILL_ADMIN_TOKEN (default: a development token), SECKILL_AUTH_HS256_SECRET (the
# buyer tokens' secret; default: a development secret), SECKILL_ADMISSION_SECRET (the waiting
# rooms' admissions; default: a development secret), SECKILL_PAYMENT_WEBHOOK_SECRET (default: a
# development secret), DEMO_STOCK (default 100), DEMO_PAYMENT_WINDOW_SECS (default 300). The
# defaults are for this machine only: never use them anywhere else.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[[ -f $HOME/.cargo/env ]] && . "$HOME/.cargo/env"

scripts/dev-up.sh
eval "$(dev_env)"
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-dev-admin-token-for-local-use-only}
export SECKILL_ADMISSION_SECRET=${SECKILL_ADMISSION_SECRET:-dev-admission-secret-for-local-use-only}
export SECKILL_AUTH_HS256_SECRET=${SECKILL_AUTH_HS256_SECRET:-dev-hs256-secret-for-local-use-only!}
export SECKILL_LOG_FORMAT=${SECKILL_LOG_FORMAT:-pretty}
export SECKILL_PAYMENT_WEBHOOK_SECRET=${SECKILL_PAYMENT_WEBHOOK_SECRET:-dev-webhook-secret}
export SECKILL_PAYMENT_PROVIDER_URL=${SECKILL_PAYMENT_PROVIDER_URL:-http://127.0.0.1:8099}
export SECKILL_PAYMENT_CALLBACK_URL=${SECKILL_PAYMENT_CALLBACK_URL:-http://127.0.0.1:8081/v1/payments/callback}
DEMO_STOCK=${DEMO_STOCK:-100}
DEMO_PAYMENT_WINDOW_SECS=${DEMO_PAYMENT_WINDOW_SECS:-300}

log "building (release)"
cargo build --release --bin gateway --bin worker --bin seckill-bench
BIN=$ROOT/target/release
"$BIN/worker" migrate

pids=()
stop_all() {
    trap - INT TERM EXIT
    log "stopping gateways and workers"
    ((${#pids[@]})) && kill -TERM "${pids[@]}" 2>/dev/null || true
    wait || true
    log "stopped (the dev services keep running; scripts/dev-down.sh stops them)"
}
trap stop_all INT TERM EXIT

# The payment provider a shop would contract with, simulated: it takes charges and calls the
# gateway back, signed, after 200 ms; one charge in ten is declined.
"$BIN/seckill-bench" provider --listen 127.0.0.1:8099 --decline-rate 0.1 --delay-ms 200 \
    >"$LOG_DIR/provider.log" 2>&1 &
pids+=($!)
for i in 1 2; do
    SECKILL_WORKER_HTTP_ADDR=127.0.0.1:919$i "$BIN/worker" >"$LOG_DIR/worker-$i.log" 2>&1 &
    pids+=($!)
    SECKILL_HTTP_ADDR=127.0.0.1:808$i "$BIN/gateway" >"$LOG_DIR/gateway-$i.log" 2>&1 &
    pids+=($!)
done
for i in 1 2; do
    wait_for -m "gateway-$i (log: $LOG_DIR/gateway-$i.log)" curl -fsS "http://127.0.0.1:808$i/livez"
    wait_for -m "worker-$i (log: $LOG_DIR/worker-$i.log)" curl -fsS "http://127.0.0.1:919$i/livez"
done
wait_for -m "the payment provider (log: $LOG_DIR/provider.log)" curl -fsS http://127.0.0.1:8099/stats

auth="Authorization: Bearer $SECKILL_ADMIN_TOKEN"
id=$(curl -fsS -X POST http://127.0.0.1:8081/admin/products -H "$auth" -H 'Content-Type: application/json' \
    -d "{\"name\": \"demo phone\", \"stock\": $DEMO_STOCK, \"price\": 499900, \"currency\": \"CNY\", \"payment_window_secs\": $DEMO_PAYMENT_WINDOW_SECS}" \
    | sed -E 's/.*"id":([0-9]+).*/\1/')
curl -fsS -X POST "http://127.0.0.1:8081/admin/products/$id/preload" -H "$auth" >/dev/null

# A buyer's token (user 1), as the shop's account service would issue it.
buyer=$("$BIN/gateway" token --user 1 --ttl 3600)
if [[ $SECKILL_AUTH_HS256_SECRET == "dev-hs256-secret-for-local-use-only!" ]]; then
    another="$BIN/gateway --dev token --user 2"
else
    another="$BIN/gateway token --user 2, with SECKILL_AUTH_HS256_SECRET set"
fi

cat <<EOT

seckill is running: gateways on :8081 and :8082, workers (health) on :9191 and :9192, a
simulated payment provider on :8099. Demo product $id has $DEMO_STOCK units at 4999.00 CNY;
an order not paid within $DEMO_PAYMENT_WINDOW_SECS s is cancelled and its unit sold again.
Logs: $LOG_DIR. Try, as user 1 (token valid 1 h; another buyer's: $another):

  TOKEN=$buyer
  curl -i -X POST http://127.0.0.1:8081/v1/seckill/$id -H "Authorization: Bearer \$TOKEN" -H 'Content-Type: application/json' -d '{}'
  curl -s http://127.0.0.1:8082/v1/orders/<ticket> -H "Authorization: Bearer \$TOKEN"
  curl -i -X POST http://127.0.0.1:8081/v1/orders/<ticket>/pay -H "Authorization: Bearer \$TOKEN" -H "Idempotency-Key: \$(uuidgen || date +%s%N)"
  curl -i -X POST http://127.0.0.1:8081/v1/orders/<ticket>/cancel -H "Authorization: Bearer \$TOKEN"
  curl -s http://127.0.0.1:8082/v1/seckill/$id/order -H "Authorization: Bearer \$TOKEN"
  curl -s http://127.0.0.1:8081/admin/products/$id -H '$auth'
  curl -s http://127.0.0.1:8081/healthz

Ctrl-C stops the gateways and workers.
EOT
wait
