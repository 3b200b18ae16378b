package api

import "context"

// EditorChange is what changed about an editor, for EditorChanged.
type EditorChange int

// The changes EditorChanged knows.
const (
	EditorRenamed    EditorChange = iota // its name only
	EditorCategories                     // its categories (and maybe its name)
	EditorEnabled                        // enabled again
	EditorDisabled                       // disabled
	EditorToken                          // given a new token
)

// EditorChanged brings this process's API in step with a change to editor
// id made outside its routes (through the engine's methods; the routes do
// this themselves): the API forgets the editor it remembered, so that its
// next request authenticates anew; new categories end the long polls the
// editor holds here (answered 204, so that its next poll waits on the new
// ones); a disable or a new token ends its page sessions. It returns the
// error of ending the sessions.
func (h *Handler) EditorChanged(ctx context.Context, id int64, c EditorChange) error {
	return h.a.editorChanged(ctx, id, c)
}

// editorChanged is EditorChanged, and what the editor routes do after their
// write.
func (a *api) editorChanged(ctx context.Context, id int64, c EditorChange) error {
	a.editors.forget(id)
	switch c {
	case EditorCategories:
		a.polls.end(id, errPollCategories)
	case EditorDisabled, EditorToken:
		return a.endSessions(ctx, id)
	}
	return nil
}
