#!/usr/bin/env bash
# scripts/services.sh up|down|env|status|install
#
# Starts and stops the real servers that taskd's tests and demo run against, all on
# 127.0.0.1, each in its own subdirectory of one temporary directory. The set is made
# of these servers, each with a name:
#
#   redis     main Redis         base+79            (16379)
#   redlock   Redlock masters    base+80 .. base+84 (16380-16384), five independent Redis servers
#   cluster   Redis Cluster      base+90 .. base+92 (16390-16392), three masters, no replicas;
#                                their cluster bus ports are node port + 100 (16490-16492)
#   mariadb   MariaDB            base+6             (16306), database taskd_test, user taskd/taskd;
#                                the primary: it writes a binary log (ROW, GTID)
#   replica   MariaDB replica    base+7             (16307), replicating from the primary over GTID
#                                only the databases named taskd_r_*, so the other tests' writes
#                                cost it nothing; read-only for all but the taskd user
#   galera    MariaDB Galera base+10 .. base+12 (16310-16312), a 3-node synchronous multi-master
#                                cluster, database taskd_test, user taskd/taskd; group communication
#                                on base+13 .. base+15, incremental state transfer (IST) on
#                                base+16 .. base+18, rsync state transfer (SST) on base+43 .. base+45;
#                                only when named, or in the profiles all and bench
#   postgres  PostgreSQL         base+32            (16332), database taskd_test, user taskd/taskd;
#                                durable defaults (fsync, synchronous_commit on); only in the
#                                profile bench or when named: River's baseline in make bench
#
# TASKD_SERVICES_PROFILE picks which of them `up` starts:
#
#   all       every server above but postgres, and the test tools below (the default: make test)
#   bench     all and postgres (make bench)
#   demo      redis and mariadb: what `taskd dev` uses (make run)
#   observe   demo, and Prometheus installed (make observe, scripts/observe.sh)
#   a,b,...   the servers named, e.g. redis,mariadb,replica
#
# TASKD_SERVICES_DATABASE names the database made on the primary (default taskd_test;
# make run uses taskd). The base is TASKD_SERVICES_PORT_BASE (default 16300), so two
# sets can run side by side (`make run` uses 26300). The script remembers what it
# started in the state directory TASKD_SERVICES_STATE (default
# /tmp/taskd-services-<base>); `down`, `status` and `env` read the set from there, so
# they need no profile, and `down` stops exactly those processes and removes their files.
# TASKD_SERVICES_MARIADB_OPTIONS adds server options to the primary's command line, after
# (so over) its own, to measure a setting: e.g. '--innodb-autoinc-lock-mode=1'.
#
# Missing servers are installed with apt-get when running as root (PostgreSQL then runs
# as the postgres user), and, with the profiles all and bench, so are Prometheus (prometheus, promtool), which the deploy/ tests run
# themselves, buildah and systemd (systemd-analyze), with which they build the image and
# verify the units, chromium and firefox-esr, the browsers of the web tests, and curl and
# jq, which the docs' shell examples run.
#
#   up      start the profile's servers (no-op if that set is already up), wait until
#           every one answers, then print the environment (as `env` does) on stdout
#   down    stop what `up` started and remove its files; safe when nothing is up
#   env     print `export` lines for the tests: eval "$(scripts/services.sh env)"
#   status  say what is running
#   install only install the missing packages of the profile (as root), start nothing:
#           for tools that start servers of their own (make chaos)
#
# Progress and errors go to stderr, so `eval "$(scripts/services.sh up)"` works.
#
# A server of the set is a name in SERVERS with five functions beside it, found by
# name: <name>_ports (its "what:port" entries), <name>_start (spawn, without waiting),
# <name>_ready (wait and set up), <name>_env (its export lines) and, in
# server_packages, the Debian packages it needs. Adding one is adding those.
set -euo pipefail

# Server binaries live in sbin on Debian, which a non-root PATH may lack.
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

HOST=127.0.0.1
PORT_BASE=${TASKD_SERVICES_PORT_BASE:-16300}
if ! [[ $PORT_BASE =~ ^[0-9]+$ ]] || ((PORT_BASE < 1024 || PORT_BASE > 65535 - 192)); then
	echo "services: TASKD_SERVICES_PORT_BASE must be a number from 1024 to 65343, got '$PORT_BASE'" >&2
	exit 2
fi
STATE_DIR=${TASKD_SERVICES_STATE:-/tmp/taskd-services-$PORT_BASE}
# How long one server may take to answer before `up` gives up on it.
TIMEOUT=${TASKD_SERVICES_TIMEOUT:-60}

# Every server, in the order `up` starts them; and the profiles.
SERVERS=(redis redlock cluster mariadb replica galera postgres)
declare -A PROFILES=(
	[all]="redis redlock cluster mariadb replica galera"
	[bench]="${SERVERS[*]}"
	[demo]="redis mariadb"
	[observe]="redis mariadb"
)
PROFILE=${TASKD_SERVICES_PROFILE:-all}
DATABASE=${TASKD_SERVICES_DATABASE:-taskd_test}
if ! [[ $DATABASE =~ ^[a-z][a-z0-9_]{0,63}$ ]]; then
	echo "services: TASKD_SERVICES_DATABASE must be a lowercase name (a-z, 0-9, _), got '$DATABASE'" >&2
	exit 2
fi

