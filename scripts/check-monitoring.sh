#!/usr/bin/env bash
# Static checks of the monitoring files in deploy/ (see docs/MONITORING.md). Starts nothing,
# needs no build and no running service: only promtool (Debian's `prometheus` package, which
# scripts/dev-up.sh installs) and python3.
#
#   scripts/check-monitoring.sh
#
# 1. promtool: the Prometheus configurations, the alert rules, and their unit tests
#    (deploy/prometheus/alerts_test.yml).
# 2. The Grafana files: the dashboard is valid JSON with a uid, and every datasource it names
#    is the provisioned one; every PromQL expression of its panels parses (promtool, with
#    Grafana's $__rate_interval & co. replaced by 1m).
# 3. Every seckill_* metric name in the rules, their tests and the dashboard is defined (as a
#    string literal) in gateway/src/metrics.rs or worker/src/metrics.rs; for a histogram's
#    _bucket, _sum and _count series the histogram's name is looked up. A name that is not
#    there fails the check: a renamed metric would otherwise leave a silent alert or an
#    empty panel.
# Exits non-zero on the first failing step, after listing every problem of that step.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

PROM_DIR=deploy/prometheus
GRAFANA_DIR=deploy/grafana
DASHBOARD=$GRAFANA_DIR/dashboards/seckill.json
DATASOURCE=$GRAFANA_DIR/provisioning/datasources/prometheus.yml
METRIC_SOURCES=(gateway/src/metrics.rs worker/src/metrics.rs)

command -v promtool >/dev/null ||
    die "promtool not found: apt-get install --no-install-recommends prometheus (scripts/dev-up.sh installs it)"
command -v python3 >/dev/null || die "python3 not found"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ------------------------------------------------------------ 1. promtool ---
log "monitoring: promtool check config (prometheus.yml, and prometheus-ha.yml for the ha profile)"
for config in prometheus.yml prometheus-ha.yml; do
    promtool check config "$PROM_DIR/$config" || die "promtool check config $config failed"
done
log "monitoring: promtool check rules"
promtool check rules "$PROM_DIR/alerts.yml" || die "promtool check rules failed"
log "monitoring: promtool test rules"
promtool test rules "$PROM_DIR/alerts_test.yml" || die "promtool test rules failed (the unit tests of the alerts)"

# ------------------------------------------------------------- 2. Grafana ---
log "monitoring: Grafana dashboard JSON"
python3 -m json.tool "$DASHBOARD" >/dev/null || die "$DASHBOARD is not valid JSON"
ds_uid=$(sed -n 's/^[[:space:]]*uid:[[:space:]]*\([A-Za-z0-9_-]*\)[[:space:]]*$/\1/p' "$DATASOURCE" | head -n 1)
[[ -n $ds_uid ]] || die "$DATASOURCE: no data source uid"
# Prints one rule per panel expression (a rule file promtool can parse) on stdout, and the
# problems of the dashboard on stderr (exit 1 if any).
python3 - "$DASHBOARD" "$ds_uid" >"$tmp/dashboard-rules.yml" <<'PY' || die "$DASHBOARD: the problems above"
import json, re, sys

path, ds_uid = sys.argv[1], sys.argv[2]
dash = json.load(open(path))
problems = []
if not dash.get("uid"):
    problems.append("the dashboard has no uid")
if not isinstance(dash.get("schemaVersion"), int):
    problems.append("the dashboard has no schemaVersion")

def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))

exprs = []
for p in panels(dash.get("panels", [])):
    title = p.get("title", "?")
    if p.get("type") == "row":
        continue
    if not p.get("targets"):
        problems.append(f"panel {title!r} has no query")
    for where, ds in [("panel", p.get("datasource"))] + [
        ("query " + t.get("refId", "?"), t.get("datasource")) for t in p.get("targets", [])
    ]:
        if not isinstance(ds, dict) or ds.get("uid") != ds_uid:
            problems.append(f"panel {title!r}: {where} names datasource {ds!r}, not uid {ds_uid!r}")
    if not p.get("fieldConfig", {}).get("defaults", {}).get("unit"):
        problems.append(f"panel {title!r} has no unit")
    for t in p.get("targets", []):
        expr = t.get("expr", "")
        if not expr.strip():
            problems.append(f"panel {title!r}: query {t.get('refId', '?')} is empty")
            continue
        # Grafana's interval variables, as a fixed range promtool can parse.
        expr = re.sub(r"\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval|__interval|__range)\}", "1m", expr)
        exprs.append((title, t.get("refId", "?"), expr))

for problem in problems:
    print(f"{path}: {problem}", file=sys.stderr)
print("groups:\n  - name: dashboard\n    rules:")
for i, (title, ref, expr) in enumerate(exprs):
    print(f"      # {title} / {ref}\n      - record: dashboard:expr_{i}\n        expr: {json.dumps(expr)}")
sys.exit(1 if problems else 0)
PY
log "monitoring: the dashboard's PromQL parses"
promtool check rules "$tmp/dashboard-rules.yml" >"$tmp/promtool.out" 2>&1 || {
    cat "$tmp/promtool.out" >&2
    die "a PromQL expression of $DASHBOARD does not parse (rules as checked: $tmp/dashboard-rules.yml)"
}

# ------------------------------------------------------- 3. metric names ---
log "monitoring: metric names against ${METRIC_SOURCES[*]}"
defined() { grep -qF "\"$1\"" "${METRIC_SOURCES[@]}"; }
unknown=0 checked=0
while read -r name; do
    checked=$((checked + 1))
    defined "$name" && continue
    base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$name")
    [[ $base != "$name" ]] && defined "$base" && continue
    used_in=$(grep -lw -- "$name" "$PROM_DIR/alerts.yml" "$PROM_DIR/alerts_test.yml" "$DASHBOARD" | paste -sd, -)
    err "metric $name (used in $used_in) is not defined in ${METRIC_SOURCES[*]}"
    unknown=$((unknown + 1))
done < <(grep -ohE '\bseckill_[a-z0-9_]+' "$PROM_DIR/alerts.yml" "$PROM_DIR/alerts_test.yml" "$DASHBOARD" | sort -u)
((checked > 0)) || die "no seckill_* metric name found: the extraction is broken"
((unknown == 0)) || die "$unknown of $checked metric names are not defined in the code"
log "monitoring: all $checked metric names are defined"
log "monitoring: OK"
