package store

// The stage counts', group's and editor loads' queries, for the plan checks
// in package store_test.
const (
	StatsByStageSQL = statsByStageSQL
	GroupTasksSQL   = groupTasksSQL
	EditorLoadsSQL  = editorLoadsSQL
)
