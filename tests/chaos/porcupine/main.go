// Command porcupine is the chaos run's second, independent checker (rule (pc) of
// tests/chaos/main.rs): it checks the run's recorded history (history.jsonl in the run's log
// directory, written by tests/chaos/history.rs) for linearizability with Porcupine
// (github.com/anishathalye/porcupine), against models of what the locks promise, where the
// check is not a tautology:
//
//   - counter: each resource's counter (the mutex's chaos:r<i>, the read-write lock's
//     chaos-rw) is a register that every holder changes by a read-modify-write inside the
//     lock, modelled as ONE operation (read r, write w: valid iff the state is r). Two holders
//     inside the lock at once that both read r make it illegal: a lost update. A write that
//     landed after its lock's validity (the harness's classification: the SET returned after
//     the lock's deadline, the known limit of locks without fencing) is outside the lock's
//     promise, so it is modelled honestly rather than dropped: its GET, made inside the lock,
//     is a read asserted on its own, and its SET a blind write that either took effect at an
//     instant between its validity check and its return, or was overwritten inside an in-time
//     holder's read-modify-write it landed in. Neither choice can make two overlapping in-time
//     read-modify-writes legal: a late write only explains what it could have caused.
//   - store: the token-checking storage a fenced lock's tokens (chaos-fenced) and an
//     election's terms (chaos-election) guard, as the holders saw it. It accepts a read or a
//     write whose token is at least the highest it has seen (a read registers its token); a
//     holder's read and write that were both accepted are one operation, since no other
//     token's accepted write fits between them, which is the fence's promise: no stale write
//     accepted, no update lost. Refused reads and writes are operations too (valid iff the
//     token is below the highest). A single storage operation alone would only restate its Lua
//     script; the read-modify-write as one operation does not.
//   - order: acquisitions of the fenced lock and won campaigns of the election as intervals
//     [call, return] whose tokens (terms) rise in real-time order: a grant whose call started
//     after another returned has the greater token, and none is granted twice.
//
// A lease lock itself is not modelled: under process pauses it is not linearizable by design
// (a paused holder's lease runs out while it believes it holds), so, as Jepsen does, the check
// is of the resource the lock guards.
//
// Each model's history is partitioned by resource (porcupine's Partition; the order and store
// models also cut a long resource's history at quiescent instants, chunks.go says why that
// keeps the verdict) and checked with CheckOperationsVerbose and a timeout (-timeout, per
// model). An operation whose outcome is
// unknown (a null "ret": a client killed or stopped before it logged a completion) gets an
// open-ended return time and may have had no effect. A model that times out is "Unknown": not
// checked, printed and counted, and never a pass: the command exits non-zero, and the chaos
// run fails rule (pc), since a run whose rule gave no verdict has not checked what it says.
//
// Output: a line per model ("porcupine: <model>: N ops on K keys ...: Ok in S s"), an
// "ILLEGAL <model> <key>: ..." block per illegal resource with Porcupine's explanation (the
// longest linearizable prefix found, its last operations and the states they left, and the
// operations that could not be placed after it), and an "UNKNOWN <model>: ..." line per
// timeout. With -html DIR, the visualization of each model that is not Ok goes to
// DIR/porcupine-<model>.html. Exit status 0 when every model is Ok, 1 otherwise, 2 on a bad
// history.
//
// -self-test checks made-up histories instead (a legal one, a lost update, a late write that
// must not hide one, a stale fenced write, a term going backwards, ...); go test runs the same.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// open is the return time of an operation whose outcome is unknown: after every other.
const open = math.MaxInt64 / 2

func readHistory(path string) ([]*Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []*Op
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for scanner.Scan() {
		line++
		text := strings.TrimSpace(scanner.Text())
		if text == "" {
			continue
		}
		op := &Op{}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(op); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		ops = append(ops, op)
	}
	return ops, scanner.Err()
}

