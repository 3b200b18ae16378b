package api

import (
	"context"
	"errors"
	"sync"
)

// MaxPollsPerEditorDefault is Config.MaxPollsPerEditor when zero.
const MaxPollsPerEditorDefault = 4

// errPollReplaced is the cause of a long poll's context ended because its
// editor opened more than Config.MaxPollsPerEditor: it is answered 204.
var errPollReplaced = errors.New("long poll replaced by a newer one of the same editor")

// errPollCategories is the cause of a long poll's context ended because its
// editor's categories changed: it is answered 204, and the editor's next
// poll waits for its new categories.
var errPollCategories = errors.New("long poll ended: the editor's categories changed")

// pollEnded reports whether cause ended a long poll that is to be answered
// 204, as one that found nothing.
func pollEnded(cause error) bool {
	return errors.Is(cause, errPollReplaced) || errors.Is(cause, errPollCategories)
}

// polls bounds the long polls each editor holds open in this process: when
// an editor opens one more than the bound, its oldest ends, answered 204 No
// Content ("nothing now, ask again"), which every client handles already,
// and the newest, the one a client that lost track of its polls is waiting
// on, goes on. The bound is per process: behind a load balancer, an editor
// may hold the bound on each replica.
type polls struct {
	max int // at most this many per editor; 0: no bound

	mu       sync.Mutex
	byEditor map[int64][]*poll // oldest first
}

type poll struct{ end context.CancelCauseFunc }

func newPolls(max int) *polls {
	return &polls{max: max, byEditor: make(map[int64][]*poll)}
}

// hold registers a long poll of editor id, ended with errPollReplaced by
// end should the editor open too many; call done when it returns.
func (p *polls) hold(id int64, end context.CancelCauseFunc) (done func()) {
	if p.max <= 0 {
		return func() {}
	}
	me := &poll{end: end}
	p.mu.Lock()
	list := p.byEditor[id]
	for len(list) >= p.max {
		list[0].end(errPollReplaced)
		list = list[1:]
	}
	p.byEditor[id] = append(list, me)
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		list := p.byEditor[id]
		for i, q := range list {
			if q == me {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(p.byEditor, id)
		} else {
			p.byEditor[id] = list
		}
	}
}

// end ends every long poll editor id holds in this process, with cause.
func (p *polls) end(id int64, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range p.byEditor[id] {
		q.end(cause)
	}
}

// held returns how many long polls editor id holds.
func (p *polls) held(id int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byEditor[id])
}
