package dispatcher_test

import (
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
)

// TestConcurrentEditorsOnGalera is the safety run on a Galera cluster: three
// dispatchers, each on its own node, sharing Redis, and every call of an
// editor sent to one of them at random, as a load balancer in front of three
// replicas does. Every promise holds as on one server, and no editor is told
// that its own claim was never its own.
func TestConcurrentEditorsOnGalera(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long concurrent run")
	}
	g := storetest.NewGalera(t)
	const lease = time.Second
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{Lease: lease}, DB: g.Nodes[0]})
	var stores []*store.Store
	for _, db := range g.Nodes[1:] {
		st, err := store.New(db, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	tl := runEditors(t, b, run{editors: 40, tasks: 2000, categories: 3, duration: 4 * time.Second, lease: lease,
		replicas: 3, stores: stores, spread: true, enough: submitted(100)})
	// Event ids are allocated per node (auto_increment_offset), so they do
	// not follow the order of commits; their times do, but a submit and the
	// claim of the next task share one. An abandoned claim's end is recorded
	// by whoever claims its task next, possibly after its editor's next
	// claim, on another node.
	checkInvariantsInOrder(t, b, "`at`, kind = 'claimed', id", lease)
	assignments, conflicts, refusedClaims, refusedWrites := tl.counters()
	t.Logf("claims %d (assignments %d), submits %d, releases %d, abandons %d; lock conflicts %d, refused claims %d, refused stale writes %d",
		tl.claims.Load(), assignments, tl.submits.Load(), tl.releases.Load(), tl.abandons.Load(),
		conflicts, refusedClaims, refusedWrites)
	if tl.submits.Load() < 100 {
		t.Errorf("only %d submissions in the run: the dispatchers are stalling", tl.submits.Load())
	}
	if n := tl.staleAccepted.Load(); n != 0 {
		t.Errorf("%d late submits accepted", n)
	}
}
