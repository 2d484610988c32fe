package main

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Op is one operation of the history, a line of history.jsonl as the chaos harness writes it
// (tests/chaos/history.rs).
type Op struct {
	// Model: "counter", "store" or "order" (see the package doc).
	Model string `json:"model"`
	// Key is the resource: the partition the operation belongs to.
	Key string `json:"key"`
	// Client and Thread name who made it: a client process (-1: the harness's final read) and
	// its thread (-1: not logged).
	Client int `json:"client"`
	Thread int `json:"thread"`
	// Kind is what it did; each model says which kinds it knows.
	Kind string `json:"kind"`
	// Call and Ret are nanoseconds since the run's start on CLOCK_MONOTONIC. A null Ret is an
	// operation whose outcome is unknown: it may have taken effect, at any time after Call, or
	// not at all.
	Call int64  `json:"call"`
	Ret  *int64 `json:"ret"`
	// Token is the fencing token or the term it carried (store and order).
	Token int64 `json:"token"`
	// Read is the value it read (null: not asserted); Write the value it wrote.
	Read  *int64 `json:"read"`
	Write int64  `json:"write"`
}

func (o *Op) unknown() bool { return o.Ret == nil }

func (o *Op) who() string {
	if o.Client < 0 {
		return "harness"
	}
	if o.Thread < 0 {
		return fmt.Sprintf("c%d", o.Client)
	}
	return fmt.Sprintf("c%d.t%d", o.Client, o.Thread)
}

func (o *Op) read() string {
	if o.Read == nil {
		return "?"
	}
	return fmt.Sprint(*o.Read)
}

// Describe is the operation as a line of the explanation and a box of the visualization.
func (o *Op) Describe() string {
	var what string
	switch o.Kind {
	case "rmw":
		what = fmt.Sprintf("read %s, wrote %d", o.read(), o.Write)
	case "read", "final":
		what = fmt.Sprintf("read %s", o.read())
	case "late-write":
		what = fmt.Sprintf("wrote %d after its validity", o.Write)
	case "write":
		what = fmt.Sprintf("wrote %d", o.Write)
	case "read-refused", "write-refused", "grant":
		what = o.Kind
	case "from":
		what = fmt.Sprintf("the state left before a quiescent instant: highest %d, value %s", o.Token, o.read())
	default:
		what = o.Kind + "?"
	}
	if o.Model != "counter" && o.Kind != "final" {
		what = fmt.Sprintf("token %d: %s", o.Token, what)
	}
	if o.unknown() {
		what += " (outcome unknown)"
	}
	return fmt.Sprintf("%s %s", o.who(), what)
}

// A model of the package doc: its porcupine model, and the kinds of operation it knows.
type model struct {
	name  string
	kinds map[string]bool
	model porcupine.Model
}

func kinds(names ...string) map[string]bool {
	m := make(map[string]bool)
	for _, n := range names {
		m[n] = true
	}
	return m
}

