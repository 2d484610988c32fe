/*
 * Leader election through the C ABI (ffi/src/election.rs, leadership.rs, leader.rs,
 * observer.rs) end to end, against real redis-server nodes started by ffi/tests/c_abi.rs:
 * campaign, resign, the leader snapshot, observers, a waiting candidate woken by a
 * resignation, cancelled campaigns and observers, the callbacks (one of them freeing its own
 * election), a leadership found lost, and every argument that must be refused.
 *
 *   test_election all       URL...   every case that needs a healthy cluster
 *   test_election no-quorum URL...   run after the harness killed a majority of the nodes
 *
 * Prints "N passed, M failed" and exits non-zero on any failure. Plain C11 (POSIX threads).
 */
#include "harness.h"

/* The key the core keeps an election's leadership under (src/kinds/leader.rs). */
#define ELECTION_KEY(name) "redlock:election:" name

/* How long a test waits for something that happens "soon" (a callback, an observer's wake):
 * generous, for valgrind on a loaded machine. */
#define SOON_MS 20000

/* A leadership's TTL: every third of it an extension must fit, with room for one that stalls
 * for a node timeout and is retried. */
static uint64_t ttl_ms(void) { return 3 * node_timeout_ms() + 150; }

static redlock_election *election(redlock_client *client, const char *name, const char *identity,
                                  uint64_t ttl) {
    redlock_election *e = NULL;
    redlock_error *err = NULL;
    if (redlock_client_election(client, name, identity, ttl, &e, &err) != REDLOCK_OK) {
        fprintf(stderr, "redlock_client_election(%s, %s): %s\n", name, identity,
                redlock_error_message(err));
        exit(2);
    }
    return e;
}

/* Who leads `name` now (the caller frees it); NULL for nobody. */
static redlock_leader *leader_of(redlock_client *client, const char *name) {
    redlock_leader *who = (redlock_leader *)&client;
    redlock_error *err = NULL;
    redlock_status st = redlock_client_leader(client, name, &who, &err);
    CHECK(st == REDLOCK_OK && err == NULL);
    if (st != REDLOCK_OK) {
        fprintf(stderr, "  leader(%s): %s: %s\n", name, redlock_status_str(st),
                redlock_error_message(err));
        redlock_error_free(err);
        return NULL;
    }
    return who;
}

/* A refusal of bad input: REDLOCK_INVALID_ARGUMENT with a message that names `what`. */
static void check_invalid_at(redlock_status st, redlock_error **errp, const char *what, int line) {
    const char *message = *errp != NULL ? redlock_error_message(*errp) : NULL;
    int named = message != NULL && strstr(message, what) != NULL;
    CHECK(named);
    if (!named)
        fprintf(stderr, "  line %d: the message does not name %s: %s\n", line, what,
                message != NULL ? message : "(no error)");
    check_error_at(st, REDLOCK_INVALID_ARGUMENT, errp, line);
}
#define check_invalid(st, errp, what) check_invalid_at((st), (errp), (what), __LINE__)

/* ---- campaigns on a thread of their own ---- */

struct campaign {
    const redlock_election *election;
    const redlock_cancel *cancel; /* NULL: none */
    int bounded;                  /* campaign_for(wait_ms) rather than campaign */
    uint64_t wait_ms;
    pthread_mutex_t mu;
    int done;
    redlock_status status;
    redlock_leadership *leadership;
    redlock_error *err;
    uint64_t returned_ms;
};

static void campaign_init(struct campaign *c, const redlock_election *e,
                          const redlock_cancel *cancel) {
    memset(c, 0, sizeof *c);
    c->election = e;
    c->cancel = cancel;
    c->status = REDLOCK_PANIC;
    pthread_mutex_init(&c->mu, NULL);
}

