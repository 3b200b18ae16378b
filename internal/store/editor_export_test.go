package store

// Editor queries whose plans and reads the editor tests check.
const (
	ListEditorsSQL   = listEditorsSQL
	TodayCountsSQL   = todayCountsSQL
	EditorCountsSQL  = editorCountsSQL
	ClaimToSubmitSQL = claimToSubmitSQL
)
