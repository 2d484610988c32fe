package redquorum_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// Leader election against real nodes: campaign and resign, terms that grow, a waiting
// candidate woken by a resignation, Context ended by a loss and by Resign, campaigns ended by
// their context and by Close, observers, the client-go callbacks and bad arguments.

const electionTTL = 10 * time.Second

func mustElection(t *testing.T, c *redquorum.Client, name, identity string, ttl time.Duration, opts ...redquorum.ElectionOption) *redquorum.Election {
	t.Helper()
	e, err := c.Election(name, identity, ttl, opts...)
	if err != nil {
		t.Fatalf("Election(%q, %q, %v): %v", name, identity, ttl, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func mustCampaign(t *testing.T, e *redquorum.Election) *redquorum.Leadership {
	t.Helper()
	l, err := e.Campaign(context.Background())
	if err != nil {
		t.Fatalf("Campaign in %q as %q: %v", e.Name(), e.Identity(), err)
	}
	return l
}

// receive returns the next value of ch, failing the test after 10 s.
func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the channel was closed", what)
		}
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing within 10 s", what)
	}
	panic("unreachable")
}

// assertClosed waits until ch is closed, dropping what it still delivers.
func assertClosed[T any](t *testing.T, what string, ch <-chan T) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("%s: not closed within 10 s", what)
		}
	}
}

func assertDone(t *testing.T, what string, ctx context.Context, cause error) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Context not done within 10 s", what)
	}
	if !errors.Is(context.Cause(ctx), cause) {
		t.Fatalf("%s: context.Cause = %v, want %v", what, context.Cause(ctx), cause)
	}
}

