package tasks

// UpdateEditorParams are the arguments of UpdateEditor. At least one of Name and
// Categories must be set.
type UpdateEditorParams struct {
	ID int64
	// Name, when not nil, is the new name: as CreateEditorParams.Name.
	Name *string
	// Categories, when not nil, replace the editor's categories: as
	// CreateEditorParams.Categories.
	Categories []string
}