static void *campaign_in_thread(void *arg) {
    struct campaign *c = arg;
    redlock_leadership *l = NULL;
    redlock_error *err = NULL;
    redlock_status st =
        c->bounded ? redlock_election_campaign_for(c->election, c->wait_ms, c->cancel, &l, &err)
                   : redlock_election_campaign(c->election, c->cancel, &l, &err);
    pthread_mutex_lock(&c->mu);
    c->status = st;
    c->leadership = l;
    c->err = err;
    c->returned_ms = now_ms();
    c->done = 1;
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static int campaign_done(struct campaign *c) {
    pthread_mutex_lock(&c->mu);
    int done = c->done;
    pthread_mutex_unlock(&c->mu);
    return done;
}

static void campaign_free(struct campaign *c) {
    redlock_leadership_free(c->leadership);
    redlock_error_free(c->err);
    pthread_mutex_destroy(&c->mu);
}

/* ---- the callbacks, recorded ---- */

#define MAX_SEEN 16

struct recorder {
    pthread_mutex_t mu;
    redlock_client *client; /* read inside the started callback */
    const char *name;
    int started, stopped, leaders;
    uint64_t started_term, stopped_term;
    char leader_in_started[64]; /* who redlock_client_leader said leads, from the callback */
    char identities[MAX_SEEN][64]; /* "" for nobody */
    uint64_t terms[MAX_SEEN];
};

static void on_started(void *user, uint64_t term) {
    struct recorder *r = user;
    /* Calling back into the library from the campaigning thread. */
    redlock_leader *who = NULL;
    redlock_client_leader(r->client, r->name, &who, NULL);
    pthread_mutex_lock(&r->mu);
    r->started++;
    r->started_term = term;
    snprintf(r->leader_in_started, sizeof r->leader_in_started, "%s",
             who != NULL ? redlock_leader_identity(who) : "");
    pthread_mutex_unlock(&r->mu);
    redlock_leader_free(who);
}

static void on_stopped(void *user, uint64_t term) {
    struct recorder *r = user;
    pthread_mutex_lock(&r->mu);
    r->stopped++;
    r->stopped_term = term;
    pthread_mutex_unlock(&r->mu);
}

static void on_new_leader(void *user, const redlock_leader *leader) {
    struct recorder *r = user;
    pthread_mutex_lock(&r->mu);
    if (r->leaders < MAX_SEEN) {
        snprintf(r->identities[r->leaders], sizeof r->identities[0], "%s",
                 leader != NULL ? redlock_leader_identity(leader) : "");
        r->terms[r->leaders] = redlock_leader_term(leader);
    }
    r->leaders++;
    pthread_mutex_unlock(&r->mu);
}

static int count_of(struct recorder *r, const int *field) {
    pthread_mutex_lock(&r->mu);
    int n = *field;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Waits up to SOON_MS until `*field` (of `r`) reaches `want`; 1 if it did. */
static int reaches(struct recorder *r, const int *field, int want) {
    uint64_t until = now_ms() + SOON_MS;
    while (count_of(r, field) < want) {
        if (now_ms() > until) {
            fprintf(stderr, "  a count stayed at %d, below %d\n", count_of(r, field), want);
            return 0;
        }
        sleep_ms(10);
    }
    return 1;
}

/* ---- the cases ---- */

static void test_campaign_resign_and_the_leader(void) {
    redlock_client *client = client_with(test_options());
    redlock_error *err = NULL;
    uint64_t ttl = ttl_ms();
    /* Nobody leads a new election: OK, and NULL written. */
    CHECK(leader_of(client, "c:basic") == NULL);

    redlock_election *e = election(client, "c:basic", "host-a", ttl);
    redlock_leadership *l = NULL;
    uint64_t before_ms = wall_us() / 1000;
    CHECK(redlock_election_campaign(e, NULL, &l, &err) == REDLOCK_OK);
    REQUIRE(l != NULL && err == NULL);
    uint64_t term = redlock_leadership_term(l);
    CHECK(term > 0);
    CHECK(redlock_leadership_is_leader(l));
    CHECK(!redlock_leadership_is_lost(l));
    uint64_t validity = redlock_leadership_validity_ms(l);
    CHECK(validity > 0 && validity <= ttl);
    CHECK(strcmp(redlock_leadership_name(l), "c:basic") == 0);
    CHECK(strcmp(redlock_leadership_identity(l), "host-a") == 0);

    redlock_leader *who = leader_of(client, "c:basic");
    REQUIRE(who != NULL);
    CHECK(strcmp(redlock_leader_identity(who), "host-a") == 0);
    CHECK(redlock_leader_term(who) == term);
    CHECK(redlock_leader_transitions(who) == 1);
    CHECK(redlock_leader_ttl_ms(who) > 0 && redlock_leader_ttl_ms(who) <= ttl);
    /* The nodes' clock, close to ours (a generous minute). */
    uint64_t since = redlock_leader_since_unix_ms(who);
    CHECK(since + 60000 > before_ms && since < wall_us() / 1000 + 60000);
    redlock_leader_free(who);
    /* The election's key holds a token on a quorum. */
    CHECK(on_nodes(ELECTION_KEY("c:basic")) >= quorum());

    CHECK(redlock_leadership_resign(l, &err) == REDLOCK_OK);
    CHECK(err == NULL);
    CHECK(!redlock_leadership_is_leader(l));
    CHECK(!redlock_leadership_is_lost(l));
    CHECK(redlock_leadership_validity_ms(l) == 0);
    CHECK(redlock_leadership_term(l) == term); /* readable after resigning */
    CHECK(strcmp(redlock_leadership_name(l), "c:basic") == 0);
    CHECK(leader_of(client, "c:basic") == NULL);
    CHECK(redlock_leadership_resign(l, &err) == REDLOCK_OK); /* a second resign does nothing */
    CHECK(gone_everywhere(ELECTION_KEY("c:basic")));
    redlock_leadership_free(l);

    /* Campaigning again: a new term, counted. */
    CHECK(redlock_election_campaign_for(e, 0, NULL, &l, NULL) == REDLOCK_OK);
    CHECK(redlock_leadership_term(l) > term);
    who = leader_of(client, "c:basic");
    CHECK(who != NULL && redlock_leader_transitions(who) == 2);
    redlock_leader_free(who);
    /* Freeing a leadership resigns it. */
    redlock_leadership_free(l);
    CHECK(gone_everywhere(ELECTION_KEY("c:basic")));
    redlock_election_free(e);
    redlock_client_free(client);
}

static void test_a_waiting_candidate_takes_over_after_resign(void) {
    redlock_client *a_client = client_with(test_options());
    redlock_client *b_client = client_with(test_options());
    /* Long enough that a takeover well within it was woken by the resignation, not by expiry. */
    uint64_t ttl = 10 * node_timeout_ms() + 20000;
    redlock_election *a = election(a_client, "c:takeover", "host-a", ttl);
    redlock_election *b = election(b_client, "c:takeover", "host-b", ttl);
    redlock_leadership *first = NULL;
    REQUIRE(redlock_election_campaign(a, NULL, &first, NULL) == REDLOCK_OK);

    struct campaign waiter;
    campaign_init(&waiter, b, NULL);
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, campaign_in_thread, &waiter) == 0);
    CHECK(waiting_for(ELECTION_KEY("c:takeover")));
    CHECK(!campaign_done(&waiter)); /* B does not lead while A does */
    uint64_t resigned = now_ms();
    CHECK(redlock_leadership_resign(first, NULL) == REDLOCK_OK);
    pthread_join(thread, NULL);
    CHECK(waiter.status == REDLOCK_OK);
    REQUIRE(waiter.leadership != NULL);
    CHECK(redlock_leadership_term(waiter.leadership) > redlock_leadership_term(first));
    CHECK(strcmp(redlock_leadership_identity(waiter.leadership), "host-b") == 0);
    CHECK(waiter.returned_ms - resigned < ttl / 2);

    redlock_leader *who = leader_of(a_client, "c:takeover");
    CHECK(who != NULL && strcmp(redlock_leader_identity(who), "host-b") == 0);
    CHECK(redlock_leader_term(who) == redlock_leadership_term(waiter.leadership));
    CHECK(redlock_leader_transitions(who) == 2);
    redlock_leader_free(who);

    /* A bounded campaign against a leader gives up: NOT_ACQUIRED, out untouched. */
    redlock_leadership *none = (redlock_leadership *)&thread;
    redlock_error *err = NULL;
    check_error(redlock_election_campaign_for(a, 0, NULL, &none, &err), REDLOCK_NOT_ACQUIRED,
                &err);
    uint64_t start = now_ms();
    redlock_status st = redlock_election_campaign_for(a, 300, NULL, &none, &err);
    CHECK(now_ms() - start >= 250);
    check_error(st, REDLOCK_NOT_ACQUIRED, &err);
    CHECK(none == (redlock_leadership *)&thread);

    campaign_free(&waiter);
    redlock_leadership_free(first);
    redlock_election_free(a);
    redlock_election_free(b);
    redlock_client_free(a_client);
    redlock_client_free(b_client);
}

