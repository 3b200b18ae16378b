package store

// The gold statements, for the EXPLAIN tests.
const (
	GoldPickSQL        = goldPickSQL
	GoldCopyOfSQL      = goldCopyOfSQL
	GoldLastAnswersSQL = goldLastAnswersSQL
	GoldAccuracySQL    = goldAccuracySQL
	GoldCategoriesSQL  = goldCategoriesSQL
	GoldHeldSQL        = goldHeldSQL
	GoldLeftCopiesSQL  = goldLeftCopiesSQL
)
