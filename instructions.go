package taskd

import (
	"context"
	"fmt"
	"os"

	"github.com/taskd/taskd/tasks"
)

// applyInstructions makes the instructions each category's config gives
// (CategoryConfig.Instructions or InstructionsFile) its current version, a
// new one where the text differs.
func (e *Engine) applyInstructions(ctx context.Context) error {
	for i, cc := range e.cfg.Categories {
		body := cc.Instructions
		if cc.InstructionsFile != "" {
			data, err := os.ReadFile(cc.InstructionsFile)
			if err != nil {
				return fmt.Errorf("categories[%d].instructions_file: %w", i, err)
			}
			body = string(data)
		} else if body == "" {
			continue
		}
		in, created, err := e.store.SetInstructions(ctx, cc.Name, body, tasks.InstructionsFromConfig)
		if err != nil {
			return fmt.Errorf("categories[%d] instructions: %w", i, err)
		}
		if created {
			e.log.InfoContext(ctx, "instructions set from config", "category", cc.Name, "version", in.Version)
		}
	}
	return nil
}

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
