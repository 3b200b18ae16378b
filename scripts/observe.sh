#!/usr/bin/env bash
# scripts/observe.sh TASKD [DEV_FLAGS...]
#
# `make observe`: `taskd dev` (the binary TASKD, with DEV_FLAGS) with every trace sent
# to a Jaeger v2, and a Prometheus that scrapes it every 5 s with the repository's
# rules (deploy/prometheus) loaded; prints where each is, and runs until taskd, Jaeger
# or Prometheus exits, or until SIGINT or SIGTERM, then stops all three. Run it under
# scripts/with-services.sh, whose environment points taskd at Redis and MariaDB
# (TASKD_TEST_REDIS_URL, TASKD_TEST_MYSQL_DSN).
#
# Where, from the port base TASKD_SERVICES_PORT_BASE (26300, as `make run`):
#   taskd              TASKD_HTTP_ADDR (default 127.0.0.1:8080), /metrics scraped as job taskd
#   Prometheus         base+20 (26320): UI and HTTP API
#   Jaeger query       base+21 (26321): UI and HTTP API (/api/services, /api/traces);
#                      base+22 its gRPC
#   Jaeger OTLP        base+23 gRPC, base+24 HTTP (where taskd sends its traces)
# The ops console links each claim's trace to Jaeger (telemetry.trace_url); a Jaeger
# built from the Go module proxy (scripts/jaeger.sh, the default: TASKD_JAEGER names
# another binary) has a placeholder page for a UI, so the links go to its query API's
# JSON, /api/traces/{trace_id}, unless TASKD_OBSERVE_TRACE_URL says otherwise (for a
# Jaeger with its UI: http://127.0.0.1:26321/trace/{trace_id}). Prometheus is Debian's
# `prometheus`; scripts/services.sh installs it with the profile observe.
set -euo pipefail

if (($# < 1)); then
	echo "usage: scripts/observe.sh TASKD [DEV_FLAGS...]" >&2
	exit 2
fi
taskd_bin=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
log() { echo "observe: $*" >&2; }

: "${TASKD_TEST_MYSQL_DSN:?not set: run scripts/observe.sh under scripts/with-services.sh}"
: "${TASKD_TEST_REDIS_URL:?not set: run scripts/observe.sh under scripts/with-services.sh}"
base=${TASKD_SERVICES_PORT_BASE:-26300}
host=127.0.0.1
addr=${TASKD_HTTP_ADDR:-$host:8080}
prom_addr=$host:$((base + 20))
query_http=$host:$((base + 21))
query_grpc=$host:$((base + 22))
otlp_grpc=$host:$((base + 23))
otlp_http=$host:$((base + 24))
default_trace_url="http://$query_http/api/traces/{trace_id}"
trace_url=${TASKD_OBSERVE_TRACE_URL:-$default_trace_url}

prometheus=$(command -v prometheus) ||
	{ log "prometheus is not installed: apt-get install prometheus (TASKD_SERVICES_PROFILE=observe scripts/services.sh install does it as root)"; exit 1; }
jaeger=${TASKD_JAEGER:-}
if [[ -z $jaeger ]]; then
	jaeger=$("$root/scripts/jaeger.sh")
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/taskd-observe.XXXXXX")
# Jaeger, Prometheus and taskd each run in a session of their own (setsid), so that
# a Ctrl-C reaches this script alone, which stops taskd first (its last traces still
# reach Jaeger), then the other two.
pids=()
taskd_pid=
stopping=0
# stop_all sends SIGTERM to taskd and waits for it, then to the others, once.
stop_all() {
	if ((stopping == 0)); then
		stopping=1
		if [[ -n $taskd_pid ]]; then
			kill -s TERM "$taskd_pid" 2>/dev/null || true
			wait "$taskd_pid" 2>/dev/null || true
		fi
		if ((${#pids[@]} > 0)); then
			kill -s TERM "${pids[@]}" 2>/dev/null || true
		fi
	fi
}
cleanup() {
	stop_all
	wait || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

# ready NAME URL: wait until URL answers 2xx, for 60 s at most, while every process
# started so far still runs.
ready() {
	local name=$1 url=$2 pid
	for _ in $(seq 600); do
		if curl -sf -o /dev/null --max-time 1 "$url"; then
			return 0
		fi
		for pid in "${pids[@]}"; do
			kill -0 "$pid" 2>/dev/null || { log "$name: a process exited before it answered; see $dir"; exit 1; }
		done
		sleep 0.1
	done
	log "$name did not answer $url within 60 s"
	exit 1
}

# Jaeger v2, in memory, as deploy/README.md shows it, on the ports above; no
# listener of its own metrics (a fixed port) and no traces of its own.
cat >"$dir/jaeger.yaml" <<EOF
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: $query_http
    grpc:
      endpoint: $query_grpc
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: $otlp_grpc
      http:
        endpoint: $otlp_http
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
EOF
setsid "$jaeger" --config "file:$dir/jaeger.yaml" >"$dir/jaeger.log" 2>&1 &
pids+=($!)

# Prometheus: job taskd (the name the rules select), the rules of deploy/prometheus.
cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - $root/deploy/prometheus/recording.rules.yml
  - $root/deploy/prometheus/alerts.rules.yml
scrape_configs:
  - job_name: taskd
    static_configs:
      - targets: ["$addr"]
EOF
setsid "$prometheus" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prometheus" \
	--web.listen-address="$prom_addr" --enable-feature=exemplar-storage --log.level=warn \
	>"$dir/prometheus.log" 2>&1 &
pids+=($!)

ready Jaeger "http://$query_http/api/services"
ready Prometheus "http://$prom_addr/-/ready"

redis=${TASKD_TEST_REDIS_URL#redis://}
TASKD_MYSQL_DSN=$TASKD_TEST_MYSQL_DSN TASKD_REDIS_ADDRS=${redis%%/*} TASKD_HTTP_ADDR=$addr \
	TASKD_TELEMETRY_PROMETHEUS=true TASKD_TELEMETRY_TRACES=otlp-http \
	TASKD_TELEMETRY_ENDPOINT="http://$otlp_http" TASKD_TELEMETRY_SAMPLE_RATIO=1 \
	TASKD_TELEMETRY_TRACE_URL="$trace_url" \
	setsid "$taskd_bin" dev "$@" &
taskd_pid=$!
pids+=($!)
ready taskd "http://$addr/readyz"

cat >&2 <<EOF

make observe: taskd with its traces and metrics watched (Ctrl-C stops it all)
  taskd        http://$addr/  (the console: /ops; metrics: /metrics)
  Prometheus   http://$prom_addr/  (targets: /targets, rules: /rules, alerts: /alerts)
  Jaeger       http://$query_http/  (service taskd: /api/traces?service=taskd)
  trace links  $trace_url
  Grafana      not started: docs/operations.md (Watch it: make observe) says how to add it with deploy/grafana
  files        $dir

EOF

# Until one of them exits, or a signal comes (its trap exits).
status=0
wait -n "${pids[@]}" || status=$?
log "a process exited (status $status); stopping the others"
exit "$status"