static void test_a_cancelled_campaign_leaves_nothing_behind(void) {
    redlock_client *client = client_with(test_options());
    uint64_t ttl = ttl_ms();
    redlock_election *holder = election(client, "c:cancel", "holder", ttl);
    redlock_election *other = election(client, "c:cancel", "waiter", ttl);
    redlock_leadership *held = NULL;
    REQUIRE(redlock_election_campaign(holder, NULL, &held, NULL) == REDLOCK_OK);
    char token[64] = "";
    {
        redlock_inspection *insp = NULL;
        REQUIRE(redlock_client_inspect(client, ELECTION_KEY("c:cancel"), &insp, NULL) ==
                REDLOCK_OK);
        if (redlock_inspection_holder(insp) != NULL)
            snprintf(token, sizeof token, "%s", redlock_inspection_holder(insp));
        redlock_inspection_free(insp);
    }
    CHECK(strlen(token) > 0);

    redlock_cancel *cancel = NULL;
    REQUIRE(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    struct campaign waiter;
    campaign_init(&waiter, other, cancel);
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, campaign_in_thread, &waiter) == 0);
    CHECK(waiting_for(ELECTION_KEY("c:cancel")));
    uint64_t fired = now_ms();
    redlock_cancel_trigger(cancel);
    pthread_join(thread, NULL);
    CHECK(waiter.status == REDLOCK_CANCELLED);
    CHECK(waiter.leadership == NULL);
    CHECK(waiter.err != NULL && strstr(redlock_error_message(waiter.err), "c:cancel") != NULL);
    CHECK(waiter.returned_ms - fired < CANCEL_BOUND_MS);
    /* The holder's token only, on every node that has the key. */
    for (size_t i = 0; i < n_urls; i++)
        CHECK(raw_exists(urls[i], ELECTION_KEY("c:cancel")) == 0 ||
              raw_has_value(urls[i], ELECTION_KEY("c:cancel"), token));
    redlock_leader *who = leader_of(client, "c:cancel");
    CHECK(who != NULL && strcmp(redlock_leader_identity(who), "holder") == 0);
    redlock_leader_free(who);
    campaign_free(&waiter);

    /* A handle that fired before the call: cancelled at once, also bounded. */
    redlock_leadership *none = NULL;
    redlock_error *err = NULL;
    check_error(redlock_election_campaign(other, cancel, &none, &err), REDLOCK_CANCELLED, &err);
    check_error(redlock_election_campaign_for(other, 60000, cancel, &none, &err),
                REDLOCK_CANCELLED, &err);
    CHECK(none == NULL);
    redlock_cancel_free(cancel);

    CHECK(redlock_leadership_resign(held, NULL) == REDLOCK_OK);
    CHECK(gone_everywhere(ELECTION_KEY("c:cancel")));
    redlock_leadership_free(held);
    redlock_election_free(holder);
    redlock_election_free(other);
    redlock_client_free(client);
}

