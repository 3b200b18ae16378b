package chaos

import (
	"slices"
	"time"
)

// Hedged re-offers in the workflow pass: desk and rush hedge, their tasks
// are due hedgeDueIn after they are made, well within hedgeBeforeDue, and a
// holder is inactive after hedgeInactiveFor without a heartbeat. A hedge is
// offered to an editor that finds nothing in the pool: rush's editors, who
// take no other category and whose pool is small, often do (and every editor
// in the drain), so a rush or desk claim whose editor walked away from it,
// stepped away with it in hand or keeps it while it works its others is
// offered to one more editor. The hedger works its hedge as any assignment
// (submit, heartbeat, release, walk away); a submit takes the task over from
// its holder, and whoever submits second is refused 409 done_by_other.
//
// An editor's hedges are logged apart from its claims: a hedge's fence is
// its holder's plus one, the fence the task's next claim gets when the hedge
// ends without a win, so a hedge is a claim only once its takeover's
// 'claimed' event (detail "hedge") names it. The checks hold that
//
//   - a takeover's claim is the editor's the hedge was offered to;
//   - a hedged slot has one accepted result: never the holder's (fence - 1)
//     beside the takeover's;
//   - every write refused done_by_other lost: a hedge's to the holder's
//     result at the fence below it, a claim's to a takeover that ended it
//     (its 'released' event with detail "hedge"), and the refused editor has
//     no result there;
//   - a claim walked away from ended by expiry or by a takeover, and a hedge
//     walked away from never took its task over.
const (
	hedgeBeforeDue   = 10 * time.Minute
	hedgeDueIn       = 5 * time.Minute
	hedgeInactiveFor = time.Second
)

// hedgeConfig is a hedged category's hedge in config.yaml.
var hedgeConfig = "    hedge: {before_due: " + hedgeBeforeDue.String() + ", inactive_for: " + hedgeInactiveFor.String() + "}\n"

// HedgeCounts are what the hedges of a run did.
type HedgeCounts struct {
	// Taken counts the hedges the editors were offered; Won those that
	// took their task over (a takeover's 'claimed' event), Submitted those
	// whose result was accepted.
	Taken     int64 `json:"taken"`
	Won       int64 `json:"won"`
	Submitted int64 `json:"submitted"`
	// HolderRefused counts the holders' writes refused done_by_other (a
	// hedge won), HedgerRefused the hedgers' (the holder won).
	HolderRefused int64 `json:"holders_refused_done_by_other"`
	HedgerRefused int64 `json:"hedgers_refused_done_by_other"`
}

// editorRef is a claim (or hedge) named by one of an editor's writes.
type editorRef struct {
	claimRef
	editor int64
	hedge  bool // the ref is a hedge the editor was offered
}

// hedgeFindings is what hedgeFacts found.
type hedgeFindings struct {
	counts   HedgeCounts
	checked  int64
	findings []finding
	refusals []editorRef
}

// hedgeFacts counts the editors' hedges and checks their takeovers and
// results against the audit trail (see the top of this file); it returns
// the done_by_other refusals for checkDoneByOther.
func hedgeFacts(editors []*editor, claims map[claimRef]*claimHistory, resultAt map[claimRef]resultRow) hedgeFindings {
	const name = "hedges: taken over only by their editor, one result per hedged slot"
	var out hedgeFindings
	// A hedge's fence is its holder's + 1: hedges offered one after the
	// other while the holder keeps the task (one expired, the next taken)
	// share it, each editor's own.
	offered := map[editorRef]bool{}
	for _, e := range editors {
		for _, ref := range e.log.hedges {
			offered[editorRef{claimRef: ref, editor: e.id}] = true
		}
	}
	for _, e := range editors {
		for _, ref := range e.log.hedges {
			out.checked++
			out.counts.Taken++
			c := claims[ref]
			if c == nil || !c.takeover {
				continue
			}
			if c.editor != e.id {
				if !offered[editorRef{claimRef: ref, editor: c.editor}] {
					out.findings = append(out.findings, found(name, "editor %d's hedge of task %d fence %d was taken over by editor %d, never offered it", e.id, ref.Task, ref.Fence, c.editor))
				}
				continue
			}
			out.counts.Won++
			if r, ok := resultAt[ref]; ok && r.editor == e.id {
				out.counts.Submitted++
			}
		}
		for _, ref := range e.log.doneByOther {
			hedge := slices.Contains(e.log.hedges, ref)
			out.refusals = append(out.refusals, editorRef{claimRef: ref, editor: e.id, hedge: hedge})
			if hedge {
				out.counts.HedgerRefused++
			} else {
				out.counts.HolderRefused++
			}
		}
	}
	for ref, c := range claims {
		if !c.takeover {
			continue
		}
		if r, ok := resultAt[claimRef{ref.Task, ref.Fence - 1}]; ok {
			out.findings = append(out.findings, found(name, "task %d: a result of the holder's claim (fence %d, editor %d) and a takeover by a hedge at fence %d (editor %d)",
				ref.Task, ref.Fence-1, r.editor, ref.Fence, c.editor))
		}
	}
	return out
}

// checkDoneByOther checks each write refused with done_by_other (the two
// editors of a hedged task: see tasks.Hedge): the refused editor has no
// result at the refused fence, and the other side won it: for a hedge, the
// holder's result at the fence below it, by another editor; for a claim, a
// takeover by a hedge ended it (its 'released' event with detail "hedge").
// A hedge's fence is its holder's plus one, and both sides' writes need the
// holder's fence, so each task slot has one accepted result whichever wins.
func checkDoneByOther(refusals []editorRef, resultAt map[claimRef]resultRow, claims map[claimRef]*claimHistory) (int64, []finding) {
	const name = "done_by_other only when the other editor of a hedged task won the slot"
	var fs []finding
	for _, r := range refusals {
		if res, ok := resultAt[r.claimRef]; ok && res.editor == r.editor {
			fs = append(fs, found(name, "editor %d was refused done_by_other for task %d fence %d, where its result was kept", r.editor, r.Task, r.Fence))
			continue
		}
		if r.hedge {
			if res, ok := resultAt[claimRef{r.Task, r.Fence - 1}]; !ok || res.editor == r.editor {
				fs = append(fs, found(name, "editor %d's hedge of task %d fence %d was refused done_by_other, but the holder's claim (fence %d) has no result of another editor",
					r.editor, r.Task, r.Fence, r.Fence-1))
			}
			continue
		}
		if c := claims[r.claimRef]; c == nil || c.editor != r.editor || !hedgedAway(c.end) {
			fs = append(fs, found(name, "editor %d's claim of task %d fence %d was refused done_by_other, but no hedge's takeover ended it", r.editor, r.Task, r.Fence))
		}
	}
	return int64(len(refusals)), fs
}