// Verdict is one model's result.
type Verdict struct {
	Model    string
	Result   porcupine.CheckResult
	Ops      int
	Keys     int
	Parts    int
	Late     int
	Open     int
	Took     time.Duration
	Illegal  []string // one explanation per illegal key
	Visual   string   // the visualization's path, when written
	modelDef model
	info     porcupine.LinearizationInfo
}

// checkAll checks each model's operations of ops. A kind a model does not know, or a model
// nobody knows, is an error of the history.
func checkAll(ops []*Op, timeout time.Duration) ([]*Verdict, error) {
	byModel := make(map[string][]porcupine.Operation)
	var verdicts []*Verdict
	for _, op := range ops {
		var m *model
		for i := range models {
			if models[i].name == op.Model {
				m = &models[i]
			}
		}
		if m == nil {
			return nil, fmt.Errorf("unknown model %q in %+v", op.Model, *op)
		}
		if !m.kinds[op.Kind] {
			return nil, fmt.Errorf("model %s has no operation %q", op.Model, op.Kind)
		}
		ret := int64(open)
		if op.Ret != nil {
			ret = *op.Ret
			if ret < op.Call {
				return nil, fmt.Errorf("returns before its call: %+v", *op)
			}
		}
		byModel[op.Model] = append(byModel[op.Model], porcupine.Operation{
			ClientId: clientID(op),
			Input:    op,
			Call:     op.Call,
			Return:   ret,
		})
	}
	for _, m := range models {
		history := byModel[m.name]
		v := &Verdict{Model: m.name, Ops: len(history), modelDef: m}
		for _, o := range history {
			op := o.Input.(*Op)
			if op.Kind == "late-write" {
				v.Late++
			}
			if op.unknown() {
				v.Open++
			}
		}
		parts := m.model.Partition(history)
		v.Keys = len(byKey(history))
		v.Parts = len(parts)
		start := time.Now()
		v.Result, v.info = porcupine.CheckOperationsVerbose(m.model, history, timeout)
		v.Took = time.Since(start)
		if v.Result == porcupine.Illegal {
			v.Illegal = explain(m, parts, v.info)
		}
		verdicts = append(verdicts, v)
	}
	return verdicts, nil
}

// clientID numbers (process, thread) for the visualization: one row each, the harness's last.
func clientID(op *Op) int {
	if op.Client < 0 {
		return 0
	}
	return 1 + op.Client*65 + op.Thread + 1
}

func secs(ns int64) string {
	if ns >= open {
		return "never"
	}
	return fmt.Sprintf("%.3fs", float64(ns)/1e9)
}

func span(o porcupine.Operation) string {
	return fmt.Sprintf("[%s .. %s]", secs(o.Call), secs(o.Return))
}

// explain renders Porcupine's evidence for each illegal partition: the longest linearizable
// prefix it found, the last operations of that prefix with the state each left, and the
// operations that could not be placed after it (the earliest to return first).
func explain(m model, parts [][]porcupine.Operation, info porcupine.LinearizationInfo) []string {
	partials := info.PartialLinearizationsOperations()
	var out []string
	for p, part := range parts {
		if p >= len(partials) {
			break
		}
		var longest []porcupine.Operation
		for _, l := range partials[p] {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(part) {
			continue
		}
		key := part[0].Input.(*Op).Key
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s: not linearizable: of %d operations, the longest linearizable prefix found has %d",
			m.name, key, len(part), len(longest))
		// Replay the prefix for the states it leaves.
		state := m.model.Init()
		states := make([]string, len(longest))
		for i, o := range longest {
			_, state = m.model.Step(state, o.Input, o.Output)
			states[i] = m.model.DescribeState(state)
		}
		from := len(longest) - 3
		if from < 0 {
			from = 0
		}
		if len(longest) > 0 {
			b.WriteString("; it ends with:")
		}
		for i := from; i < len(longest); i++ {
			o := longest[i]
			fmt.Fprintf(&b, "\n    %s %s -> state %s", span(o), o.Input.(*Op).Describe(), states[i])
		}
		placed := make(map[*Op]bool)
		for _, o := range longest {
			placed[o.Input.(*Op)] = true
		}
		var rest []porcupine.Operation
		for _, o := range part {
			if !placed[o.Input.(*Op)] {
				rest = append(rest, o)
			}
		}
		sort.Slice(rest, func(i, j int) bool { return rest[i].Return < rest[j].Return })
		fmt.Fprintf(&b, "\n  and none of the %d operations left fits next; the first to return:", len(rest))
		for i, o := range rest {
			if i == 3 {
				break
			}
			fmt.Fprintf(&b, "\n    %s %s", span(o), o.Input.(*Op).Describe())
		}
		out = append(out, b.String())
	}
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("%s: not linearizable (no partition's prefix was reported)", m.name))
	}
	return out
}

