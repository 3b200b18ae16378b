// Package chaos is taskd's own fault suite. It starts private servers (a
// redis-server and a MariaDB made with mariadb-install-db, each on a free
// loopback port, killable and restartable), runs the real `taskd serve`
// binary as two replicas, and drives simulated editors over the HTTP API
// while it injects faults:
//
//   - every replica killed (kill -9) and restarted;
//   - one of two replicas killed while the other serves and sweeps;
//   - Redis killed and restarted empty;
//   - MariaDB killed (kill -9) and restarted on its data;
//   - a replica frozen (SIGSTOP) past the lease with writes about its claims
//     waiting in its sockets, then resumed: each must be refused;
//   - Redis and MariaDB hung (SIGSTOP) longer than the answer bound: every
//     request must still be answered, 503 with Retry-After, within its wait
//     plus Config.RequestBound;
//   - a burst of hostile requests, each of which must be answered 4xx and
//     change no table (row counts and CHECKSUM TABLE before and after).
//
// Then the editors drain the pool and Run checks the database and the
// editors' records: at most one accepted result per task and the result of
// a done task at its current fence; every acknowledged submit kept; no
// editor holding two claims (task_events in id order); every claim an editor
// got its own in the audit trail; every expired claim back in the pool
// within sweep.interval plus a slack of its lease end (or of the end of a
// fault that covered it), on the database clock; every task done.
//
// Run returns a Report with per-fault counts (503s, time to the first
// success after recovery, assignments, submits, stale refusals, violations).
// TestChaos runs each fault once; cmd/chaos runs it from `make chaos` and,
// with -soak, in a loop for `make soak`.
package chaos
