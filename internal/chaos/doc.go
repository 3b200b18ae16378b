// Package chaos is taskd's own fault suite. It starts private servers (a
// redis-server and a MariaDB made with mariadb-install-db, each on a free
// loopback port, killable and restartable), runs the real `taskd serve`
// binary as three replicas (Config.Replicas), and drives simulated editors
// over the HTTP API, each request to the replicas in turn, while it injects
// faults:
//
//   - every replica killed (kill -9) and restarted;
//   - one replica killed while the others serve and sweep;
//   - the replica running a purge batch killed in it (see purge.go: the
//     replicas run with a retention of seconds, so purging goes on under
//     every fault);
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
// rsync SST), replica a lists the nodes 1, 2, 3, replica b 2, 3, 1 and
// replica c 3, 1, 2 in their DSN's tcp(...), and the faults are the
// cluster's:
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
// With Config.Workflow (cmd/chaos -workflow) the faults are the same, and
// the editors' work is an editorial workflow, declared in a
// config.yaml the harness gives taskd (dispatch.fair_share on): "desk",
// whose tasks go through the stages edit and review, reviewers sending a
// quarter back with notes (send_back_hold 3s); "labels", whose tasks each
// ask three editors for a label (overlap 3; labels from a small set, so
// that some groups agree); and "plain". Editors are created with a
// capacity of 1, 2 or 3 claims, and ask for work until they hold it, then
// work their claims in random order; every fifth is limited to desk's
// review stage. Whether the API takes a submit's decision is asked at
// setup (a submit of no task with a decision: 400 for an unknown field);
// without, reviewers approve by submitting. Desk and rush (a few tasks,
// editors of its own) hedge (hedges.go): their tasks are due soon and a
// holder is inactive after 1s, so claims editors walked away from, stepped
// away with or keep while working others are offered to one more editor,
// and the first submit wins.
//
// Then the editors drain the pool and Run checks the database and the
// editors' records, for either workload:
//
//   - every task done, with a result at its current fence;
//   - each task's results, in fence order, follow its workflow: the first
//     at stage 0, the next one stage on after an approve and one back
//     after a send_back, none past the last stage, so each visit of a
//     stage has one result (task_results' key (task_id, fence) makes one
//     result per claim a database fact); a done task's last result at its
//     last stage;
//   - each result by the editor the audit trail says claimed its fence;
//     every acknowledged submit kept, as its editor's;
//   - no editor above its capacity (editors.capacity; task_events in id
//     order), no fence claimed twice; no editor holding two tasks of one
//     group, nor taking one after it submitted another (task_events), nor
//     with results in two (task_results);
//   - four eyes: no editor with results at two stages of a task, nor
//     claiming a stage of a task after its result at another; each claim of
//     a task with stages at a stage the editor's categories give it (the
//     claim's stage is where the task's earlier results led);
//   - a task sent back first claimed by the editor of the latest result at
//     the stage it went back to, or after its category's send_back_hold
//     (workflow pass);
//   - no pending or assigned task purged, none before its retention; no
//     result, event or skip without its task; the results feed's cursors
//     increasing with no silent gap (a 410 cursor_expired where results
//     were purged); a late write's 404 only about a purged task (purge.go);
//   - never more claims of the limited category (cat0, max_in_flight
//     Config.InFlightLimit, in the default workload and on Galera) live at
//     once than its limit, across the replicas (checkInFlight; task_events
//     in time order; a taskd without max_in_flight runs it unlimited, and
//     the check then reports what it finds: see inflight.go);
//   - every claim an editor got its own in the audit trail; every expired
//     claim back in the pool within sweep.interval plus a slack of its
//     lease end (or of the end of a fault that covered it), on the database
//     clock; every claim an editor walked away from ended by expiry (or by
//     a hedge's takeover);
//   - hedges (workflow pass): each takeover by the editor its hedge was
//     offered to, never the holder's result beside a takeover's, and every
//     409 done_by_other lost to the other side's result or takeover
//     (hedges.go).
//
// Run returns a Report with per-fault counts (503s, time to the first
// success after recovery, assignments, submits, stale refusals, violations).
// TestChaos runs each fault once, TestChaosGalera each Galera fault; the
// workflow pass, about as long as TestChaos, is left to `make chaos`, which
// runs cmd/chaos three times: as is, -galera and -workflow. With -soak,
// cmd/chaos runs the faults in a loop for `make soak`.
package chaos
