package tasks

// Revoked is a claim DisableEditor revoked.
type Revoked struct {
	Ended
	// Fence is the fence of the revoked claim; the task's fence is now past it.
	Fence int64
}