func TestElectionCampaignResignAndTheNextTerm(t *testing.T) {
	// A new election each run: the count of transitions is kept on the nodes.
	name := fmt.Sprintf("go:election:terms:%d", time.Now().UnixNano())
	c := newClient(t, shared.urls(), patient...)
	if l, err := c.Leader(name); l != nil || err != nil {
		t.Fatalf("Leader of a new election = %+v, %v; want nobody", l, err)
	}

	a := mustElection(t, c, name, "host-a", electionTTL)
	if a.Name() != name || a.Identity() != "host-a" || a.TTL() != electionTTL {
		t.Errorf("Election accessors: %q %q %v", a.Name(), a.Identity(), a.TTL())
	}
	first := mustCampaign(t, a)
	if !first.IsLeader() || first.Term() == 0 || first.Name() != name || first.Identity() != "host-a" {
		t.Fatalf("first leadership: leader %v, term %d, name %q, identity %q", first.IsLeader(), first.Term(), first.Name(), first.Identity())
	}
	if v := first.Validity(); v <= 0 || v > electionTTL {
		t.Errorf("Validity() = %v, want in (0, %v]", v, electionTTL)
	}
	if first.Context().Err() != nil {
		t.Fatal("Context() of a live leadership is done")
	}
	seen, err := observer.Leader(name)
	if err != nil || seen == nil {
		t.Fatalf("Leader = %+v, %v; want host-a", seen, err)
	}
	if seen.Identity != "host-a" || seen.Term != first.Term() || seen.Transitions != 1 {
		t.Errorf("Leader = %+v, want host-a in term %d, the first transition", seen, first.Term())
	}
	if seen.TTL <= 0 || seen.TTL > electionTTL {
		t.Errorf("Leader.TTL = %v, want in (0, %v]", seen.TTL, electionTTL)
	}
	if age := time.Since(seen.Since); age < -time.Minute || age > time.Minute {
		t.Errorf("Leader.Since = %v, %v from now", seen.Since, age)
	}
	if again, err := a.Leader(); err != nil || again == nil || again.Identity != "host-a" || again.Term != first.Term() {
		t.Errorf("Election.Leader = %+v, %v; want host-a in term %d", again, err, first.Term())
	}

	// B campaigns on a client of its own and waits; A's resignation wakes it.
	b := mustElection(t, newClient(t, shared.urls(), patient...), name, "host-b", electionTTL)
	type won struct {
		l   *redquorum.Leadership
		err error
		at  time.Time
	}
	second := make(chan won, 1)
	go func() {
		l, err := b.Campaign(context.Background())
		second <- won{l, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case w := <-second:
		t.Fatalf("B's campaign returned while A leads: %v", w.err)
	default:
	}
	resigned := time.Now()
	if err := first.Resign(); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	assertDone(t, "resigned", first.Context(), context.Canceled)
	if first.IsLeader() || first.Validity() != 0 {
		t.Error("IsLeader or Validity after Resign")
	}
	w := receive(t, "B's campaign", second)
	if w.err != nil {
		t.Fatalf("B's campaign: %v", w.err)
	}
	defer w.l.Resign()
	if w.l.Term() <= first.Term() {
		t.Errorf("B's term %d is not greater than A's %d", w.l.Term(), first.Term())
	}
	// Woken by the resignation, not by A's TTL running out.
	if d := w.at.Sub(resigned); d > electionTTL/2 {
		t.Errorf("B took over %v after the resignation", d)
	}
	// Transitions is best effort: a node that missed A's term counts B's as its first.
	if l, err := observer.Leader(name); err != nil || l == nil || l.Identity != "host-b" || l.Term != w.l.Term() || l.Transitions < 1 {
		t.Errorf("Leader after the takeover = %+v, %v; want host-b in term %d", l, err, w.l.Term())
	}
	if err := first.Resign(); err != nil {
		t.Errorf("a second Resign = %v, want nil", err)
	}
	if first.Term() == 0 {
		t.Error("Term() is gone after Resign")
	}
	if err := w.l.Resign(); err != nil {
		t.Fatal(err)
	}
	if l, err := observer.Leader(name); l != nil || err != nil {
		t.Errorf("Leader after both resigned = %+v, %v; want nobody", l, err)
	}
}

// A leader cut off from a majority of its nodes (SIGSTOP) cannot extend: its Context is done,
// with a cause that wraps ErrLost, and Resign says it was lost.
func TestLeadershipContextEndsWhenLost(t *testing.T) {
	cl := newCluster(t, 3)
	c := newClient(t, cl.urls(), redquorum.WithNodeTimeout(100*time.Millisecond))
	stopped := make(chan uint64, 1)
	e := mustElection(t, c, "go:election:lost", "a", 1500*time.Millisecond,
		redquorum.OnStoppedLeading(func(term uint64) { stopped <- term }))
	var l *redquorum.Leadership
	// The first acquisition on a new client may find connections still being made.
	for attempt := 0; ; attempt++ {
		var err error
		if l, err = e.TryCampaign(); err == nil {
			break
		} else if attempt == 20 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	work := l.Context()
	cl.nodes[0].stop(t)
	cl.nodes[1].stop(t)
	assertDone(t, "a majority hung", work, redquorum.ErrLost)
	if l.IsLeader() {
		t.Error("IsLeader after the Context ended as lost")
	}
	if term := receive(t, "OnStoppedLeading", stopped); term != l.Term() {
		t.Errorf("OnStoppedLeading(%d), want the term %d", term, l.Term())
	}
	cl.nodes[0].cont(t)
	cl.nodes[1].cont(t)
	if err := l.Resign(); !errors.Is(err, redquorum.ErrLost) {
		t.Errorf("Resign of a lost leadership = %v, want ErrLost", err)
	}
	if !errors.Is(context.Cause(work), redquorum.ErrLost) {
		t.Errorf("Resign changed the cause to %v", context.Cause(work))
	}
}

func TestCampaignEndedByContextAndClose(t *testing.T) {
	const name = "go:election:cancel"
	holder := mustCampaign(t, mustElection(t, observer, name, "holder", electionTTL))
	defer holder.Resign()

	c, err := redquorum.New(shared.urls(), patient...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e := mustElection(t, c, name, "waiter", electionTTL)

	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now() // before the timer starts: the cancel comes at least 200 ms later
	time.AfterFunc(200*time.Millisecond, cancel)
	l, err := e.Campaign(ctx)
	if l != nil {
		t.Fatal("a cancelled campaign returned a leadership")
	}
	assertCancelled(t, "Campaign cancelled", err, context.Canceled)
	if !strings.Contains(err.Error(), name) {
		t.Errorf("the error %q does not name the election", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 200*time.Millisecond+cancelBound {
		t.Errorf("Campaign cancelled after 200 ms returned after %v", d)
	}

	ctx, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop()
	_, err = e.Campaign(ctx)
	assertCancelled(t, "Campaign past its deadline", err, context.DeadlineExceeded)
	_, err = e.Campaign(ctx)
	assertCancelled(t, "Campaign with a done context", err, context.DeadlineExceeded)

	if _, err := e.TryCampaign(); !errors.Is(err, redquorum.ErrNotAcquired) {
		t.Errorf("TryCampaign while another leads = %v, want ErrNotAcquired", err)
	}
	if l, err := observer.Leader(name); err != nil || l == nil || l.Identity != "holder" || l.Term != holder.Term() {
		t.Errorf("Leader after the failed campaigns = %+v, %v; want the holder", l, err)
	}

	// The Client's Close ends a campaign with ErrClosed.
	result := make(chan error, 1)
	before := waiters(t, c)
	go func() {
		_, err := e.Campaign(context.Background())
		result <- err
	}()
	untilWaiting(t, c, before)
	c.Close()
	assertCancelled(t, "Campaign when the Client closed", receive(t, "Campaign", result), redquorum.ErrClosed)
	if _, err := e.Campaign(context.Background()); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("Campaign after the Client's Close = %v, want ErrClosed", err)
	}
	if _, err := c.Election(name, "late", electionTTL); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("Election after the Client's Close = %v, want ErrClosed", err)
	}
	assertClosed(t, "Election.Observe after the Client's Close", e.Observe(context.Background()))

	// Closing an Election leaves a campaign in flight to its context; then it campaigns no more.
	closed := mustElection(t, observer, name, "closed", electionTTL)
	ctx, cancel = context.WithCancel(context.Background())
	before = waiters(t, observer)
	go func() {
		_, err := closed.Campaign(ctx)
		result <- err
	}()
	untilWaiting(t, observer, before)
	closed.Close()
	closed.Close()
	select {
	case err := <-result:
		t.Fatalf("Close ended a campaign in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	assertCancelled(t, "Campaign on a closed Election, cancelled", receive(t, "Campaign", result), context.Canceled)
	if _, err := closed.TryCampaign(); !errors.Is(err, redquorum.ErrClosed) || !errors.Is(err, redquorum.ErrInvalidArgument) {
		t.Errorf("TryCampaign of a closed Election = %v, want ErrClosed and ErrInvalidArgument", err)
	}
}

func TestObserveElection(t *testing.T) {
	const name = "go:election:observe"
	c := newClient(t, shared.urls(), patient...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, err := c.Observe(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if l := receive(t, "the first state", changes); l != nil {
		t.Fatalf("first state = %+v, want nobody", l)
	}

	e := mustElection(t, newClient(t, shared.urls(), patient...), name, "one", electionTTL)
	viaElection := e.Observe(ctx)
	if l := receive(t, "Election.Observe's first state", viaElection); l != nil {
		t.Fatalf("Election.Observe's first state = %+v, want nobody", l)
	}
	leadership := mustCampaign(t, e)
	for _, ch := range []<-chan *redquorum.Leader{changes, viaElection} {
		l := receive(t, "the takeover", ch)
		if l == nil || l.Identity != "one" || l.Term != leadership.Term() {
			t.Fatalf("after the takeover: %+v, want one in term %d", l, leadership.Term())
		}
	}
	if err := leadership.Resign(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan *redquorum.Leader{changes, viaElection} {
		if l := receive(t, "the resignation", ch); l != nil {
			t.Fatalf("after the resignation: %+v, want nobody", l)
		}
	}

	// Ending the context closes the channels, read or not.
	start := time.Now()
	cancel()
	assertClosed(t, "Observe after cancel", changes)
	assertClosed(t, "Election.Observe after cancel", viaElection)
	if d := time.Since(start); d > cancelBound {
		t.Errorf("the channels closed %v after the cancel", d)
	}

	// So does the Client's Close, also for an observer nobody reads.
	closing, err := redquorum.New(shared.urls(), patient...)
	if err != nil {
		t.Fatal(err)
	}
	unread, err := closing.Observe(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	closing.Close()
	assertClosed(t, "Observe after Close", unread)
	if _, err := closing.Observe(context.Background(), name); !errors.Is(err, redquorum.ErrClosed) {
		t.Errorf("Observe after Close = %v, want ErrClosed", err)
	}
}

func TestElectionCallbacks(t *testing.T) {
	const name = "go:election:callbacks"
	var mu sync.Mutex
	var leaders []string
	newLeader := make(chan struct{}, 10)
	started := make(chan *redquorum.Leadership, 1)
	stopped := make(chan uint64, 1)
	e := mustElection(t, newClient(t, shared.urls(), patient...), name, "me", electionTTL,
		redquorum.OnStartedLeading(func(l *redquorum.Leadership) {
			if !l.IsLeader() {
				t.Error("OnStartedLeading: not leader")
			}
			started <- l
		}),
		redquorum.OnStoppedLeading(func(term uint64) { stopped <- term }),
		redquorum.OnNewLeader(func(l *redquorum.Leader) {
			mu.Lock()
			defer mu.Unlock()
			if l == nil {
				leaders = append(leaders, "nobody")
			} else {
				leaders = append(leaders, l.Identity)
			}
			newLeader <- struct{}{}
		}),
	)
	receive(t, "OnNewLeader with the first state", newLeader)
	l := mustCampaign(t, e)
	select {
	case s := <-started:
		if s != l {
			t.Error("OnStartedLeading got another Leadership than Campaign returned")
		}
	default:
		t.Fatal("OnStartedLeading had not run when Campaign returned")
	}
	receive(t, "OnNewLeader with the leader", newLeader)
	select {
	case term := <-stopped:
		t.Fatalf("OnStoppedLeading(%d) while leading", term)
	default:
	}
	if err := l.Resign(); err != nil {
		t.Fatal(err)
	}
	if term := receive(t, "OnStoppedLeading", stopped); term != l.Term() {
		t.Errorf("OnStoppedLeading(%d), want %d", term, l.Term())
	}
	receive(t, "OnNewLeader with nobody", newLeader)
	mu.Lock()
	if got := strings.Join(leaders, ","); got != "nobody,me,nobody" {
		t.Errorf("OnNewLeader saw %s, want nobody,me,nobody", got)
	}
	mu.Unlock()

	// After Close no change is reported.
	e.Close()
	other := mustCampaign(t, mustElection(t, observer, name, "other", electionTTL))
	defer other.Resign()
	select {
	case <-newLeader:
		t.Error("OnNewLeader called after Close")
	case <-time.After(500 * time.Millisecond):
	}

	// A panic in OnStartedLeading resigns the leadership and reaches the caller.
	if err := other.Resign(); err != nil {
		t.Fatal(err)
	}
	panicky := mustElection(t, observer, name, "panicky", electionTTL,
		redquorum.OnStartedLeading(func(*redquorum.Leadership) { panic("boom") }))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Campaign swallowed OnStartedLeading's panic")
			}
		}()
		panicky.Campaign(context.Background())
	}()
	if l, err := observer.Leader(name); l != nil || err != nil {
		t.Errorf("Leader after a panic in OnStartedLeading = %+v, %v; want nobody", l, err)
	}
}

// Once Close has returned OnNewLeader's f is not called again, even for a change the observer
// read as Close ran; Close waits for a call in progress; f may call Close itself.
func TestElectionCloseEndsOnNewLeader(t *testing.T) {
	const name = "go:election:close-ends-callbacks"
	c := newClient(t, shared.urls(), patient...)
	other := mustElection(t, observer, name, "other", electionTTL)

	// A leader change races with Close, many times over.
	for i := 0; i < 30; i++ {
		var closed atomic.Bool
		first := make(chan struct{}, 1)
		e := mustElection(t, c, name, "me", electionTTL, redquorum.OnNewLeader(func(*redquorum.Leader) {
			if closed.Load() {
				t.Errorf("round %d: OnNewLeader called after Close returned", i)
			}
			select {
			case first <- struct{}{}:
			default:
			}
		}))
		receive(t, "OnNewLeader with the first state", first)
		l := mustCampaign(t, other)
		e.Close()
		closed.Store(true)
		if err := l.Resign(); err != nil {
			t.Fatal(err)
		}
	}

	// Close waits for a call in progress, and f may call Close.
	var e *redquorum.Election
	ready := make(chan struct{})
	first := make(chan struct{}, 1)
	inside := make(chan struct{}, 1)
	release := make(chan struct{})
	innerClose := make(chan struct{}, 1)
	calls := 0
	e = mustElection(t, c, name, "me", electionTTL, redquorum.OnNewLeader(func(*redquorum.Leader) {
		calls++
		switch calls {
		case 1:
			<-ready // e is set
			first <- struct{}{}
		case 2:
			inside <- struct{}{}
			<-release
			e.Close() // returns at once inside f
			innerClose <- struct{}{}
		default:
			t.Errorf("OnNewLeader call %d after Close", calls)
		}
	}))
	close(ready)
	receive(t, "OnNewLeader with the first state", first)
	l := mustCampaign(t, other)
	defer l.Resign()
	receive(t, "OnNewLeader with the leader", inside)
	closeReturned := make(chan struct{})
	go func() {
		e.Close()
		close(closeReturned)
	}()
	select {
	case <-closeReturned:
		t.Fatal("Close returned while OnNewLeader's f was running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	receive(t, "Close from inside OnNewLeader", innerClose)
	select {
	case <-closeReturned:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once OnNewLeader's f had")
	}
}

// campaignAndForget wins a leadership and drops it without Resign, keeping only its Context.
//
//go:noinline
func campaignAndForget(t *testing.T, e *redquorum.Election) (context.Context, uint64) {
	l := mustCampaign(t, e)
	return l.Context(), l.Term()
}

// A Leadership dropped without Resign is resigned by its finalizer (holding its Context does
// not keep it alive): the Context ends, OnStoppedLeading runs, and the nodes let go long before
// the TTL.
func TestForgottenLeadershipIsResigned(t *testing.T) {
	const name = "go:election:forgotten"
	stopped := make(chan uint64, 1)
	e := mustElection(t, newClient(t, shared.urls(), patient...), name, "forgetful", electionTTL,
		redquorum.OnStoppedLeading(func(term uint64) { stopped <- term }))
	work, term := campaignAndForget(t, e)
	for deadline := time.Now().Add(10 * time.Second); work.Err() == nil && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	assertDone(t, "forgotten", work, context.Canceled)
	if got := receive(t, "OnStoppedLeading", stopped); got != term {
		t.Errorf("OnStoppedLeading(%d), want %d", got, term)
	}
	for deadline := time.Now().Add(electionTTL / 2); ; time.Sleep(20 * time.Millisecond) {
		l, err := observer.Leader(name)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%+v still leads %v after its Leadership was finalized", l, electionTTL/2)
		}
	}
}

func TestElectionBadArguments(t *testing.T) {
	c := newClient(t, shared.urls(), patient...)
	bad := map[string]func() error{
		"empty name":      func() error { _, err := c.Election("", "a", electionTTL); return err },
		"empty identity":  func() error { _, err := c.Election("go:election:bad", "", electionTTL); return err },
		"NUL in name":     func() error { _, err := c.Election("go:\x00", "a", electionTTL); return err },
		"NUL in identity": func() error { _, err := c.Election("go:election:bad", "a\x00", electionTTL); return err },
		"non-UTF-8":       func() error { _, err := c.Election("go:election:bad", "\xff", electionTTL); return err },
		"long name":       func() error { _, err := c.Election(strings.Repeat("n", 1025), "a", electionTTL); return err },
		"long identity": func() error {
			_, err := c.Election("go:election:bad", strings.Repeat("i", 257), electionTTL)
			return err
		},
		"zero TTL":         func() error { _, err := c.Election("go:election:bad", "a", 0); return err },
		"negative TTL":     func() error { _, err := c.Election("go:election:bad", "a", -time.Second); return err },
		"TTL too short":    func() error { _, err := c.Election("go:election:bad", "a", 100*time.Millisecond); return err },
		"Leader(\"\")":     func() error { _, err := c.Leader(""); return err },
		"Observe(\"\")":    func() error { _, err := c.Observe(context.Background(), ""); return err },
		"Observe(nil ctx)": func() error { _, err := c.Observe(nil, "go:election:bad"); return err },
	}
	for what, call := range bad {
		assertInvalid(t, what, call())
	}
	// The longest name and identity are fine.
	e := mustElection(t, c, strings.Repeat("n", 1024), strings.Repeat("i", 256), electionTTL)
	l, err := e.TryCampaign()
	if err != nil {
		t.Fatal(err)
	}
	if leader, err := c.Leader(e.Name()); err != nil || leader == nil || leader.Identity != e.Identity() {
		t.Errorf("Leader with the longest name = %+v, %v", leader, err)
	}
	if err := l.Resign(); err != nil {
		t.Fatal(err)
	}
	_, err = e.Campaign(nil)
	assertInvalid(t, "Campaign(nil ctx)", err)

	var nilClient *redquorum.Client
	_, err = nilClient.Election("go:election:bad", "a", electionTTL)
	assertInvalid(t, "nil Client: Election", err)
	_, err = nilClient.Leader("go:election:bad")
	assertInvalid(t, "nil Client: Leader", err)
	_, err = nilClient.Observe(context.Background(), "go:election:bad")
	assertInvalid(t, "nil Client: Observe", err)

	var nilElection *redquorum.Election
	_, err = nilElection.Campaign(context.Background())
	assertInvalid(t, "nil Election: Campaign", err)
	_, err = nilElection.TryCampaign()
	assertInvalid(t, "nil Election: TryCampaign", err)
	_, err = nilElection.Leader()
	assertInvalid(t, "nil Election: Leader", err)
	assertClosed(t, "nil Election: Observe", nilElection.Observe(context.Background()))
	if nilElection.Name() != "" || nilElection.Identity() != "" || nilElection.TTL() != 0 || nilElection.Close() != nil {
		t.Error("nil Election: accessors or Close")
	}

	var nilLeadership *redquorum.Leadership
	assertInvalid(t, "nil Leadership: Resign", nilLeadership.Resign())
	if nilLeadership.IsLeader() || nilLeadership.Validity() != 0 || nilLeadership.Term() != 0 || nilLeadership.Name() != "" || nilLeadership.Identity() != "" {
		t.Error("nil Leadership: accessors are not the zero value")
	}
	if nilLeadership.Context().Err() == nil {
		t.Error("nil Leadership: Context is not done")
	}
}

// waiters is how many of c's acquisitions (campaigns included) are waiting now.
func waiters(t *testing.T, c *redquorum.Client) uint64 {
	t.Helper()
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s.Waiters
}

// untilWaiting waits until c has more acquisitions waiting than before: a call started since
// is in flight.
func untilWaiting(t *testing.T, c *redquorum.Client, before uint64) {
	t.Helper()
	eventually(t, "the call waits", func() bool { return waiters(t, c) > before })
}
