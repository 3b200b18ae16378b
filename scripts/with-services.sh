#!/usr/bin/env bash
# scripts/with-services.sh CMD [ARGS...]
#
# Runs CMD with the real Redis and MariaDB servers up and their environment exported
# (see scripts/services.sh), then takes the servers down again whatever happened -
# CMD failed, `up` failed, Ctrl-C, SIGTERM - and exits with CMD's status. `make test`,
# `make bench`, `make run` and `make observe` use it; TASKD_SERVICES_PORT_BASE,
# TASKD_SERVICES_PROFILE and TASKD_SERVICES_DATABASE pick the set (see
# scripts/services.sh).
#
# A SIGINT or SIGTERM this script gets is passed on to CMD's process group (CMD runs
# in one of its own, so a signal sent to this script's pid alone stops CMD and every
# process CMD started, as a Ctrl-C at the terminal would), and the servers go down
# once CMD has exited.
#
# TASKD_SERVICES_PARENT=PID: also stop when process PID is told to stop. That is for
# make, which passes no SIGINT on to its recipe (it waits for the recipe, then dies of
# it) and a SIGTERM only to the recipe's shell: a make that gets SIGINT, SIGTERM, SIGHUP
# or SIGQUIT stops catching it, and this script, which looks at PID's caught signals
# (/proc/PID/status) every 0.2 s, then stops CMD with the same signal (SIGINT for
# SIGHUP and SIGQUIT). The Makefile sets it to make's pid for `make run` and `make
# observe`.
set -euo pipefail

services=$(dirname "$0")/services.sh

# The EXIT trap does not change the exit status, so CMD's status is kept.
trap '"$services" down' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

env=$("$services" up)
eval "$env"

# CMD in a process group of its own (job control on while it starts), in the
# background so that a signal's trap runs at once rather than after CMD exits. With
# job control, CMD does not ignore SIGINT as a background command otherwise would.
set -m
"$@" &
child=$!
set +m

stopping=0
# stop SIG passes SIG on to CMD's process group, once.
stop() {
	if ((stopping == 0)); then
		stopping=1
		kill -s "$1" -- "-$child" 2>/dev/null || true
	fi
}
trap 'stop INT' INT
trap 'stop TERM' TERM

# watch_parent PID: when PID stops catching SIGHUP, SIGINT, SIGQUIT or SIGTERM (bits
# 0, 1, 2 and 14 of SigCgt) that it caught when this started, signal this script
# (SIGTERM for SIGTERM, SIGINT for the others); when PID is gone, SIGTERM.
watch_parent() {
	local pid=$1 first now gone
	first=$(awk '$1 == "SigCgt:" { print $2 }' "/proc/$pid/status" 2>/dev/null) || first=
	[[ -n $first ]] || return 0
	while sleep 0.2; do
		now=$(awk '$1 == "SigCgt:" { print $2 }' "/proc/$pid/status" 2>/dev/null) || now=
		if [[ -z $now ]]; then
			kill -s TERM $$ 2>/dev/null || true
			return 0
		fi
		gone=$((16#$first & ~16#$now & 0x4007))
		if ((gone & 0x4000)); then
			kill -s TERM $$ 2>/dev/null || true
			return 0
		elif ((gone != 0)); then
			kill -s INT $$ 2>/dev/null || true
			return 0
		fi
	done
}
watcher=
if [[ -n ${TASKD_SERVICES_PARENT:-} ]]; then
	watch_parent "$TASKD_SERVICES_PARENT" &
	watcher=$!
fi

# A trapped signal ends a wait early (status 128+n) while CMD still runs: wait again.
# Once CMD is gone, wait gives its own status.
while kill -0 "$child" 2>/dev/null; do
	wait "$child" || true
done
status=0
wait "$child" || status=$?
if [[ -n $watcher ]]; then
	kill "$watcher" 2>/dev/null || true
fi
exit "$status"
