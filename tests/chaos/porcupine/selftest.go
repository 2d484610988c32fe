package main

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// Made-up histories, each with the verdict the models must give: every model must be able to
// fail (a lost update, a stale fenced write, a term going backwards are illegal), and must pass
// what the locks allow (a late write, a refused stale write, a write at the token its read
// registered, concurrent grants in either order, an operation of unknown outcome).

const ms = int64(time.Millisecond)

func val(v int64) *int64 { return &v }

// op builds an operation over [call, ret] ms (ret < 0: outcome unknown).
func op(m, key, kind string, client int, call, ret int64, token int64, read *int64, write int64) *Op {
	o := &Op{Model: m, Key: key, Client: client, Thread: 0, Kind: kind, Call: call * ms, Token: token, Read: read, Write: write}
	if ret >= 0 {
		o.Ret = val(ret * ms)
	}
	return o
}

func rmw(client int, call, ret, read, write int64) *Op {
	return op("counter", "r", "rmw", client, call, ret, 0, val(read), write)
}

func lateWrite(client int, call, ret, write int64) *Op {
	return op("counter", "r", "late-write", client, call, ret, 0, nil, write)
}

func readAt(client int, call, ret, read int64) *Op {
	return op("counter", "r", "read", client, call, ret, 0, val(read), 0)
}

func final(m string, at, read int64) *Op {
	return op(m, "r", "final", -1, at, at, 0, val(read), 0)
}

func fenced(kind string, client int, call, ret, token int64, read *int64, write int64) *Op {
	return op("store", "r", kind, client, call, ret, token, read, write)
}

func grant(client int, call, ret, token int64) *Op {
	return op("order", "r", "grant", client, call, ret, token, nil, 0)
}

type selfTest struct {
	name  string
	ops   []*Op
	model string
	want  porcupine.CheckResult
	// chunk: the chunkOps to check it with (0: the default).
	chunk int
}