REDIS_PORT=$((PORT_BASE + 79))
REDLOCK_PORTS=($((PORT_BASE + 80)) $((PORT_BASE + 81)) $((PORT_BASE + 82)) $((PORT_BASE + 83)) $((PORT_BASE + 84)))
CLUSTER_PORTS=($((PORT_BASE + 90)) $((PORT_BASE + 91)) $((PORT_BASE + 92)))
# Cluster bus ports: Redis' default, node port + 10000, would land on another set's
# ports (16390 + 10000 = 26390, a cluster node of `make run`'s base 26300).
CLUSTER_BUS_OFFSET=100
MYSQL_PORT=$((PORT_BASE + 6))
REPLICA_PORT=$((PORT_BASE + 7))
# The databases the replica applies: tests that need a replica create theirs so.
REPLICA_DATABASES='taskd\_r\_%'
POSTGRES_PORT=$((PORT_BASE + 32))
GALERA_PORTS=($((PORT_BASE + 10)) $((PORT_BASE + 11)) $((PORT_BASE + 12)))
GALERA_GCOMM_PORTS=($((PORT_BASE + 13)) $((PORT_BASE + 14)) $((PORT_BASE + 15)))
GALERA_IST_PORTS=($((PORT_BASE + 16)) $((PORT_BASE + 17)) $((PORT_BASE + 18)))
GALERA_SST_PORTS=($((PORT_BASE + 43)) $((PORT_BASE + 44)) $((PORT_BASE + 45)))
GALERA_PROVIDER=${TASKD_GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}

MYSQL_USER=taskd
MYSQL_PASSWORD=taskd

POSTGRES_USER=taskd
POSTGRES_PASSWORD=taskd
POSTGRES_DATABASE=taskd_test
# The system user PostgreSQL runs as when this script runs as root, which
# initdb and postgres refuse to be.
POSTGRES_OS_USER=postgres

POLICY_RC=/usr/sbin/policy-rc.d
POLICY_RC_CREATED=0 # 1 while this script's own policy-rc.d is in place
STARTING=0          # 1 while `up` is starting servers: on failure, stop them again

log() { echo "services: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# resolve_profile PROFILE prints the servers it names, in start order, or fails.
resolve_profile() {
	local profile=$1 names=() name picked=()
	if [[ -n ${PROFILES[$profile]+set} ]]; then
		echo "${PROFILES[$profile]}"
		return 0
	fi
	IFS=, read -r -a names <<<"$profile"
	((${#names[@]} > 0)) || die "TASKD_SERVICES_PROFILE is empty"
	for name in "${names[@]}"; do
		[[ " ${SERVERS[*]} " == *" $name "* ]] ||
			die "TASKD_SERVICES_PROFILE: unknown profile or server '$name' (profiles: ${!PROFILES[*]}; servers: ${SERVERS[*]})"
	done
	for name in "${SERVERS[@]}"; do
		[[ ",$profile," == *",$name,"* ]] && picked+=("$name")
	done
	if [[ " ${picked[*]} " == *" replica "* && " ${picked[*]} " != *" mariadb "* ]]; then
		die "TASKD_SERVICES_PROFILE: replica needs mariadb, its primary"
	fi
	echo "${picked[*]}"
}

# with_tools: the set installs and reports the test tools (profile all).
with_tools() { [[ $SELECTED_PROFILE == all || $SELECTED_PROFILE == bench ]]; }

on_exit() {
	local rc=$?
	if ((POLICY_RC_CREATED)); then
		rm -f "$POLICY_RC"
	fi
	if ((rc != 0 && STARTING)); then
		log "stopping the servers started so far; their logs stay in $(state_tmpdir) until 'down'"
		stop_servers
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------
# Binaries and packages

# first_cmd NAME... prints the path of the first NAME found on PATH.
first_cmd() {
	local name
	for name in "$@"; do
		if command -v "$name"; then
			return 0
		fi
	done
	return 1
}

# Newer binary names first, the older mysql ones as a fallback.
find_binaries() {
	REDIS_SERVER=$(first_cmd redis-server) || REDIS_SERVER=
	REDIS_CLI=$(first_cmd redis-cli) || REDIS_CLI=
	MARIADBD=$(first_cmd mariadbd mysqld) || MARIADBD=
	MARIADB_INSTALL_DB=$(first_cmd mariadb-install-db mysql_install_db) || MARIADB_INSTALL_DB=
	MARIADB=$(first_cmd mariadb mysql) || MARIADB=
	MARIADB_ADMIN=$(first_cmd mariadb-admin mysqladmin) || MARIADB_ADMIN=
	# Not a server of the set: the deploy/ tests run their own Prometheus and promtool.
	PROMETHEUS=$(first_cmd prometheus) || PROMETHEUS=
	PROMTOOL=$(first_cmd promtool) || PROMTOOL=
	# The browser the web package's tests drive (Debian's chromium).
	CHROMIUM=$(first_cmd chromium chromium-browser) || CHROMIUM=
	# The second browser they drive (Debian's firefox-esr, over WebDriver BiDi).
	FIREFOX=$(first_cmd firefox-esr firefox) || FIREFOX=
	find_postgres
}

# server_packages NAME prints the Debian packages server NAME needs that are missing.
server_packages() {
	case $1 in
	redis | redlock | cluster)
		[[ -n $REDIS_SERVER ]] || echo redis-server
		[[ -n $REDIS_CLI ]] || echo redis-tools
		;;
	mariadb | replica)
		[[ -n $MARIADBD && -n $MARIADB_INSTALL_DB ]] || echo mariadb-server
		[[ -n $MARIADB && -n $MARIADB_ADMIN ]] || echo mariadb-client
		;;
	galera)
		[[ -n $MARIADBD && -n $MARIADB_INSTALL_DB ]] || echo mariadb-server
		[[ -n $MARIADB && -n $MARIADB_ADMIN ]] || echo mariadb-client
		[[ -f $GALERA_PROVIDER ]] || echo galera-4
		# The state transfer method: wsrep_sst_rsync (mariadb-server) runs rsync.
		command -v rsync >/dev/null || echo rsync
		;;
	postgres)
		[[ -n $PG_BIN ]] || echo postgresql
		;;
	esac
}

# missing_packages prints the Debian packages of the set whose binaries are not found.
missing_packages() {
	local missing=() name
	for name in $SELECTED; do
		missing+=($(server_packages "$name"))
	done
	if with_tools || [[ $SELECTED_PROFILE == observe ]]; then
		[[ -n $PROMETHEUS && -n $PROMTOOL ]] || missing+=(prometheus)
	fi
	if with_tools; then
		[[ -n $CHROMIUM ]] || missing+=(chromium)
		[[ -n $FIREFOX ]] || missing+=(firefox-esr)
		# The shell examples of the docs (docs_examples_test.go) run curl and jq.
		command -v curl >/dev/null || missing+=(curl)
		command -v jq >/dev/null || missing+=(jq)
		# The deploy/ tests build the Containerfile's image and verify the systemd units.
		command -v buildah >/dev/null || missing+=(buildah)
		command -v systemd-analyze >/dev/null || missing+=(systemd)
	fi
	printf '%s\n' "${missing[@]}" | awk 'NF && !seen[$0]++' | paste -sd ' ' -
}

# find_postgres sets PG_BIN to the directory of postgres, initdb and psql: Debian's
# newest /usr/lib/postgresql/<version>/bin, else the directory of postgres on PATH.
find_postgres() {
	local dir
	PG_BIN=
	for dir in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k4,4 -rn); do
		if [[ -x $dir/postgres && -x $dir/initdb && -x $dir/psql ]]; then
			PG_BIN=$dir
			return 0
		fi
	done
	dir=$(first_cmd postgres) || return 0
	dir=$(dirname "$(readlink -f "$dir")")
	if [[ -x $dir/initdb && -x $dir/psql ]]; then
		PG_BIN=$dir
	fi
}