// byKey partitions a model's history by resource: each resource is a register of its own.
func byKey(history []porcupine.Operation) [][]porcupine.Operation {
	var keys []string
	parts := make(map[string][]porcupine.Operation)
	for _, op := range history {
		k := op.Input.(*Op).Key
		if _, ok := parts[k]; !ok {
			keys = append(keys, k)
		}
		parts[k] = append(parts[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, parts[k])
	}
	return out
}

func describeOp(input, _ interface{}) string { return input.(*Op).Describe() }

// The counter model: a resource's counter, a register every in-time holder changes by one
// read-modify-write (GET, sleep, SET inside the lock), as one operation.
//   - rmw (read r, write w): valid iff the state is r; the state becomes w.
//   - read (r): valid iff the state is r (a late writer's GET, made inside the lock).
//   - late-write (w): a SET that landed after its lock's validity, outside the lock's
//     promise. It is blind (its GET is the read above), and it either took effect at an
//     instant of [validity check, SET returned] or was overwritten by an in-time holder whose
//     read-modify-write it landed in: the state becomes w, or stays.
//   - final (r): the harness's GET after every client ended.
//
// An operation whose outcome is unknown may also have had no effect.
func counterStep(state, input, _ interface{}) []interface{} {
	s := state.(int64)
	o := input.(*Op)
	var next []interface{}
	switch o.Kind {
	case "rmw":
		if o.Read == nil || s == *o.Read {
			next = append(next, o.Write)
		}
	case "read", "final":
		if o.Read == nil || s == *o.Read {
			next = append(next, s)
		}
	case "late-write":
		next = append(next, o.Write, s)
	}
	if o.unknown() {
		next = append(next, s)
	}
	return next
}

var counterModel = model{
	name:  "counter",
	kinds: kinds("rmw", "read", "late-write", "final"),
	model: (&porcupine.NondeterministicModel{
		Partition:         byKey,
		Init:              func() []interface{} { return []interface{}{int64(0)} },
		Step:              counterStep,
		Hash:              func(s interface{}) uint64 { return uint64(s.(int64)) },
		DescribeOperation: describeOp,
		DescribeState:     func(s interface{}) string { return fmt.Sprint(s.(int64)) },
	}).ToModel(),
}

// storeState is the token-checking store of one resource: the highest token it has seen and
// its counter.
type storeState struct {
	Highest int64
	Value   int64
}

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// The store model: the storage a fenced lock (or an election's term) guards. It accepts a read
// or a write whose token is at least the highest it has seen, and raises the highest to it (a
// read registers its token); it refuses a lower one and changes nothing.
//   - rmw (token t, read r, write w): a holder whose read and write were both accepted, as one
//     operation: valid iff t >= highest and the value is r; then (t, w). No accepted write of
//     another token fits between such a read and write (it would raise the highest above t, and
//     the write would be refused), so this is what the fence promises: no lost update.
//   - read (t, r): accepted: t >= highest and the value is r (r null: not asserted).
//   - write (t, w): accepted alone: t >= highest; then (t, w).
//   - read-refused, write-refused (t): valid iff t < highest.
//   - final (r): the value is r.
//
// An operation whose outcome is unknown may have had no effect, or had its read accepted and
// its write not.
func storeStep(state, input, _ interface{}) []interface{} {
	s := state.(storeState)
	o := input.(*Op)
	var next []interface{}
	fits := o.Read == nil || s.Value == *o.Read
	switch o.Kind {
	case "rmw":
		if o.Token >= s.Highest && fits {
			next = append(next, storeState{o.Token, o.Write})
		}
	case "read":
		if o.Token >= s.Highest && fits {
			next = append(next, storeState{o.Token, s.Value})
		}
	case "write":
		if o.Token >= s.Highest {
			next = append(next, storeState{o.Token, o.Write})
		}
	case "read-refused", "write-refused":
		if o.Token < s.Highest {
			next = append(next, s)
		}
	case "final":
		if fits {
			next = append(next, s)
		}
	case "from":
		next = append(next, storeState{o.Token, *o.Read})
	}
	if o.unknown() {
		next = append(next, s, storeState{maxInt64(s.Highest, o.Token), s.Value})
	}
	return next
}

var storeModel = model{
	name:  "store",
	kinds: kinds("rmw", "read", "write", "read-refused", "write-refused", "final"),
	model: (&porcupine.NondeterministicModel{
		Partition: chunked(storeCarry),
		Init:      func() []interface{} { return []interface{}{storeState{}} },
		Step:      storeStep,
		Hash: func(s interface{}) uint64 {
			st := s.(storeState)
			return uint64(st.Highest)*0x9E3779B97F4A7C15 ^ uint64(st.Value)
		},
		DescribeOperation: describeOp,
		DescribeState: func(s interface{}) string {
			st := s.(storeState)
			return fmt.Sprintf("highest token %d, value %d", st.Highest, st.Value)
		},
	}).ToModel(),
}

// The order model: grants (a fenced lock's acquisitions, an election's won campaigns) as
// intervals [call, return] whose tokens (terms) rise in real-time order: a grant whose call
// started after another returned has the greater token, and no token is granted twice. The
// state is the highest token granted; a grant is valid iff its token is above it.
func orderStep(state, input, _ interface{}) []interface{} {
	s := state.(int64)
	o := input.(*Op)
	var next []interface{}
	if o.Kind == "grant" && o.Token > s {
		next = append(next, o.Token)
	}
	if o.Kind == "from" {
		next = append(next, o.Token)
	}
	if o.unknown() {
		next = append(next, s)
	}
	return next
}

var orderModel = model{
	name:  "order",
	kinds: kinds("grant"),
	model: (&porcupine.NondeterministicModel{
		Partition:         chunked(orderCarry),
		Init:              func() []interface{} { return []interface{}{int64(0)} },
		Step:              orderStep,
		Hash:              func(s interface{}) uint64 { return uint64(s.(int64)) },
		DescribeOperation: describeOp,
		DescribeState:     func(s interface{}) string { return fmt.Sprintf("highest granted %d", s.(int64)) },
	}).ToModel(),
}

var models = []model{counterModel, storeModel, orderModel}
