package tasks

// UpdateEditorParams are the arguments of UpdateEditor. At least one field but ID
// must be set.
type UpdateEditorParams struct {
	ID int64
	// Name, when not nil, is the new name: as CreateEditorParams.Name.
	Name *string
	// Categories, when not nil, replace the editor's categories: as
	// CreateEditorParams.Categories.
	Categories []string
	// Capacity, when not nil, is the new capacity: 1..MaxCapacity. Claims held
	// beyond a lowered capacity are kept; no new one is made until the editor
	// holds fewer.
	Capacity *int
	// Stages, when not nil, replace the editor's stage limits (an empty map
	// lifts them all): as CreateEditorParams.Stages. When nil, new Categories
	// keep the limits of the categories that stay.
	Stages map[string][]string
}