// report prints the verdicts, writes the visualization of each model that is not Ok into
// htmlDir (when given) and says whether every model is Ok.
func report(verdicts []*Verdict, htmlDir string) bool {
	ok := true
	for _, v := range verdicts {
		fmt.Printf("porcupine: %s: %d ops on %d keys, in %d partitions (%d late writes, %d of unknown outcome): %s in %.2f s\n",
			v.Model, v.Ops, v.Keys, v.Parts, v.Late, v.Open, v.Result, v.Took.Seconds())
		if v.Result == porcupine.Ok {
			continue
		}
		ok = false
		if htmlDir != "" {
			path := filepath.Join(htmlDir, "porcupine-"+v.Model+".html")
			if err := porcupine.VisualizePath(v.modelDef.model, v.info, path); err == nil {
				v.Visual = path
			} else {
				fmt.Printf("porcupine: %s: the visualization could not be written: %v\n", v.Model, err)
			}
		}
		switch v.Result {
		case porcupine.Illegal:
			for _, e := range v.Illegal {
				fmt.Printf("ILLEGAL %s\n", e)
			}
		default:
			fmt.Printf("UNKNOWN %s: no verdict within the timeout: not checked (%d ops)\n", v.Model, v.Ops)
		}
		if v.Visual != "" {
			fmt.Printf("porcupine: %s: visualization in %s\n", v.Model, v.Visual)
		}
	}
	return ok
}

func main() {
	history := flag.String("history", "", "the history to check (JSON lines)")
	timeout := flag.Duration("timeout", 10*time.Second, "the longest a model's check may take; past it the model is Unknown")
	htmlDir := flag.String("html", "", "write the visualization of each model that is not Ok into this directory")
	selfTest := flag.Bool("self-test", false, "check made-up histories instead, each with its known verdict")
	flag.IntVar(&chunkOps, "chunk", chunkOps, "cut a resource's order and store history longer than this at quiescent instants")
	flag.Parse()
	if *selfTest {
		failures := runSelfTest()
		for _, f := range failures {
			fmt.Printf("SELF-TEST FAILED %s\n", f)
		}
		if len(failures) > 0 {
			os.Exit(1)
		}
		fmt.Printf("porcupine self-test: %d made-up histories, each with its verdict\n", len(selfTests))
		return
	}
	if *history == "" {
		fmt.Fprintln(os.Stderr, "usage: porcupine -history FILE [-timeout 10s] [-html DIR] | -self-test")
		os.Exit(2)
	}
	ops, err := readHistory(*history)
	if err != nil {
		fmt.Fprintf(os.Stderr, "porcupine: cannot read the history: %v\n", err)
		os.Exit(2)
	}
	verdicts, err := checkAll(ops, *timeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "porcupine: bad history %s: %v\n", *history, err)
		os.Exit(2)
	}
	if !report(verdicts, *htmlDir) {
		os.Exit(1)
	}
}