# ensure_packages installs whatever is missing with apt-get, without letting the
# packages start their system-wide services.
ensure_packages() {
	find_binaries
	local missing
	missing=$(missing_packages)
	[[ -z $missing ]] && return 0

	if ((EUID != 0)); then
		die "not installed: $missing. Install them (sudo apt-get install $missing) or run this script as root, which installs them itself."
	fi
	command -v apt-get >/dev/null || die "not installed: $missing, and there is no apt-get to install them with"

	log "installing $missing with apt-get"
	# invoke-rc.d and deb-systemd-invoke ask policy-rc.d before starting a service;
	# 101 means "not allowed", so the postinst scripts leave redis/mariadb/prometheus stopped.
	if [[ ! -e $POLICY_RC ]]; then
		printf '#!/bin/sh\n# temporary, from taskd scripts/services.sh: no service starts during apt-get\nexit 101\n' >"$POLICY_RC"
		chmod 755 "$POLICY_RC"
		POLICY_RC_CREATED=1
	fi
	local apt=(apt-get -q -o DPkg::Lock::Timeout=300)
	# apt-get's output goes to stderr: stdout carries only the environment.
	# shellcheck disable=SC2086 # $missing is a list of package names
	DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >&2
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends $missing >&2
	if ((POLICY_RC_CREATED)); then
		rm -f "$POLICY_RC"
		POLICY_RC_CREATED=0
	fi

	find_binaries
	missing=$(missing_packages)
	[[ -z $missing ]] || die "still missing after apt-get install: $missing"
}

# ---------------------------------------------------------------------------
# State: $STATE_DIR/tmpdir holds the temporary directory's path; $STATE_DIR/set the
# servers of the set and $STATE_DIR/profile and $STATE_DIR/database what `up` was
# given; $STATE_DIR/servers has one line "kind name port" per process started, whose
# files are in <tmpdir>/<name>/ (pid, log, data).

state_tmpdir() { cat "$STATE_DIR/tmpdir" 2>/dev/null || true; }

# servers prints the recorded "kind name port" lines.
servers() { cat "$STATE_DIR/servers" 2>/dev/null || true; }

# alive PID: the process exists and is not a zombie.
alive() {
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z ]]
}

# server_pid NAME prints the pid of a recorded server if it is still that server.
server_pid() {
	local dir pid expected comm
	dir=$(state_tmpdir)/$1
	pid=$(cat "$dir/pid" 2>/dev/null) || return 1
	expected=$(cat "$dir/comm" 2>/dev/null) || return 1
	alive "$pid" || return 1
	comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
	# Guard against a recycled pid: it must still run the binary we started.
	[[ $comm == "$expected" ]] || return 1
	echo "$pid"
}

# port_in_use PORT: something accepts connections on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# ---------------------------------------------------------------------------
# Health checks

redis_ping() {
	[[ $("$REDIS_CLI" -h "$HOST" -p "$1" ping 2>/dev/null) == PONG ]]
}

cluster_ok() {
	"$REDIS_CLI" -h "$HOST" -p "$1" cluster info 2>/dev/null | grep -q '^cluster_state:ok'
}

# mysql_client PORT ARGS... runs the client as the taskd user over TCP.
mysql_client() {
	local port=$1
	shift
	"$MARIADB" --no-defaults --protocol=tcp -h "$HOST" -P "$port" \
		-u "$MYSQL_USER" -p"$MYSQL_PASSWORD" "$@"
}

# mysql_ok PORT: the server answers the taskd user.
mysql_ok() {
	[[ $(mysql_client "$1" -N -B -e 'SELECT 1' 2>/dev/null) == 1 ]]
}

# check_tmpdir NAME PORT fails unless the server NAME on PORT keeps its temporary
# files in its own directory. A MariaDB that starts removes the temporary tables it
# finds in its tmpdir: in a shared one (/tmp) a server starting beside another
# removes that one's, and a statement of it then fails with "Error on delete of
# '...#sql-temptable-...'".
check_tmpdir() {
	local name=$1 port=$2 want got
	want=$(state_tmpdir)/$name/tmp
	got=$(mysql_client "$port" -N -B -e 'SELECT @@tmpdir' 2>/dev/null) || die "$name: could not read @@tmpdir"
	[[ $got == "$want" ]] || die "$name keeps its temporary files in '$got', not in its own '$want'"
}

# replica_ok PORT: the replica answers and both of its threads run.
replica_ok() {
	local status
	status=$(mysql_client "$1" -e 'SHOW REPLICA STATUS\G' 2>/dev/null) || return 1
	grep -q 'Slave_IO_Running: Yes' <<<"$status" && grep -q 'Slave_SQL_Running: Yes' <<<"$status"
}

