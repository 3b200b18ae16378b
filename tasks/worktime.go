package tasks

import "time"

// Working time: the time an editor was present and active on a claim, as the
// workspace measures it (the tab visible, and a key, click, touch or pointer
// move within the last ActiveWindow), bounded by the server. It is not the wall
// time between claim and submit. See docs/working-time.md.

const (
	// ActiveWindow is how long after an editor's last input the workspace
	// still counts the editor as present: past it, the clock stops (and the
	// workspace sends no heartbeats).
	ActiveWindow = 2 * time.Minute
	// WorkingTimeDaysDefault is the window the per-editor figures cover when
	// none is asked for, and WorkingTimeDaysMax the longest one.
	WorkingTimeDaysDefault = 14
	WorkingTimeDaysMax     = 90
	// ActiveMSMax is the most a client may report for one claim (a day); a
	// larger active_ms is refused as invalid.
	ActiveMSMax = int64(24 * time.Hour / time.Millisecond)
)

// ClaimOutcome is how a claim whose time is recorded ended.
type ClaimOutcome string

const (
	// OutcomeSubmitted: the claim ended with an accepted submit.
	OutcomeSubmitted ClaimOutcome = "submitted"
	// OutcomeReleased: the claim was given back (a release or a skip).
	OutcomeReleased ClaimOutcome = "released"
)

// ActiveBound is the most active time counted heartbeats allow a claim:
// (beats + 2) intervals, one before the first heartbeat and one after the last
// (and the slack of heartbeats that come a little later than every). A client
// that is present sends a heartbeat every interval, so an honest figure is
// never cut; one that reports time it sent no heartbeats for is.
func ActiveBound(beats int64, every time.Duration) time.Duration {
	return time.Duration(beats+2) * every
}

// ClaimTimeParams records the active time of an editor's claim that has just
// ended (see Store.RecordClaimTime).
type ClaimTimeParams struct {
	TaskID, Fence, EditorID int64
	Outcome                 ClaimOutcome
	// Reported is the active time the client measured, 0..ActiveMSMax ms.
	Reported time.Duration
	// Beats is how many heartbeats of the claim were counted, and Bound the
	// most they allow (ActiveBound); Bound 0 when none were counted (no
	// counter configured): then only the claim's wall time bounds Reported.
	Beats int64
	Bound time.Duration
}

// ClaimTimeRecorded is what RecordClaimTime kept of a claim: the task's
// category and the active time kept (at most what was reported).
type ClaimTimeRecorded struct {
	Category string
	Active   time.Duration
}

// WorkingTime is an editor's working time over a window of UTC days, from the
// claims it ended that were measured (a claim ended by a client that reports
// no active time has none, and is not in these figures).
type WorkingTime struct {
	// Since is the window's first day (00:00 UTC by the database clock); Days
	// how many days it has, today the last.
	Since time.Time
	Days  int
	// Total is over every category; Categories per category, by name.
	Total      WorkingFigures
	Categories []CategoryWorkingTime
	// Daily has one entry per day of the window, oldest first, a day without
	// work included.
	Daily []DayWorkingTime
}

// WorkingFigures are the figures of a set of measured claims.
type WorkingFigures struct {
	// Active is their active time.
	Active time.Duration
	// Submitted and Released count the claims by how they ended.
	Submitted, Released int
	// Reviewed counts the submits a later stage has decided on (the next
	// result of the task, at the next stage), and SentBack those it sent back.
	Reviewed, SentBack int
	// GoldAccuracy is the share of gold tasks answered right: always nil
	// until gold tasks are scored.
	GoldAccuracy *float64
}

// TasksPerActiveHour is Submitted per hour of Active, and false when there
// was no active time.
func (f WorkingFigures) TasksPerActiveHour() (float64, bool) {
	if f.Active <= 0 {
		return 0, false
	}
	return float64(f.Submitted) / f.Active.Hours(), true
}

// SendBackRate is SentBack / Reviewed, and false when nothing was reviewed.
func (f WorkingFigures) SendBackRate() (float64, bool) {
	if f.Reviewed == 0 {
		return 0, false
	}
	return float64(f.SentBack) / float64(f.Reviewed), true
}

// CategoryWorkingTime is an editor's working time in one category.
type CategoryWorkingTime struct {
	Category string
	WorkingFigures
	// Stages has the median active time of the submits per stage, by stage.
	Stages []StageWorkingTime
}

// StageWorkingTime is the median active time of an editor's submits at one
// stage (0 and no name for a task without stages).
type StageWorkingTime struct {
	Stage     int
	StageName string
	Submitted int
	Median    time.Duration
}

// DayWorkingTime is one UTC day's active time and submits.
type DayWorkingTime struct {
	Day       time.Time
	Active    time.Duration
	Submitted int
}
