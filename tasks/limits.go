package tasks

import (
	"time"
)

// Limits enforced by the store.
const (
	// LeaseMin is the shortest lease a claim or heartbeat may ask for. Leases are
	// truncated to whole milliseconds, the precision of the DATETIME(3) columns.
	LeaseMin = time.Millisecond
	// MaxCategories bounds the categories of one editor and of one Candidates call,
	// which reads one index range per category.
	MaxCategories = 64
	// CandidatesLimitDefault and CandidatesLimitMax bound CandidatesParams.Limit.
	CandidatesLimitDefault = 16
	CandidatesLimitMax     = 1000
	// RecycleLimitDefault and RecycleLimitMax bound RecycleParams.Limit.
	RecycleLimitDefault = 1000
	RecycleLimitMax     = 10000
	// LiveLeasesLimitDefault and LiveLeasesLimitMax bound LiveLeasesParams.Limit.
	LiveLeasesLimitDefault = 1000
	LiveLeasesLimitMax     = 10000
)
