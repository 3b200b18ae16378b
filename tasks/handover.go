package tasks

// Handover is what SubmitAndClaim did: the claim it ended, and the claim it
// made or why it made none.
type Handover struct {
	// Ended is the submitted claim.
	Ended *Ended
	// Claim is the new claim, nil if the store refused it.
	Claim *Claim
	// Refused says why the store refused the new claim: ErrStale, ErrSkipped,
	// ErrPaused, ErrLimited, ErrEditorDisabled or ErrEditorBusy, as Claim would. Nil when
	// Claim is not.
	Refused error
}