static void test_callbacks(void) {
    redlock_client *client = client_with(test_options());
    static struct recorder r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    r.client = client;
    r.name = "c:callbacks";
    redlock_election *e = election(client, "c:callbacks", "me", ttl_ms());
    CHECK(redlock_election_on_started_leading(e, on_started, &r, NULL) == REDLOCK_OK);
    CHECK(redlock_election_on_stopped_leading(e, on_stopped, &r, NULL) == REDLOCK_OK);
    CHECK(redlock_election_on_new_leader(e, on_new_leader, &r, NULL) == REDLOCK_OK);
    /* The state when it starts: nobody. */
    CHECK(reaches(&r, &r.leaders, 1));

    redlock_leadership *l = NULL;
    REQUIRE(redlock_election_campaign(e, NULL, &l, NULL) == REDLOCK_OK);
    uint64_t term = redlock_leadership_term(l);
    /* Started ran on this thread before the campaign returned, and could read the leader. */
    CHECK(count_of(&r, &r.started) == 1);
    CHECK(r.started_term == term);
    CHECK(strcmp(r.leader_in_started, "me") == 0);
    CHECK(count_of(&r, &r.stopped) == 0);
    CHECK(reaches(&r, &r.leaders, 2));

    CHECK(redlock_leadership_resign(l, NULL) == REDLOCK_OK);
    /* Stopped ran on this thread, once, with the term; freeing does not run it again. */
    CHECK(count_of(&r, &r.stopped) == 1);
    CHECK(r.stopped_term == term);
    redlock_leadership_free(l);
    CHECK(count_of(&r, &r.stopped) == 1);
    CHECK(reaches(&r, &r.leaders, 3));

    /* A leadership freed unresigned stops too. */
    REQUIRE(redlock_election_campaign(e, NULL, &l, NULL) == REDLOCK_OK);
    uint64_t second = redlock_leadership_term(l);
    CHECK(second > term);
    CHECK(count_of(&r, &r.started) == 2 && r.started_term == second);
    CHECK(reaches(&r, &r.leaders, 4));
    redlock_leadership_free(l);
    CHECK(count_of(&r, &r.stopped) == 2 && r.stopped_term == second);
    CHECK(reaches(&r, &r.leaders, 5));
    redlock_election_free(e); /* stops the new-leader callback */
    int seen = count_of(&r, &r.leaders);
    pthread_mutex_lock(&r.mu);
    CHECK(seen == 5);
    CHECK(strcmp(r.identities[0], "") == 0 && r.terms[0] == 0);
    CHECK(strcmp(r.identities[1], "me") == 0 && r.terms[1] == term);
    CHECK(strcmp(r.identities[2], "") == 0);
    CHECK(strcmp(r.identities[3], "me") == 0 && r.terms[3] == second);
    CHECK(strcmp(r.identities[4], "") == 0);
    pthread_mutex_unlock(&r.mu);

    /* Once freed, nothing more is reported: a later leader goes unseen. */
    redlock_election *other = election(client, "c:callbacks", "other", ttl_ms());
    REQUIRE(redlock_election_campaign(other, NULL, &l, NULL) == REDLOCK_OK);
    sleep_ms(300);
    CHECK(count_of(&r, &r.leaders) == 5);
    /* A callback registered again replaces the one before. */
    static struct recorder again;
    memset(&again, 0, sizeof again);
    pthread_mutex_init(&again.mu, NULL);
    again.client = client;
    again.name = "c:callbacks";
    CHECK(redlock_election_on_stopped_leading(other, on_stopped, &r, NULL) == REDLOCK_OK);
    CHECK(redlock_election_on_stopped_leading(other, on_stopped, &again, NULL) == REDLOCK_OK);
    /* The leadership won before keeps what was registered then: none. */
    redlock_leadership_free(l);
    CHECK(count_of(&again, &again.stopped) == 0 && count_of(&r, &r.stopped) == 2);
    REQUIRE(redlock_election_campaign(other, NULL, &l, NULL) == REDLOCK_OK);
    CHECK(redlock_leadership_resign(l, NULL) == REDLOCK_OK);
    CHECK(count_of(&again, &again.stopped) == 1 && count_of(&r, &r.stopped) == 2);
    redlock_leadership_free(l);
    redlock_election_free(other);
    redlock_client_free(client);
}

