package delivery

// Delivering reports whether w holds the delivery lock now.
func (w *Deliverer) Delivering() bool { return w.delivering() }

// EventJSON is the body of the request that delivers ev.
var EventJSON = eventJSON