# galera_ok PORT: the node answers, is in the primary component, and is synced.
galera_ok() {
	local status
	status=$(mysql_client "$1" -N -B -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_status', 'wsrep_local_state_comment', 'wsrep_ready')" 2>/dev/null) || return 1
	grep -qx $'wsrep_cluster_status\tPrimary' <<<"$status" &&
		grep -qx $'wsrep_local_state_comment\tSynced' <<<"$status" &&
		grep -qx $'wsrep_ready\tON' <<<"$status"
}

# postgres_ok PORT: the server answers the taskd user over TCP.
postgres_ok() {
	[[ $(PGPASSWORD=$POSTGRES_PASSWORD PGCONNECT_TIMEOUT=2 "$PG_BIN/psql" -X -h "$HOST" -p "$1" \
		-U "$POSTGRES_USER" -d "$POSTGRES_DATABASE" -Atc 'SELECT 1' 2>/dev/null) == 1 ]]
}

# server_ok KIND NAME PORT: the recorded server runs and answers.
server_ok() {
	server_pid "$2" >/dev/null || return 1
	case $1 in
	redis) redis_ping "$3" ;;
	cluster) redis_ping "$3" && cluster_ok "$3" ;;
	mariadb) mysql_ok "$3" ;;
	replica) mysql_ok "$3" ;;
	galera) galera_ok "$3" ;;
	postgres) postgres_ok "$3" ;;
	*) return 1 ;;
	esac
}

# expected_processes prints how many processes the set runs: one per port.
expected_processes() {
	local name n=0
	for name in $SELECTED; do
		n=$((n + $("${name}_ports" | wc -l)))
	done
	echo "$n"
}

# all_up: state exists for this set and database, lists every process, and each one
# answers.
all_up() {
	local kind name port n=0
	[[ -d $(state_tmpdir) ]] || return 1
	[[ $(cat "$STATE_DIR/set" 2>/dev/null) == "$SELECTED" ]] || return 1
	[[ $(cat "$STATE_DIR/database" 2>/dev/null) == "$DATABASE" ]] || return 1
	while read -r kind name port; do
		server_ok "$kind" "$name" "$port" || return 1
		n=$((n + 1))
	done < <(servers)
	((n == $(expected_processes)))
}

# ---------------------------------------------------------------------------
# Starting

# show_log NAME prints the end of a server's log to stderr.
show_log() {
	local f
	f=$(state_tmpdir)/$1/server.log
	if [[ -s $f ]]; then
		log "last lines of $f:"
		tail -n 30 "$f" | sed 's/^/    /' >&2
	fi
}

# spawn NAME COMM CMD... starts CMD in the background in its own session (so it
# outlives this script and the terminal's signals), with its output in
# <name>/server.log, and records it. COMM is the process name to expect in /proc.
spawn() {
	local name=$1 comm=$2 dir
	shift 2
	dir=$(state_tmpdir)/$name
	echo "$comm" >"$dir/comm"
	# No job control here, so the child is not a process group leader and setsid
	# execs CMD without forking: $! is the server's own pid.
	setsid "$@" </dev/null >>"$dir/server.log" 2>&1 9>&- &
	echo $! >"$dir/pid"
}

# wait_for NAME CHECK... polls CHECK until it succeeds; fails with the server's log
# if the server exits or does not answer within $TIMEOUT seconds.
wait_for() {
	local name=$1 pid deadline=$((SECONDS + TIMEOUT))
	shift
	pid=$(cat "$(state_tmpdir)/$name/pid")
	until "$@" >/dev/null 2>&1; do
		if ! alive "$pid"; then
			show_log "$name"
			die "$name exited during startup; see its log above ($(state_tmpdir)/$name/server.log)"
		fi
		if ((SECONDS >= deadline)); then
			show_log "$name"
			die "$name did not answer within ${TIMEOUT}s (check: $*); see $(state_tmpdir)/$name/server.log"
		fi
		sleep 0.1
	done
}

# start_redis KIND NAME PORT [extra redis.conf lines...]
start_redis() {
	local kind=$1 name=$2 port=$3 dir
	shift 3
	dir=$(state_tmpdir)/$name
	mkdir -p "$dir"
	{
		echo "# $name, started by taskd scripts/services.sh"
		echo "bind $HOST"
		echo "port $port"
		echo "dir $dir"
		echo "pidfile $dir/redis.pid"
		echo 'daemonize no' # spawn detaches it
		echo 'logfile ""'   # stdout, which spawn sends to server.log
		echo 'save ""'
		echo 'appendonly no'
		printf '%s\n' "$@"
	} >"$dir/redis.conf"
	spawn "$name" redis-server "$REDIS_SERVER" "$dir/redis.conf"
	echo "$kind $name $port" >>"$STATE_DIR/servers"
}

# start_mariadb KIND NAME PORT [extra server options...] initializes a data directory
# and starts a server in it (KIND mariadb for the primary, replica for the replica).
start_mariadb() {
	local kind=$1 name=$2 port=$3 dir
	shift 3
	dir=$(state_tmpdir)/$name
	mkdir -p "$dir/data" "$dir/tmp"
	log "initializing the $name data directory"
	# --no-defaults keeps the system's /etc/mysql config out. Root gets no password
	# and reaches the server only through its private socket. --force skips only its
	# check that the hostname resolves, which fails in bare containers and chroots.
	# Its own tmpdir: a MariaDB that starts removes the temporary tables it finds in
	# its tmpdir, and so would those of another one bootstrapping in a shared /tmp.
	if ! "$MARIADB_INSTALL_DB" --no-defaults --user="$(id -un)" --datadir="$dir/data" \
		--tmpdir="$dir/tmp" --auth-root-authentication-method=normal --skip-test-db --force \
		>>"$dir/server.log" 2>&1; then
		show_log "$name"
		die "mariadb-install-db failed; see $dir/server.log"
	fi

	# Fast and unsafe on purpose: test data may be lost in a crash. The server runs
	# in UTC to match the DSN's loc=UTC, and in utf8mb4 and with interleaved
	# auto-increment locks like a production setup (docs/deployment.md).
	spawn "$name" mariadbd "$MARIADBD" --no-defaults \
		--user="$(id -un)" \
		--datadir="$dir/data" --tmpdir="$dir/tmp" \
		--socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
		--log-error="$dir/server.log" \
		--bind-address="$HOST" --port="$port" \
		--skip-name-resolve \
		--innodb-flush-log-at-trx-commit=2 --innodb-doublewrite=0 \
		--innodb-autoinc-lock-mode=2 \
		--max-connections=1000 \
		--character-set-server=utf8mb4 --default-time-zone=+00:00 "$@"
	echo "$kind $name $port" >>"$STATE_DIR/servers"
}

