package store

const (
	QueueOldestSQL  = queueOldestSQL
	QueueOverdueSQL = queueOverdueSQL
)