/* A new-leader callback that frees its own election, after trying to replace itself. */
struct self_free {
    pthread_mutex_t mu;
    redlock_election *election;
    int freed;
    redlock_status replaced;
};

static void free_own_election(void *user, const redlock_leader *leader) {
    struct self_free *s = user;
    (void)leader;
    pthread_mutex_lock(&s->mu);
    redlock_election *e = s->election;
    s->election = NULL;
    pthread_mutex_unlock(&s->mu);
    if (e == NULL)
        return;
    redlock_error *err = NULL;
    redlock_status replaced = redlock_election_on_new_leader(e, free_own_election, user, &err);
    redlock_error_free(err);
    redlock_election_free(e);
    pthread_mutex_lock(&s->mu);
    s->replaced = replaced;
    s->freed = 1;
    pthread_mutex_unlock(&s->mu);
}

static void test_a_new_leader_callback_frees_its_own_election(void) {
    redlock_client *client = client_with(test_options());
    static struct self_free s = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, REDLOCK_OK};
    s.election = election(client, "c:self-free", "me", ttl_ms());
    CHECK(redlock_election_on_new_leader(s.election, free_own_election, &s, NULL) == REDLOCK_OK);
    uint64_t until = now_ms() + SOON_MS;
    int freed = 0;
    while (!freed && now_ms() < until) {
        sleep_ms(10);
        pthread_mutex_lock(&s.mu);
        freed = s.freed;
        pthread_mutex_unlock(&s.mu);
    }
    CHECK(freed);
    CHECK(s.replaced == REDLOCK_INVALID_ARGUMENT);
    /* Give the thread that drops the election time to finish before the client goes. */
    sleep_ms(200);
    redlock_client_free(client);
}

/* What a leadership's on_lost callback saw. */
struct lost {
    pthread_mutex_t mu;
    redlock_leadership *leadership;
    int calls;
    char name[64];
    int leader_in_callback;
    redlock_status resign_in_callback;
};

static void on_leadership_lost(void *user, const char *name) {
    struct lost *f = user;
    /* Calling back into this very leadership from the extender thread. */
    int leading = redlock_leadership_is_leader(f->leadership);
    redlock_status resigned = redlock_leadership_resign(f->leadership, NULL);
    pthread_mutex_lock(&f->mu);
    f->calls++;
    f->leader_in_callback = leading;
    f->resign_in_callback = resigned;
    snprintf(f->name, sizeof f->name, "%s", name);
    pthread_mutex_unlock(&f->mu);
}

static void test_a_leadership_found_lost(void) {
    redlock_client *client = client_with(test_options());
    static struct recorder r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    redlock_election *e = election(client, "c:lost", "me", ttl_ms());
    CHECK(redlock_election_on_stopped_leading(e, on_stopped, &r, NULL) == REDLOCK_OK);
    static struct lost f = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, "", 1, REDLOCK_PANIC};
    REQUIRE(redlock_election_campaign(e, NULL, &f.leadership, NULL) == REDLOCK_OK);
    uint64_t term = redlock_leadership_term(f.leadership);
    CHECK(redlock_leadership_on_lost(f.leadership, on_leadership_lost, &f, NULL) == REDLOCK_OK);
    /* Someone else's admin deletes the key on a majority: the next extension finds it gone. The
     * campaign returned on a quorum: a node's SET may land up to SETTLE_MS later. */
    for (size_t i = 0; i < quorum(); i++)
        for (uint64_t until = now_ms() + SETTLE_MS;
             raw_del(urls[i], ELECTION_KEY("c:lost")) == 0 && now_ms() < until;)
            sleep_ms(10);
    uint64_t until = now_ms() + SOON_MS + 20 * ttl_ms();
    int calls = 0;
    while (calls == 0 && now_ms() < until) {
        sleep_ms(20);
        pthread_mutex_lock(&f.mu);
        calls = f.calls;
        pthread_mutex_unlock(&f.mu);
    }
    CHECK(calls == 1);
    CHECK(strcmp(f.name, "c:lost") == 0);
    CHECK(f.leader_in_callback == 0);
    CHECK(f.resign_in_callback == REDLOCK_LOST);
    CHECK(redlock_leadership_is_lost(f.leadership));
    CHECK(!redlock_leadership_is_leader(f.leadership));
    CHECK(redlock_leadership_validity_ms(f.leadership) == 0);
    /* Stopped ran once, for the loss, with the term. */
    CHECK(reaches(&r, &r.stopped, 1));
    CHECK(r.stopped_term == term);
    /* The callback's resign reported the loss; resigning again does nothing. */
    CHECK(redlock_leadership_resign(f.leadership, NULL) == REDLOCK_OK);
    /* Registered after the loss: runs at once, on this thread. */
    static struct lost late = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, "", 1, REDLOCK_PANIC};
    late.leadership = f.leadership;
    CHECK(redlock_leadership_on_lost(f.leadership, on_leadership_lost, &late, NULL) ==
          REDLOCK_OK);
    CHECK(late.calls == 1);
    redlock_leadership_free(f.leadership);
    CHECK(count_of(&r, &r.stopped) == 1);
    redlock_election_free(e);
    redlock_client_free(client);
}

