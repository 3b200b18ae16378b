package store

// Queries of the results feed whose plans TestResultsQueryPlans checks.
const (
	ResultsSQL           = resultsSQL
	UnnumberedResultsSQL = unnumberedResultsSQL
	CountResultsSQL      = countResultsSQL
)