# setup_mariadb NAME PORT [SQL] creates the taskd user (and, on the primary, the test
# database) through the root socket, runs SQL, and waits until the user gets in.
setup_mariadb() {
	local name=$1 port=$2 extra=${3:-} dir
	dir=$(state_tmpdir)/$name
	wait_for "$name" "$MARIADB_ADMIN" --no-defaults --socket="$dir/mysqld.sock" -u root ping
	# sql_log_bin=0: users are made on each server, never replicated.
	"$MARIADB" --no-defaults --socket="$dir/mysqld.sock" -u root <<-SQL
		SET SESSION sql_log_bin = 0;
		CREATE USER IF NOT EXISTS '$MYSQL_USER'@'127.0.0.1' IDENTIFIED BY '$MYSQL_PASSWORD';
		CREATE USER IF NOT EXISTS '$MYSQL_USER'@'localhost' IDENTIFIED BY '$MYSQL_PASSWORD';
		GRANT ALL PRIVILEGES ON *.* TO '$MYSQL_USER'@'127.0.0.1';
		GRANT ALL PRIVILEGES ON *.* TO '$MYSQL_USER'@'localhost';
		$extra
	SQL
	wait_for "$name" mysql_ok "$port"
}

# as_postgres prints, one a line, the command prefix that runs a program as the
# PostgreSQL user: the postgres system user when root (setpriv execs, so a spawned
# server keeps the pid), else nothing.
as_postgres() {
	if ((EUID == 0)); then
		printf '%s\n' setpriv --reuid="$POSTGRES_OS_USER" --regid="$POSTGRES_OS_USER" --init-groups
	fi
}

# start_postgres initializes a PostgreSQL cluster in the set's directory and starts
# it on POSTGRES_PORT, durable as PostgreSQL's defaults are: every commit waits for
# its WAL to be fsynced (fsync, synchronous_commit, full_page_writes on).
start_postgres() {
	local name=postgres dir as=()
	dir=$(state_tmpdir)/$name
	mkdir -p "$dir"
	mapfile -t as < <(as_postgres)
	if ((EUID == 0)); then
		id "$POSTGRES_OS_USER" >/dev/null 2>&1 || die "no '$POSTGRES_OS_USER' user to run PostgreSQL as (Debian's postgresql package makes it)"
		# The postgres user must reach its directory inside the set's (mode 0700).
		chmod 0711 "$(state_tmpdir)"
		chown "$POSTGRES_OS_USER:" "$dir"
	fi
	(umask 077 && echo "$POSTGRES_PASSWORD" >"$dir/pwfile")
	if ((EUID == 0)); then
		chown "$POSTGRES_OS_USER:" "$dir/pwfile"
	fi
	log "initializing the $name data directory"
	if ! "${as[@]}" "$PG_BIN/initdb" -D "$dir/data" -U "$POSTGRES_USER" --pwfile="$dir/pwfile" \
		--auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C \
		>>"$dir/server.log" 2>&1; then
		show_log "$name"
		die "initdb failed; see $dir/server.log"
	fi
	rm -f "$dir/pwfile"
	spawn "$name" postgres "${as[@]}" "$PG_BIN/postgres" -D "$dir/data" \
		-c listen_addresses="$HOST" -c port="$POSTGRES_PORT" \
		-c unix_socket_directories="$dir" -c max_connections=200 \
		-c fsync=on -c synchronous_commit=on -c full_page_writes=on \
		-c shared_buffers=256MB -c timezone=UTC
	echo "postgres $name $POSTGRES_PORT" >>"$STATE_DIR/servers"
}

# setup_postgres creates the test database once the server takes connections.
setup_postgres() {
	local name=postgres dir
	dir=$(state_tmpdir)/$name
	wait_for "$name" "$PG_BIN/pg_isready" -q -h "$dir" -p "$POSTGRES_PORT"
	if ! "$PG_BIN/psql" -X -q -h "$dir" -p "$POSTGRES_PORT" -U "$POSTGRES_USER" -d postgres \
		-c "CREATE DATABASE $POSTGRES_DATABASE" >>"$dir/server.log" 2>&1; then
		show_log "$name"
		die "creating the PostgreSQL database failed; see $dir/server.log"
	fi
	wait_for "$name" postgres_ok "$POSTGRES_PORT"
}

create_cluster() {
	local nodes=() port
	for port in "${CLUSTER_PORTS[@]}"; do
		nodes+=("$HOST:$port")
	done
	log "creating the Redis Cluster on ${nodes[*]}"
	if ! "$REDIS_CLI" --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes \
		>>"$(state_tmpdir)/cluster-1/server.log" 2>&1; then
		show_log cluster-1
		die "redis-cli --cluster create failed; see $(state_tmpdir)/cluster-1/server.log"
	fi
	local i
	for i in "${!CLUSTER_PORTS[@]}"; do
		wait_for "cluster-$((i + 1))" cluster_ok "${CLUSTER_PORTS[$i]}"
	done
}

