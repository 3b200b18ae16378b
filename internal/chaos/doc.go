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
// With Config.Galera (cmd/chaos -galera) the store is instead a private
// 3-node MariaDB Galera cluster (node 1 bootstraps, nodes 2 and 3 join by
// rsync SST), replica a lists the nodes 1, 2, 3 and replica b 2, 3, 1 in
// their DSN's tcp(...), and the faults are the cluster's:
//
//   - node 2 killed (kill -9) under load: b moves to node 3 (its time to the
//     first write that succeeds is reported), then node 2 starts again on its
//     data directory and catches up by IST;
//   - node 1 frozen (SIGSTOP) past the answer bound: the cluster may stall,
//     and every request must still be answered within the bound;
//   - node 1 cut off from the other two (gmcast.isolate): it leaves the
//     primary component and refuses every query; taskd answers 503 there,
//     never 500, and a moves to node 2; then the node comes back.
//
// Event ids are allocated per node on Galera, so there the audit trail is
// read in time order, and a claim counts as ended when its end event is of
// the same millisecond as the editor's next claim.
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
// TestChaos runs each fault once, TestChaosGalera each Galera fault; cmd/chaos runs it from `make chaos` and,
// with -soak, in a loop for `make soak`.
package chaos