var selfTests = []selfTest{
	{"in-lock read-modify-writes one after the other", []*Op{
		rmw(0, 0, 10, 0, 1), rmw(1, 12, 20, 1, 2), rmw(0, 25, 30, 2, 3), final("counter", 40, 3),
	}, "counter", porcupine.Ok, 0},
	{"a lost update: two holders at once both read 0", []*Op{
		rmw(0, 0, 10, 0, 1), rmw(1, 5, 15, 0, 1), final("counter", 40, 1),
	}, "counter", porcupine.Illegal, 0},
	{"a lost update between holders one after the other", []*Op{
		rmw(0, 0, 10, 0, 1), rmw(1, 12, 20, 0, 1),
	}, "counter", porcupine.Illegal, 0},
	{"an update lost at the end (the final read)", []*Op{
		rmw(0, 0, 10, 0, 1), rmw(1, 12, 20, 1, 2), final("counter", 40, 1),
	}, "counter", porcupine.Illegal, 0},
	// Client 2 read 1 inside its lock at 12-14, was paused, and wrote 2 at 30-32, after its
	// validity: it lands between client 1's holds (the counter goes back to 2).
	{"a late write that took effect (the known limit)", []*Op{
		rmw(0, 0, 10, 0, 1), readAt(2, 11, 14, 1), rmw(1, 15, 25, 1, 2), rmw(0, 26, 29, 2, 3),
		lateWrite(2, 14, 32, 2), rmw(1, 35, 40, 2, 3), final("counter", 50, 3),
	}, "counter", porcupine.Ok, 0},
	// Client 2's late write lands inside client 1's read-modify-write and is overwritten.
	{"a late write overwritten inside an in-time holder's read-modify-write", []*Op{
		rmw(0, 0, 10, 0, 1), readAt(2, 11, 12, 1), rmw(1, 15, 25, 1, 2), lateWrite(2, 12, 26, 7),
		rmw(0, 30, 35, 2, 3), final("counter", 50, 3),
	}, "counter", porcupine.Ok, 0},
	{"a late write does not hide a lost update of two in-time holders", []*Op{
		rmw(0, 0, 10, 0, 1), readAt(2, 1, 2, 0), rmw(1, 5, 15, 0, 1), lateWrite(2, 2, 40, 5),
		rmw(0, 20, 25, 1, 2), final("counter", 50, 2),
	}, "counter", porcupine.Illegal, 0},
	{"a late writer's GET inside its lock must read the latest value", []*Op{
		rmw(0, 0, 10, 0, 1), readAt(2, 12, 14, 0), lateWrite(2, 14, 30, 1), final("counter", 50, 1),
	}, "counter", porcupine.Illegal, 0},
	{"a read-modify-write of unknown outcome that took effect", []*Op{
		rmw(0, 0, -1, 0, 1), rmw(1, 20, 30, 1, 2), final("counter", 50, 2),
	}, "counter", porcupine.Ok, 0},
	{"a read-modify-write of unknown outcome that did not", []*Op{
		rmw(0, 0, -1, 0, 1), rmw(1, 20, 30, 0, 1), final("counter", 50, 1),
	}, "counter", porcupine.Ok, 0},

	{"fenced holders; a write at the token its own read registered; a stale write refused; a leader's writes at one term", []*Op{
		fenced("rmw", 0, 0, 10, 5, val(0), 1),
		fenced("read", 1, 12, 14, 7, val(1), 0), fenced("write", 1, 15, 18, 7, nil, 2),
		fenced("write-refused", 0, 20, 22, 5, nil, 2), fenced("read-refused", 2, 23, 24, 6, nil, 0),
		fenced("rmw", 2, 30, 40, 9, val(2), 3), fenced("rmw", 2, 41, 45, 9, val(3), 4),
		final("store", 50, 4),
	}, "store", porcupine.Ok, 0},
	{"a stale fenced write accepted", []*Op{
		fenced("rmw", 0, 0, 10, 7, val(0), 1), fenced("rmw", 1, 20, 30, 5, val(1), 2),
		final("store", 50, 2),
	}, "store", porcupine.Illegal, 0},
	{"a fenced read accepted below the highest token", []*Op{
		fenced("rmw", 0, 0, 10, 7, val(0), 1), fenced("read", 1, 20, 30, 5, val(1), 0),
	}, "store", porcupine.Illegal, 0},
	{"a fenced write refused at the highest token", []*Op{
		fenced("rmw", 0, 0, 10, 7, val(0), 1), fenced("write-refused", 0, 20, 30, 7, nil, 2),
	}, "store", porcupine.Illegal, 0},
	{"a lost update through the fence (a stale write landed between a read and a write)", []*Op{
		fenced("rmw", 0, 0, 30, 7, val(0), 1), fenced("rmw", 1, 5, 10, 6, val(0), 1),
		final("store", 50, 1),
	}, "store", porcupine.Illegal, 0},

	{"tokens rising; concurrent grants in either order", []*Op{
		grant(0, 0, 10, 3), grant(1, 5, 20, 5), grant(2, 6, 21, 4), grant(0, 30, 40, 6),
	}, "order", porcupine.Ok, 0},
	{"a term going backwards", []*Op{
		grant(0, 0, 10, 5), grant(1, 20, 30, 4),
	}, "order", porcupine.Illegal, 0},
	{"a term handed out twice", []*Op{
		grant(0, 0, 10, 5), grant(1, 20, 30, 5),
	}, "order", porcupine.Illegal, 0},

	// Cut into chunks of two at the quiescent instants (before 20 ms and before 40 ms): the
	// state carried over each cut keeps what the whole history would.
	{"chunks: tokens rising", []*Op{
		grant(0, 0, 10, 3), grant(1, 5, 15, 4), grant(2, 20, 30, 5), grant(0, 25, 35, 6), grant(1, 40, 45, 7),
	}, "order", porcupine.Ok, 2},
	{"chunks: a term going backwards across a cut", []*Op{
		grant(0, 0, 10, 3), grant(1, 5, 15, 6), grant(2, 20, 30, 5), grant(0, 25, 35, 7),
	}, "order", porcupine.Illegal, 2},
	{"chunks: fenced holders", []*Op{
		fenced("rmw", 0, 0, 10, 5, val(0), 1), fenced("read-refused", 1, 2, 12, 4, nil, 0),
		fenced("rmw", 1, 20, 30, 7, val(1), 2), fenced("read", 2, 25, 35, 8, val(2), 0),
		fenced("write-refused", 1, 40, 42, 7, nil, 3), fenced("rmw", 2, 41, 45, 8, val(2), 3),
		final("store", 50, 3),
	}, "store", porcupine.Ok, 2},
	{"chunks: a stale fenced write across a cut", []*Op{
		fenced("rmw", 0, 0, 10, 5, val(0), 1), fenced("rmw", 1, 5, 12, 7, val(1), 2),
		fenced("rmw", 2, 20, 30, 6, val(2), 3), fenced("read", 1, 25, 35, 7, val(3), 0),
	}, "store", porcupine.Illegal, 2},
	{"chunks: a lost update across a cut", []*Op{
		fenced("rmw", 0, 0, 10, 5, val(0), 1), fenced("rmw", 1, 5, 12, 7, val(1), 2),
		fenced("rmw", 2, 20, 30, 8, val(1), 2), fenced("read", 1, 25, 35, 9, val(2), 0),
	}, "store", porcupine.Illegal, 2},
}

// runSelfTest checks every made-up history and gives what went wrong.
func runSelfTest() []string {
	var failures []string
	defer func(n int) { chunkOps = n }(chunkOps)
	for _, t := range selfTests {
		chunkOps = 1000
		if t.chunk > 0 {
			chunkOps = t.chunk
		}
		verdicts, err := checkAll(t.ops, 5*time.Second)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", t.name, err))
			continue
		}
		for _, v := range verdicts {
			if v.Model != t.model {
				if v.Ops > 0 {
					failures = append(failures, fmt.Sprintf("%s: operations of model %s", t.name, v.Model))
				}
				continue
			}
			if v.Result != t.want {
				failures = append(failures, fmt.Sprintf("%s: %s, expected %s", t.name, v.Result, t.want))
			}
			if v.Result == porcupine.Illegal && len(v.Illegal) == 0 {
				failures = append(failures, fmt.Sprintf("%s: illegal without an explanation", t.name))
			}
			if t.chunk > 0 && v.Parts < 2 {
				failures = append(failures, fmt.Sprintf("%s: checked in %d partition, not cut", t.name, v.Parts))
			}
		}
	}
	return failures
}
