package main

import (
	"sort"

	"github.com/anishathalye/porcupine"
)

// chunkOps: a resource's history longer than this is checked in chunks of about this many
// operations. Porcupine's cache grows with the square of a partition's length (about 0.9 GB
// for 60 000 operations, a 10-minute soak's fenced lock), so the
// order and store models cut a long resource's history at quiescent instants (no operation
// pending across them), each chunk after the first beginning with a "from" operation that
// sets the state the chunk before left. Those two models leave one state after any legal
// history, so the chunks are legal if and only if the whole is: the order model's highest
// grant is the greatest token granted; the store's highest token is the greatest one accepted,
// and its value the greatest written, since each accepted read-modify-write wrote what it read
// plus one (a resource whose history has another shape, or an operation of unknown outcome,
// is not cut). The counter model is not cut: a late write leaves a choice of states.
var chunkOps = 1000

// chunked partitions by key, then cuts each long key's history where carry allows.
func chunked(carry func(prefix []*Op) (*Op, bool)) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		var out [][]porcupine.Operation
		for _, part := range byKey(history) {
			out = append(out, cut(part, carry)...)
		}
		return out
	}
}

func cut(part []porcupine.Operation, carry func(prefix []*Op) (*Op, bool)) [][]porcupine.Operation {
	if len(part) <= chunkOps {
		return [][]porcupine.Operation{part}
	}
	ops := make([]porcupine.Operation, len(part))
	copy(ops, part)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	all := make([]*Op, len(ops))
	for i, o := range ops {
		all[i] = o.Input.(*Op)
	}
	if _, ok := carry(all); !ok {
		return [][]porcupine.Operation{part}
	}
	var out [][]porcupine.Operation
	var chunk []porcupine.Operation
	maxRet := int64(-1 << 62)
	for i, o := range ops {
		if len(chunk) >= chunkOps && o.Call > maxRet {
			out = append(out, chunk)
			from, _ := carry(all[:i])
			from.Key = all[i].Key
			from.Client, from.Thread = -1, -1
			from.Kind = "from"
			at := o.Call - 1
			from.Call, from.Ret = at, &at
			chunk = []porcupine.Operation{{ClientId: 0, Input: from, Call: at, Return: at}}
		}
		chunk = append(chunk, o)
		if o.Return > maxRet {
			maxRet = o.Return
		}
	}
	return append(out, chunk)
}

// orderCarry: the state after prefix is its greatest token granted.
func orderCarry(prefix []*Op) (*Op, bool) {
	var highest int64
	for _, o := range prefix {
		if o.unknown() {
			return nil, false
		}
		highest = maxInt64(highest, o.Token)
	}
	return &Op{Model: "order", Token: highest}, true
}

// storeCarry: the state after prefix is its greatest accepted token and its greatest value
// written, when every read-modify-write wrote what it read plus one.
func storeCarry(prefix []*Op) (*Op, bool) {
	var highest, value int64
	for _, o := range prefix {
		switch {
		case o.unknown() || o.Kind == "write":
			return nil, false
		case o.Kind == "rmw":
			if o.Read == nil || o.Write != *o.Read+1 {
				return nil, false
			}
			value = maxInt64(value, o.Write)
			highest = maxInt64(highest, o.Token)
		case o.Kind == "read":
			highest = maxInt64(highest, o.Token)
		}
	}
	return &Op{Model: "store", Token: highest, Read: val(value)}, true
}