/* One redlock_observer_next on a thread of its own. */
struct next_call {
    redlock_observer *observer;
    redlock_status status;
    redlock_leader *leader;
    redlock_error *err;
    uint64_t returned_ms;
};

static void *next_in_thread(void *arg) {
    struct next_call *n = arg;
    n->leader = (redlock_leader *)&n->leader; /* must stay untouched on failure */
    n->status = redlock_observer_next(n->observer, &n->leader, &n->err);
    n->returned_ms = now_ms();
    return NULL;
}

static void test_observe(void) {
    redlock_client *client = client_with(test_options());
    redlock_cancel *cancel = NULL;
    REQUIRE(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    redlock_observer *o = NULL;
    redlock_error *err = NULL;
    REQUIRE(redlock_client_observe(client, "c:observe", cancel, 0, &o, &err) == REDLOCK_OK);
    REQUIRE(o != NULL);

    /* The first call reports the state at once: nobody. */
    redlock_leader *who = (redlock_leader *)&o;
    CHECK(redlock_observer_next(o, &who, &err) == REDLOCK_OK);
    CHECK(who == NULL);

    redlock_election *e = election(client, "c:observe", "watched", ttl_ms());
    redlock_leadership *l = NULL;
    REQUIRE(redlock_election_campaign(e, NULL, &l, NULL) == REDLOCK_OK);
    CHECK(redlock_observer_next(o, &who, &err) == REDLOCK_OK);
    REQUIRE(who != NULL);
    CHECK(strcmp(redlock_leader_identity(who), "watched") == 0);
    CHECK(redlock_leader_term(who) == redlock_leadership_term(l));
    CHECK(redlock_leader_transitions(who) == 1);
    redlock_leader_free(who);

    /* A waiting next wakes on the resignation. */
    struct next_call n = {o, REDLOCK_PANIC, NULL, NULL, 0};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, next_in_thread, &n) == 0);
    sleep_ms(200);
    CHECK(redlock_leadership_resign(l, NULL) == REDLOCK_OK);
    pthread_join(thread, NULL);
    CHECK(n.status == REDLOCK_OK && n.leader == NULL);
    redlock_leadership_free(l);

    /* A waiting next ends when the cancel fires: CANCELLED, out untouched. */
    REQUIRE(pthread_create(&thread, NULL, next_in_thread, &n) == 0);
    sleep_ms(200);
    uint64_t fired = now_ms();
    redlock_cancel_trigger(cancel);
    pthread_join(thread, NULL);
    CHECK(n.status == REDLOCK_CANCELLED);
    CHECK(n.leader == (redlock_leader *)&n.leader);
    CHECK(n.err != NULL && strstr(redlock_error_message(n.err), "c:observe") != NULL);
    CHECK(n.returned_ms - fired < CANCEL_BOUND_MS);
    redlock_error_free(n.err);
    /* And every later call. */
    who = (redlock_leader *)&o;
    check_error(redlock_observer_next(o, &who, &err), REDLOCK_CANCELLED, &err);
    CHECK(who == (redlock_leader *)&o);
    redlock_observer_free(o);
    redlock_cancel_free(cancel);

    /* An observer keeps what it needs of its cancel handle, which may go first; one without a
     * handle, with its own poll, sees the state too. */
    redlock_cancel *first = NULL;
    REQUIRE(redlock_cancel_new(&first, NULL) == REDLOCK_OK);
    REQUIRE(redlock_client_observe(client, "c:observe", first, 50, &o, NULL) == REDLOCK_OK);
    redlock_cancel_trigger(first);
    redlock_cancel_free(first);
    check_error(redlock_observer_next(o, &who, &err), REDLOCK_CANCELLED, &err);
    redlock_observer_free(o);
    REQUIRE(redlock_client_observe(client, "c:observe", NULL, 50, &o, NULL) == REDLOCK_OK);
    CHECK(redlock_observer_next(o, &who, NULL) == REDLOCK_OK && who == NULL);
    redlock_observer_free(o);

    redlock_election_free(e);
    redlock_client_free(client);
}

