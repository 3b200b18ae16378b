package tasks

// EditorLoad is what an editor may hold and holds: its capacity, its stage
// limits and its live claims counted, as a listing of editors shows them.
type EditorLoad struct {
	// Capacity is how many claims the editor may hold at once (Editor.Capacity).
	Capacity int
	// Stages are the editor's stage limits (Editor.Stages); nil without any.
	Stages map[string][]string
	// Holding counts the editor's live claims (assigned, lease not passed).
	Holding int
}
