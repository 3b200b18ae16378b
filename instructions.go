package taskd

import (
	"context"

	"github.com/taskd/taskd/tasks"
)

// The API's reads and writes of the categories' instructions go to the store.

func (s apiStore) SetInstructions(ctx context.Context, category, body, source string) (tasks.Instructions, bool, error) {
	return s.store.SetInstructions(ctx, category, body, source)
}

func (s apiStore) Instructions(ctx context.Context, category string, version int) (*tasks.Instructions, error) {
	return s.store.Instructions(ctx, category, version)
}

func (s apiStore) InstructionVersions(ctx context.Context, category string) ([]tasks.Instructions, error) {
	return s.store.InstructionVersions(ctx, category)
}

func (s apiStore) LatestInstructions(ctx context.Context) (map[string]int, error) {
	return s.store.LatestInstructions(ctx)
}

func (s apiStore) ConfirmInstructions(ctx context.Context, editorID int64, category string, version int) error {
	return s.store.ConfirmInstructions(ctx, editorID, category, version)
}

func (s apiStore) EditorInstructions(ctx context.Context, editorID int64, categories []string) ([]tasks.EditorInstructions, error) {
	return s.store.EditorInstructions(ctx, editorID, categories)
}

func (s apiStore) UnconfirmedInstructions(ctx context.Context, editorID int64, categories []string) ([]string, error) {
	return s.store.UnconfirmedInstructions(ctx, editorID, categories)
}