static void test_bad_arguments(void) {
    redlock_client *client = client_with(test_options());
    redlock_error *err = NULL;
    redlock_election *e = (redlock_election *)&err;
    redlock_election *const esentinel = e;
    const char bad_utf8[] = {'\xc3', '\x28', 0};
    char long_identity[258], long_name[1026];
    memset(long_identity, 'i', 257);
    long_identity[257] = 0;
    memset(long_name, 'n', 1025);
    long_name[1025] = 0;
    uint64_t ttl = ttl_ms();

    check_invalid(redlock_client_election(NULL, "c:x", "a", ttl, &e, &err), &err, "client");
    check_invalid(redlock_client_election(client, NULL, "a", ttl, &e, &err), &err, "name");
    check_invalid(redlock_client_election(client, "", "a", ttl, &e, &err), &err, "name");
    check_invalid(redlock_client_election(client, bad_utf8, "a", ttl, &e, &err), &err, "name");
    check_invalid(redlock_client_election(client, long_name, "a", ttl, &e, &err), &err, "name");
    check_invalid(redlock_client_election(client, "c:x", NULL, ttl, &e, &err), &err, "identity");
    check_invalid(redlock_client_election(client, "c:x", "", ttl, &e, &err), &err, "identity");
    check_invalid(redlock_client_election(client, "c:x", bad_utf8, ttl, &e, &err), &err,
                  "identity");
    check_invalid(redlock_client_election(client, "c:x", long_identity, ttl, &e, &err), &err,
                  "identity");
    check_invalid(redlock_client_election(client, "c:x", "a", 0, &e, &err), &err, "ttl");
    /* Too short to be extended in time: a third of it must exceed the node timeout. */
    check_invalid(redlock_client_election(client, "c:x", "a", node_timeout_ms(), &e, &err), &err,
                  "ttl");
    check_invalid(redlock_client_election(client, "c:x", "a", 315360000001ULL, &e, &err), &err,
                  "ttl");
    check_invalid(redlock_client_election(client, "c:x", "a", ttl, NULL, &err), &err, "out");
    CHECK(redlock_client_election(client, NULL, "a", ttl, &e, NULL) == REDLOCK_INVALID_ARGUMENT);
    CHECK(e == esentinel);
    /* The longest name and identity are fine. */
    long_name[1024] = 0;
    long_identity[256] = 0;
    redlock_election *longest = election(client, long_name, long_identity, ttl);
    redlock_election_free(longest);

    e = election(client, "c:bad", "a", ttl);
    check_invalid(redlock_election_on_started_leading(NULL, on_stopped, NULL, &err), &err,
                  "election");
    check_invalid(redlock_election_on_started_leading(e, NULL, NULL, &err), &err, "callback");
    check_invalid(redlock_election_on_stopped_leading(NULL, on_stopped, NULL, &err), &err,
                  "election");
    check_invalid(redlock_election_on_stopped_leading(e, NULL, NULL, &err), &err, "callback");
    check_invalid(redlock_election_on_new_leader(NULL, on_new_leader, NULL, &err), &err,
                  "election");
    check_invalid(redlock_election_on_new_leader(e, NULL, NULL, &err), &err, "callback");

    redlock_leadership *l = (redlock_leadership *)&err;
    redlock_leadership *const lsentinel = l;
    check_invalid(redlock_election_campaign(NULL, NULL, &l, &err), &err, "election");
    check_invalid(redlock_election_campaign(e, NULL, NULL, &err), &err, "out");
    check_invalid(redlock_election_campaign_for(NULL, 0, NULL, &l, &err), &err, "election");
    check_invalid(redlock_election_campaign_for(e, 0, NULL, NULL, &err), &err, "out");
    CHECK(l == lsentinel);
    /* Nothing was taken by the refused campaigns. */
    CHECK(on_nodes(ELECTION_KEY("c:bad")) == 0);

    check_invalid(redlock_leadership_on_lost(NULL, NULL, NULL, &err), &err, "leadership");
    check_invalid(redlock_leadership_resign(NULL, &err), &err, "leadership");
    REQUIRE(redlock_election_campaign(e, NULL, &l, NULL) == REDLOCK_OK);
    check_invalid(redlock_leadership_on_lost(l, NULL, NULL, &err), &err, "callback");
    redlock_leadership_free(l);

    redlock_leader *who = (redlock_leader *)&err;
    redlock_leader *const wsentinel = who;
    check_invalid(redlock_client_leader(NULL, "c:x", &who, &err), &err, "client");
    check_invalid(redlock_client_leader(client, NULL, &who, &err), &err, "name");
    check_invalid(redlock_client_leader(client, "", &who, &err), &err, "name");
    check_invalid(redlock_client_leader(client, bad_utf8, &who, &err), &err, "name");
    check_invalid(redlock_client_leader(client, "c:x", NULL, &err), &err, "out");
    CHECK(who == wsentinel);

    redlock_observer *o = (redlock_observer *)&err;
    redlock_observer *const osentinel = o;
    check_invalid(redlock_client_observe(NULL, "c:x", NULL, 0, &o, &err), &err, "client");
    check_invalid(redlock_client_observe(client, NULL, NULL, 0, &o, &err), &err, "name");
    check_invalid(redlock_client_observe(client, "", NULL, 0, &o, &err), &err, "name");
    check_invalid(redlock_client_observe(client, bad_utf8, NULL, 0, &o, &err), &err, "name");
    check_invalid(redlock_client_observe(client, "c:x", NULL, 315360000001ULL, &o, &err), &err,
                  "poll_ms");
    check_invalid(redlock_client_observe(client, "c:x", NULL, 0, NULL, &err), &err, "out");
    CHECK(o == osentinel);
    check_invalid(redlock_observer_next(NULL, &who, &err), &err, "observer");
    REQUIRE(redlock_client_observe(client, "c:x", NULL, 0, &o, NULL) == REDLOCK_OK);
    check_invalid(redlock_observer_next(o, NULL, &err), &err, "out");
    redlock_observer_free(o);

    /* Getters of NULL, and frees of NULL. */
    CHECK(redlock_leadership_term(NULL) == 0);
    CHECK(!redlock_leadership_is_leader(NULL));
    CHECK(!redlock_leadership_is_lost(NULL));
    CHECK(redlock_leadership_validity_ms(NULL) == 0);
    CHECK(redlock_leadership_name(NULL) == NULL);
    CHECK(redlock_leadership_identity(NULL) == NULL);
    CHECK(redlock_leader_identity(NULL) == NULL);
    CHECK(redlock_leader_term(NULL) == 0);
    CHECK(redlock_leader_since_unix_ms(NULL) == 0);
    CHECK(redlock_leader_transitions(NULL) == 0);
    CHECK(redlock_leader_ttl_ms(NULL) == 0);
    redlock_election_free(NULL);
    redlock_leadership_free(NULL);
    redlock_leader_free(NULL);
    redlock_observer_free(NULL);

    redlock_election_free(e);
    redlock_client_free(client);
}

