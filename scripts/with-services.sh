#!/usr/bin/env bash
# scripts/with-services.sh CMD [ARGS...]
#
# Runs CMD with the real Redis and MariaDB servers up and their environment exported
# (see scripts/services.sh), then takes the servers down again whatever happened -
# CMD failed, `up` failed, Ctrl-C - and exits with CMD's status. `make test`,
# `make bench` and `make run` use it; TASKD_SERVICES_PORT_BASE, TASKD_SERVICES_PROFILE
# and TASKD_SERVICES_DATABASE pick the set (see scripts/services.sh).
set -euo pipefail

services=$(dirname "$0")/services.sh

# The EXIT trap does not change the exit status, so CMD's status is kept.
trap '"$services" down' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

env=$("$services" up)
eval "$env"
# From here on a Ctrl-C (or SIGTERM) is CMD's to handle: it reaches CMD too,
# and CMD's exit status, 0 for a clean stop, is what counts.
trap ':' INT TERM
"$@"
