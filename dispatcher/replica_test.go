package dispatcher_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

// replicaFault is a fault of the replica during a 200-editor run: it starts
// after a second and lasts a few seconds, and undo ends it.
type replicaFault struct {
	name     string
	do, undo func(t *testing.T, r *storetest.Replicated)
}

// TestConcurrentEditorsWithReplicaFaults: candidates come from a replica
// that falls seconds behind (its SQL thread stopped) or hangs, under 200
// editors. No task is committed twice, and tasks keep being handed out
// during the fault, the primary answering what the replica cannot.
func TestConcurrentEditorsWithReplicaFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("long concurrent run")
	}
	for _, f := range []replicaFault{
		{
			name: "lagging",
			do: func(t *testing.T, r *storetest.Replicated) {
				// Every replicated database stops: other tests that wait for
				// the replica wait these few seconds too.
				if _, err := r.ReplicaAdmin.Exec("STOP REPLICA SQL_THREAD"); err != nil {
					t.Errorf("stop the replica's SQL thread: %v", err)
				}
			},
			undo: func(t *testing.T, r *storetest.Replicated) {
				if _, err := r.ReplicaAdmin.Exec("START REPLICA SQL_THREAD"); err != nil {
					t.Errorf("start the replica's SQL thread: %v", err)
				}
			},
		},
		{name: "hung"}, // do and undo freeze and thaw a proxy, set below
	} {
		t.Run(f.name, func(t *testing.T) {
			r := storetest.NewReplicated(t)
			replica := r.Replica
			if f.do == nil {
				cfg, err := mysql.ParseDSN(r.ReplicaDSN)
				if err != nil {
					t.Fatal(err)
				}
				proxy := testenv.StartProxy(t, cfg.Addr)
				cfg.Addr = proxy.Addr()
				if replica, err = store.Open(t.Context(), cfg.FormatDSN()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = replica.Close() })
				f.do = func(*testing.T, *storetest.Replicated) { proxy.Freeze() }
				f.undo = func(*testing.T, *storetest.Replicated) { proxy.Thaw() }
			}
			t.Cleanup(func() { f.undo(t, r) }) // whatever happens
			const lease = time.Second
			b := setup(t, setupOpts{
				DB:         r.Primary,
				Store:      store.Config{Replica: replica, ReplicaTimeout: 300 * time.Millisecond, ReplicaRest: time.Second},
				Dispatcher: dispatcher.Config{Lease: lease},
			})
			var before, during atomic.Int64
			var undone atomic.Bool
			tl := runEditors(t, b, run{
				editors: 200, tasks: 5000, categories: 10, duration: 6 * time.Second, lease: lease,
				enough: func(*tally) bool { return undone.Load() },
				chaos: func(ctx context.Context) {
					// A second of normal work, and on a slow machine until
					// some assignments went through before the fault.
					for ready := time.After(time.Second); ; {
						select {
						case <-ctx.Done():
							return
						case <-ready:
							ready = nil
						case <-time.After(10 * time.Millisecond):
						}
						if ready == nil && b.D.Stats().Assignments > 0 {
							break
						}
					}
					before.Store(b.D.Stats().Assignments)
					f.do(t, r)
					// The fault lasts 3 s, and on a slow machine until 100
					// assignments went through it (the run's enoughWait).
					faultEnd := time.After(3 * time.Second)
				fault:
					for {
						select {
						case <-ctx.Done():
							break fault
						case <-faultEnd:
							if b.D.Stats().Assignments-before.Load() >= 100 {
								break fault
							}
							faultEnd = time.After(50 * time.Millisecond)
						}
					}
					during.Store(b.D.Stats().Assignments - before.Load())
					f.undo(t, r)
					undone.Store(true)
				},
			})
			awaitQuiet(t, b)
			checkInvariants(t, b)
			c := b.D.Stats()
			t.Logf("replica %s: assignments %d (%d before the fault, %d during it), submits %d, refused claims %d, refused stale writes %d",
				f.name, c.Assignments, before.Load(), during.Load(), tl.submits.Load(), c.RefusedClaims, c.RefusedWrites)
			if n := tl.staleAccepted.Load(); n != 0 {
				t.Errorf("%d late submits accepted", n)
			}
			if during.Load() < 100 {
				t.Errorf("only %d assignments while the replica was %s: assignment stalled", during.Load(), f.name)
			}
			if before.Load() == 0 {
				t.Errorf("no assignments before the fault")
			}
		})
	}
}