/* ---- with a majority of the nodes killed ---- */

static void *trigger_later(void *arg) {
    sleep_ms(300);
    redlock_cancel_trigger(arg);
    return NULL;
}

static void test_election_without_a_quorum(void) {
    redlock_client *client = client_with(test_options());
    redlock_error *err = NULL;
    redlock_leader *who = (redlock_leader *)&err;
    check_error(redlock_client_leader(client, "c:nq", &who, &err), REDLOCK_NO_QUORUM, &err);
    CHECK(who == (redlock_leader *)&err);

    redlock_election *e = election(client, "c:nq", "me", ttl_ms());
    redlock_leadership *l = NULL;
    redlock_status st = redlock_election_campaign_for(e, 0, NULL, &l, &err);
    CHECK(err != NULL && strstr(redlock_error_message(err), "127.0.0.1:") != NULL);
    check_error(st, REDLOCK_NO_QUORUM, &err);
    check_error(redlock_election_campaign_for(e, 200, NULL, &l, &err), REDLOCK_NO_QUORUM, &err);
    CHECK(l == NULL);

    /* An unbounded campaign keeps trying until its cancel fires. */
    redlock_cancel *cancel = NULL;
    REQUIRE(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, trigger_later, cancel) == 0);
    check_error(redlock_election_campaign(e, cancel, &l, &err), REDLOCK_CANCELLED, &err);
    pthread_join(thread, NULL);
    CHECK(l == NULL);
    redlock_cancel_free(cancel);

    /* An observer that cannot read a quorum reports nothing and keeps waiting. */
    REQUIRE(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    redlock_observer *o = NULL;
    REQUIRE(redlock_client_observe(client, "c:nq", cancel, 50, &o, NULL) == REDLOCK_OK);
    REQUIRE(pthread_create(&thread, NULL, trigger_later, cancel) == 0);
    who = (redlock_leader *)&err;
    check_error(redlock_observer_next(o, &who, &err), REDLOCK_CANCELLED, &err);
    pthread_join(thread, NULL);
    CHECK(who == (redlock_leader *)&err);
    redlock_observer_free(o);
    redlock_cancel_free(cancel);

    redlock_election_free(e);
    redlock_client_free(client);
}

static void all(void) {
    test_campaign_resign_and_the_leader();
    test_a_waiting_candidate_takes_over_after_resign();
    test_a_cancelled_campaign_leaves_nothing_behind();
    test_callbacks();
    test_a_new_leader_callback_frees_its_own_election();
    test_a_leadership_found_lost();
    test_observe();
    test_bad_arguments();
}

static void no_quorum(void) { test_election_without_a_quorum(); }

int main(int argc, char **argv) { return suite_main(argc, argv, all, no_quorum); }
