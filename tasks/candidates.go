package tasks

// CandidatesParams are the arguments of Candidates.
type CandidatesParams struct {
	// Categories to read from, at most MaxCategories; duplicates are ignored. No
	// categories, no candidates.
	Categories []string
	// EditorID, when not 0, leaves out tasks this editor skipped until the skip passes.
	EditorID int64
	// Limit is the number of candidates to return: 1..CandidatesLimitMax, 0 means
	// CandidatesLimitDefault.
	Limit int
	// Primary reads the primary even when the store has a replica: for a read
	// after the replica's candidates were refused as stale.
	Primary bool
	// Stage, when not empty, reads only tasks at that stage (a stage name, see
	// Workflow.Stages) in each of Categories: the candidates of an editor
	// limited to some stages of a category. Empty: tasks at any stage.
	Stage string
	// Ending is how many claims of the caller's own the claim these
	// candidates are for ends first, in its own transaction (a worker
	// that completes and claims at once): the candidates of a category
	// with a MaxInFlight (Workflow) are then read while it has up to as
	// many more assigned, the room those claims leave once ended. Default
	// 0: none. The claim keeps the limit whatever the candidates.
	Ending int
}