# check_ports fails if anything already listens on a port this set needs.
check_ports() {
	local name entry port what
	for name in $SELECTED; do
		while read -r entry; do
			what=${entry%:*}
			port=${entry##*:}
			check_port "$what" "$port"
		done < <("${name}_ports")
	done
}

check_port() {
	if [[ $1 == "cluster node" ]]; then
		check_port "cluster bus" $(($2 + CLUSTER_BUS_OFFSET))
	fi
	port_in_use "$2" || return 0
	log "error: port $2 ($1) on $HOST is already in use by something this script did not start"
	if command -v ss >/dev/null; then
		ss -Hltnp "sport = :$2" | sed 's/^/    /' >&2 || true
	fi
	log "stop it, or use another TASKD_SERVICES_PORT_BASE (now $PORT_BASE)"
	exit 1
}

# The servers: <name>_ports prints "what:port" per process (check_ports adds a
# cluster node's bus port), <name>_start spawns them, <name>_ready waits for them and
# sets them up, <name>_env prints their export lines. Starts come first, in SERVERS
# order, then the waits, so the servers boot in parallel.

redis_ports() { echo "main redis:$REDIS_PORT"; }
redis_start() { start_redis redis redis "$REDIS_PORT"; }
redis_ready() { wait_for redis redis_ping "$REDIS_PORT"; }
redis_env() {
	local redis_server
	redis_server=$(first_cmd redis-server) || redis_server=redis-server
	echo "export TASKD_TEST_REDIS_URL='redis://$HOST:$REDIS_PORT/0'"
	echo "export TASKD_TEST_REDIS_SERVER='$redis_server'"
}

redlock_ports() { printf 'Redlock master:%s\n' "${REDLOCK_PORTS[@]}"; }
redlock_start() {
	local i
	for i in "${!REDLOCK_PORTS[@]}"; do
		start_redis redis "redlock-$((i + 1))" "${REDLOCK_PORTS[$i]}"
	done
}
redlock_ready() {
	local i
	for i in "${!REDLOCK_PORTS[@]}"; do
		wait_for "redlock-$((i + 1))" redis_ping "${REDLOCK_PORTS[$i]}"
	done
}
redlock_env() { echo "export TASKD_TEST_REDLOCK_ADDRS='$(join_addrs "${REDLOCK_PORTS[@]}")'"; }

cluster_ports() {
	local port
	for port in "${CLUSTER_PORTS[@]}"; do
		echo "cluster node:$port"
	done
}
cluster_start() {
	local i
	for i in "${!CLUSTER_PORTS[@]}"; do
		start_redis cluster "cluster-$((i + 1))" "${CLUSTER_PORTS[$i]}" \
			'cluster-enabled yes' \
			"cluster-config-file $(state_tmpdir)/cluster-$((i + 1))/nodes.conf" \
			"cluster-port $((CLUSTER_PORTS[i] + CLUSTER_BUS_OFFSET))" \
			'cluster-node-timeout 5000'
	done
}
cluster_ready() {
	local i
	for i in "${!CLUSTER_PORTS[@]}"; do
		wait_for "cluster-$((i + 1))" redis_ping "${CLUSTER_PORTS[$i]}"
	done
	create_cluster
}
cluster_env() { echo "export TASKD_TEST_REDIS_CLUSTER_ADDRS='$(join_addrs "${CLUSTER_PORTS[@]}")'"; }

# The primary logs every change (ROW, so the replica applies exactly what the
# primary did); the replica applies only taskd_r_* databases. sync_binlog=0
# keeps the log cheap, like the other unsafe settings of start_mariadb.
mariadb_ports() { echo "MariaDB:$MYSQL_PORT"; }
mariadb_start() {
	# shellcheck disable=SC2086 # the options are words, split on purpose
	start_mariadb mariadb mariadb "$MYSQL_PORT" --innodb-buffer-pool-size=512M \
		--server-id=1 --log-bin=mariadb-bin --binlog-format=ROW --sync-binlog=0 \
		${TASKD_SERVICES_MARIADB_OPTIONS:-}
}
mariadb_ready() {
	setup_mariadb mariadb "$MYSQL_PORT" "CREATE DATABASE IF NOT EXISTS \`$DATABASE\`;"
	check_tmpdir mariadb "$MYSQL_PORT"
}
mariadb_env() {
	echo "export TASKD_TEST_MYSQL_DSN='$MYSQL_USER:$MYSQL_PASSWORD@tcp($HOST:$MYSQL_PORT)/$DATABASE?parseTime=true&clientFoundRows=true&loc=UTC&multiStatements=true'"
}

replica_ports() { echo "MariaDB replica:$REPLICA_PORT"; }
replica_start() {
	start_mariadb replica replica "$REPLICA_PORT" --innodb-buffer-pool-size=128M \
		--server-id=2 --skip-log-bin --read-only \
		--replicate-wild-do-table="$REPLICA_DATABASES.%"
}
replica_ready() {
	setup_mariadb replica "$REPLICA_PORT" "
		CHANGE MASTER TO MASTER_HOST='$HOST', MASTER_PORT=$MYSQL_PORT,
			MASTER_USER='$MYSQL_USER', MASTER_PASSWORD='$MYSQL_PASSWORD',
			MASTER_USE_GTID=current_pos, MASTER_CONNECT_RETRY=1;
		START REPLICA;"
	wait_for replica replica_ok "$REPLICA_PORT"
	check_tmpdir replica "$REPLICA_PORT"
}
replica_env() {
	echo "export TASKD_TEST_MYSQL_REPLICA_DSN='$MYSQL_USER:$MYSQL_PASSWORD@tcp($HOST:$REPLICA_PORT)/?parseTime=true&clientFoundRows=true&loc=UTC&multiStatements=true'"
}

# Galera: node 1 bootstraps a new cluster, then nodes 2 and 3 join it, each taking a
# full copy of node 1 by rsync (SST). Every node is a writable primary; a commit is
# certified on all of them before it returns. The unsafe settings of start_mariadb
# hold here too, and Galera needs ROW binary logging (kept in memory: log-bin is off)
# and interleaved auto-increment locks. gcache (the writesets a rejoining node can
# catch up from, IST) is kept small, and so is the memory each node may take: a
# 128 MB buffer pool, and a receive queue (writesets received, not yet applied)
# of at most 1 GB, past which Galera aborts the node (gcs.recv_q_hard_limit;
# unbounded by default) rather than take the machine's memory from the rest.
galera_ports() {
	local i
	for i in "${!GALERA_PORTS[@]}"; do
		echo "Galera node:${GALERA_PORTS[$i]}"
		echo "Galera group communication:${GALERA_GCOMM_PORTS[$i]}"
		echo "Galera IST:${GALERA_IST_PORTS[$i]}"
		echo "Galera SST:${GALERA_SST_PORTS[$i]}"
	done
}
# galera_node_args I prints node I's (0-based) server options, one a line. A causal
# read waits at most 5 s (repl.causal_read_timeout, 30 s by default) for its node to
# catch up, as docs/deployment.md recommends: then answers a lock wait timeout.
galera_node_args() {
	local i=$1 addrs=() port
	for port in "${GALERA_GCOMM_PORTS[@]}"; do
		addrs+=("$HOST:$port")
	done
	local IFS=,
	printf '%s\n' --wsrep-on=ON --wsrep-provider="$GALERA_PROVIDER" \
		--wsrep-cluster-name="taskd-$PORT_BASE" \
		--wsrep-cluster-address="gcomm://${addrs[*]}" \
		--wsrep-node-name="galera-$((i + 1))" \
		--wsrep-node-address="$HOST:${GALERA_GCOMM_PORTS[$i]}" \
		--wsrep-node-incoming-address="$HOST:${GALERA_PORTS[$i]}" \
		--wsrep-sst-method=rsync \
		--wsrep-sst-receive-address="$HOST:${GALERA_SST_PORTS[$i]}" \
		--wsrep-provider-options="base_host=$HOST;base_port=${GALERA_GCOMM_PORTS[$i]};gmcast.listen_addr=tcp://$HOST:${GALERA_GCOMM_PORTS[$i]};ist.recv_addr=$HOST:${GALERA_IST_PORTS[$i]};gcache.size=64M;gcs.recv_q_hard_limit=1G;repl.causal_read_timeout=PT5S;gcache.dir=$(state_tmpdir)/galera-$((i + 1))/data" \
		--binlog-format=ROW --innodb-autoinc-lock-mode=2 \
		--innodb-buffer-pool-size=128M
}
# galera_start spawns node 1, which bootstraps the cluster; the joiners start in
# galera_ready, once it is up.
galera_start() {
	local args=()
	mapfile -t args < <(galera_node_args 0)
	start_mariadb galera galera-1 "${GALERA_PORTS[0]}" "${args[@]}" --wsrep-new-cluster
}
# galera_join I starts node I (0-based) in an empty data directory: its state comes
# from the cluster by SST, users included.
galera_join() {
	local i=$1 name=galera-$(($1 + 1)) dir args=()
	dir=$(state_tmpdir)/$name
	mkdir -p "$dir/data" "$dir/tmp"
	# The SST's rsync daemon writes the copy here; started by root, it runs as
	# nobody (rsyncd.conf's default uid), so nobody owns the directory and may pass
	# through the set's private directory to reach it.
	if ((EUID == 0)); then
		chown nobody "$dir/data"
		chmod 0711 "$(state_tmpdir)"
	fi
	mapfile -t args < <(galera_node_args "$i")
	spawn "$name" mariadbd "$MARIADBD" --no-defaults \
		--user="$(id -un)" \
		--datadir="$dir/data" --tmpdir="$dir/tmp" \
		--socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
		--log-error="$dir/server.log" \
		--bind-address="$HOST" --port="${GALERA_PORTS[$i]}" \
		--skip-name-resolve \
		--innodb-flush-log-at-trx-commit=2 --innodb-doublewrite=0 \
		--max-connections=1000 \
		--character-set-server=utf8mb4 --default-time-zone=+00:00 "${args[@]}"
	echo "galera $name ${GALERA_PORTS[$i]}" >>"$STATE_DIR/servers"
}
galera_ready() {
	# Users and the database are made on node 1 before the others join, so SST
	# copies them; DDL and user statements replicate (TOI) anyway.
	setup_galera_node1
	wait_for galera-1 galera_ok "${GALERA_PORTS[0]}"
	# One joiner at a time: node 1 is the donor of each SST.
	galera_join 1
	wait_for galera-2 galera_ok "${GALERA_PORTS[1]}"
	galera_join 2
	wait_for galera-3 galera_ok "${GALERA_PORTS[2]}"
	local i
	for i in "${!GALERA_PORTS[@]}"; do
		check_tmpdir "galera-$((i + 1))" "${GALERA_PORTS[$i]}"
	done
}
setup_galera_node1() {
	local dir
	dir=$(state_tmpdir)/galera-1
	wait_for galera-1 "$MARIADB_ADMIN" --no-defaults --socket="$dir/mysqld.sock" -u root ping
	"$MARIADB" --no-defaults --socket="$dir/mysqld.sock" -u root <<-SQL
		CREATE USER IF NOT EXISTS '$MYSQL_USER'@'127.0.0.1' IDENTIFIED BY '$MYSQL_PASSWORD';
		CREATE USER IF NOT EXISTS '$MYSQL_USER'@'localhost' IDENTIFIED BY '$MYSQL_PASSWORD';
		GRANT ALL PRIVILEGES ON *.* TO '$MYSQL_USER'@'127.0.0.1';
		GRANT ALL PRIVILEGES ON *.* TO '$MYSQL_USER'@'localhost';
		CREATE DATABASE IF NOT EXISTS \`$DATABASE\`;
	SQL
}
galera_env() {
	echo "export TASKD_TEST_GALERA_DSN='$MYSQL_USER:$MYSQL_PASSWORD@tcp($HOST:${GALERA_PORTS[0]})/$DATABASE?parseTime=true&clientFoundRows=true&loc=UTC&multiStatements=true'"
	echo "export TASKD_TEST_GALERA_ADDRS='$(join_addrs "${GALERA_PORTS[@]}")'"
}

postgres_ports() { echo "PostgreSQL:$POSTGRES_PORT"; }
postgres_start() { start_postgres; }
postgres_ready() { setup_postgres; }
postgres_env() {
	echo "export TASKD_TEST_POSTGRES_URL='postgres://$POSTGRES_USER:$POSTGRES_PASSWORD@$HOST:$POSTGRES_PORT/$POSTGRES_DATABASE?sslmode=disable'"
}

cmd_up() {
	ensure_packages
	if all_up; then
		log "already up (files in $(state_tmpdir))"
		cmd_env
		return 0
	fi
	if [[ -e $STATE_DIR ]]; then
		if [[ -d $(state_tmpdir) && ($(cat "$STATE_DIR/set" 2>/dev/null) != "$SELECTED" ||
			$(cat "$STATE_DIR/database" 2>/dev/null) != "$DATABASE") ]]; then
			log "the set up in $STATE_DIR is another ($(cat "$STATE_DIR/set" 2>/dev/null || echo unknown)); stopping it first"
		else
			log "state in $STATE_DIR is stale (not every server answers); cleaning it up first"
		fi
		cmd_down
	fi

	check_ports

	local start=$SECONDS tmpdir name
	mkdir -p "$STATE_DIR"
	tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/taskd-services-$PORT_BASE.XXXXXX")
	echo "$tmpdir" >"$STATE_DIR/tmpdir"
	echo "$SELECTED" >"$STATE_DIR/set"
	echo "$SELECTED_PROFILE" >"$STATE_DIR/profile"
	echo "$DATABASE" >"$STATE_DIR/database"
	: >"$STATE_DIR/servers"
	STARTING=1
	log "starting $SELECTED in $tmpdir"

	for name in $SELECTED; do
		"${name}_start"
	done
	for name in $SELECTED; do
		"${name}_ready"
	done

	STARTING=0
	log "all up in $((SECONDS - start))s"
	cmd_env
}

# ---------------------------------------------------------------------------
# Stopping

# stop_servers stops every recorded server that still runs: SIGTERM is a clean
# shutdown for both redis-server (nothing to save here) and mariadbd, SIGINT for
# PostgreSQL (whose SIGTERM waits for its clients to leave). It waits for
# them to exit, killing any that take longer than 30 seconds.
stop_servers() {
	local kind name port pid pids=() names=()
	while read -r kind name port; do
		if pid=$(server_pid "$name"); then
			kill "-$([[ $kind == postgres ]] && echo INT || echo TERM)" "$pid" 2>/dev/null || true
			pids+=("$pid")
			names+=("$name")
		fi
	done < <(servers)

	local i deadline=$((SECONDS + 30))
	for i in "${!pids[@]}"; do
		while alive "${pids[$i]}"; do
			if ((SECONDS >= deadline)); then
				log "${names[$i]} (pid ${pids[$i]}) did not stop in 30s; killing it"
				kill -KILL "${pids[$i]}" 2>/dev/null || true
				break
			fi
			sleep 0.1
		done
	done
	# Reap them if they were our children (when a failed `up` stops them).
	wait 2>/dev/null || true
}

cmd_down() {
	if [[ ! -e $STATE_DIR ]]; then
		log "nothing is up (no state in $STATE_DIR)"
		return 0
	fi
	find_binaries
	stop_servers
	local tmpdir
	tmpdir=$(state_tmpdir)
	# Remove only a directory this script made.
	if [[ $tmpdir == "${TMPDIR:-/tmp}"/taskd-services-* || $tmpdir == /tmp/taskd-services-* ]]; then
		rm -rf "$tmpdir"
	fi
	rm -rf "$STATE_DIR"
	log "down"
}

# ---------------------------------------------------------------------------
# Reporting

join_addrs() {
	local IFS=, addrs=() port
	for port in "$@"; do
		addrs+=("$HOST:$port")
	done
	echo "${addrs[*]}"
}

cmd_env() {
	local name
	for name in $SELECTED; do
		"${name}_env"
	done
	if with_tools; then
		echo "export TASKD_TEST_CHROMIUM='$(first_cmd chromium chromium-browser || true)'"
		echo "export TASKD_TEST_FIREFOX='$(first_cmd firefox-esr firefox || true)'"
	fi
}

cmd_status() {
	if [[ ! -e $STATE_DIR ]]; then
		echo "not up (port base $PORT_BASE, no state in $STATE_DIR)"
		return 1
	fi
	find_binaries
	echo "port base $PORT_BASE, profile $SELECTED_PROFILE ($SELECTED), database $DATABASE, state $STATE_DIR, files $(state_tmpdir)"
	local kind name port pid what rc=0
	while read -r kind name port; do
		if ! pid=$(server_pid "$name"); then
			what="not running"
			rc=1
		elif server_ok "$kind" "$name" "$port"; then
			what="pid $pid, answering"
			[[ $kind == cluster ]] && what+=" (cluster_state:ok)"
		else
			what="pid $pid, NOT answering"
			rc=1
		fi
		printf '  %-10s %s:%-6s %s\n' "$name" "$HOST" "$port" "$what"
	done < <(servers)
	return "$rc"
}

usage() {
	echo "usage: $0 up|down|env|status|install" >&2
	exit 2
}

# One command at a time per state directory: a second `up` or `down` waits.
lock() {
	mkdir -p "$(dirname "$STATE_DIR")"
	exec 9>"$STATE_DIR.lock"
	flock -w 600 9 || die "another scripts/services.sh holds $STATE_DIR.lock"
}

[[ $# -eq 1 ]] || usage

# The set: `up` and `install` take the profile given; the others, once something is
# up, the one recorded.
SELECTED_PROFILE=$PROFILE
if [[ $1 != up && $1 != install && -e $STATE_DIR/set ]]; then
	SELECTED=$(cat "$STATE_DIR/set")
	SELECTED_PROFILE=$(cat "$STATE_DIR/profile" 2>/dev/null || echo "$SELECTED")
	DATABASE=$(cat "$STATE_DIR/database" 2>/dev/null || echo "$DATABASE")
else
	SELECTED=$(resolve_profile "$PROFILE")
fi

case $1 in
install) ensure_packages ;;
up)
	lock
	cmd_up
	;;
down)
	lock
	cmd_down
	;;
env) cmd_env ;;
status) cmd_status ;;
*) usage ;;
esac
