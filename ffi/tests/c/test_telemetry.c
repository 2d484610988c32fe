/*
 * The telemetry of the C ABI against real nodes: the stats snapshot counts what was done and
 * writes it as Prometheus text; event callbacks get each event with its fields on the client's
 * dispatcher thread, may call back into the library, and never run again once their listener
 * was freed (from another thread or from inside the callback); every refused argument.
 */
#include "harness.h"

/* How long an event may take to reach its callback: generous, for valgrind. */
#define EVENT_BOUND_MS 10000

/* What a callback saw of one event, copied out of it (the event lives only during the call). */
struct seen_event {
    redlock_event_kind kind;
    char name[32];
    char resource[64];
    char lock_kind[16];
    char reason[64];
    int has_resource, has_lock_kind, has_node, has_reason, has_duration;
    uint64_t duration_ms;
    uint64_t unix_ms;
    int on_main_thread;
};

#define MAX_SEEN 256

/* A callback's user data: the events it saw, and what it does meanwhile. */
struct recorder {
    pthread_mutex_t mutex;
    struct seen_event seen[MAX_SEEN];
    int count;
    const redlock_client *client; /* read the stats from inside the callback when not NULL */
    int stats_read;
    redlock_event_listener *self_free; /* freed by the callback at its first event */
};

static pthread_t main_thread;

static void copy(char *to, size_t cap, const char *from) {
    snprintf(to, cap, "%s", from != NULL ? from : "");
}

static void record_event(void *user, const redlock_event *event) {
    struct recorder *r = user;
    if (r->client != NULL) {
        redlock_stats *stats = NULL;
        if (redlock_client_stats(r->client, &stats, NULL) == REDLOCK_OK) {
            pthread_mutex_lock(&r->mutex);
            r->stats_read++;
            pthread_mutex_unlock(&r->mutex);
        }
        redlock_stats_free(stats);
    }
    pthread_mutex_lock(&r->mutex);
    if (r->count < MAX_SEEN) {
        struct seen_event *s = &r->seen[r->count];
        s->kind = redlock_event_kind_of(event);
        copy(s->name, sizeof s->name, redlock_event_name(event));
        s->has_resource = redlock_event_resource(event) != NULL;
        copy(s->resource, sizeof s->resource, redlock_event_resource(event));
        s->has_lock_kind = redlock_event_lock_kind(event) != NULL;
        copy(s->lock_kind, sizeof s->lock_kind, redlock_event_lock_kind(event));
        s->has_node = redlock_event_node(event) != NULL;
        s->has_reason = redlock_event_reason(event) != NULL;
        copy(s->reason, sizeof s->reason, redlock_event_reason(event));
        s->has_duration = redlock_event_duration_ms(event, &s->duration_ms);
        s->unix_ms = redlock_event_unix_ms(event);
        s->on_main_thread = pthread_equal(pthread_self(), main_thread);
    }
    r->count++;
    pthread_mutex_unlock(&r->mutex);
    if (r->self_free != NULL) {
        redlock_event_listener *me = r->self_free;
        r->self_free = NULL;
        redlock_event_listener_free(me);
    }
}

static void recorder_init(struct recorder *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mutex, NULL);
}

static int recorder_count(struct recorder *r) {
    pthread_mutex_lock(&r->mutex);
    int n = r->count;
    pthread_mutex_unlock(&r->mutex);
    return n;
}

/* The index of the first event of `kind` on `resource` (NULL: any), waiting for it up to
 * EVENT_BOUND_MS; -1 when none came. */
static int wait_for_event(struct recorder *r, redlock_event_kind kind, const char *resource) {
    uint64_t deadline = now_ms() + EVENT_BOUND_MS;
    for (;;) {
        pthread_mutex_lock(&r->mutex);
        for (int i = 0; i < r->count && i < MAX_SEEN; i++) {
            if (r->seen[i].kind == kind &&
                (resource == NULL || strcmp(r->seen[i].resource, resource) == 0)) {
                pthread_mutex_unlock(&r->mutex);
                return i;
            }
        }
        pthread_mutex_unlock(&r->mutex);
        if (now_ms() > deadline)
            return -1;
        sleep_ms(20);
    }
}

static redlock_event_listener *listen_to(redlock_client *client, struct recorder *r) {
    redlock_event_listener *listener = NULL;
    redlock_error *err = NULL;
    redlock_status st = redlock_client_on_event(client, record_event, r, &listener, &err);
    if (st != REDLOCK_OK) {
        fprintf(stderr, "redlock_client_on_event: %s\n", redlock_error_message(err));
        exit(2);
    }
    return listener;
}

static redlock_stats *stats_of(const redlock_client *client) {
    redlock_stats *stats = NULL;
    redlock_error *err = NULL;
    if (redlock_client_stats(client, &stats, &err) != REDLOCK_OK) {
        fprintf(stderr, "redlock_client_stats: %s\n", redlock_error_message(err));
        exit(2);
    }
    return stats;
}

static void test_stats_count_what_was_done(void) {
    redlock_client *client = client_with(test_options());
    redlock_stats *stats = stats_of(client);
    CHECK(redlock_stats_acquisitions(stats, NULL) == 0);
    CHECK(redlock_stats_locks_held(stats) == 0);
    redlock_stats_free(stats);

    redlock_lock *locks[3] = {NULL, NULL, NULL};
    const char *names[3] = {"tel:count:0", "tel:count:1", "tel:count:2"};
    for (int i = 0; i < 3; i++)
        CHECK(redlock_client_lock(client, names[i], 10000, &locks[i], NULL) == REDLOCK_OK);
    redlock_lock *busy = NULL;
    redlock_error *err = NULL;
    check_error(redlock_client_try_lock(client, names[0], 10000, &busy, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    CHECK(busy == NULL);
    CHECK(redlock_lock_extend(locks[1], 10000, NULL) == REDLOCK_OK);

    stats = stats_of(client);
    CHECK(redlock_stats_acquisitions(stats, "acquired") == 3);
    CHECK(redlock_stats_acquisitions(stats, "refused") == 1);
    CHECK(redlock_stats_acquisitions(stats, NULL) == 4);
    CHECK(redlock_stats_acquisitions(stats, "no_quorum") == 0);
    CHECK(redlock_stats_acquisitions(stats, "no such outcome") == 0);
    CHECK(redlock_stats_locks_held(stats) == 3);
    CHECK(redlock_stats_extensions(stats) == 1);
    CHECK(redlock_stats_extensions_failed(stats) == 0);
    CHECK(redlock_stats_lost(stats, NULL) == 0);
    CHECK(redlock_stats_waiters(stats) == 0);
    CHECK(redlock_stats_events_dropped(stats) == 0);
    const char *text = redlock_stats_prometheus(stats);
    REQUIRE(text != NULL);
    CHECK(strstr(text, "redlock_acquisitions_total{outcome=\"acquired\",kind=\"plain\"} 3\n") !=
          NULL);
    CHECK(strstr(text, "redlock_locks_held 3\n") != NULL);
    CHECK(strstr(text, "# TYPE redlock_acquire_duration_seconds histogram\n") != NULL);
    CHECK(strstr(text, "tel:count") == NULL); /* resource names never become labels */
    CHECK(redlock_stats_prometheus(stats) == text); /* written once, owned by the snapshot */
    redlock_stats_free(stats);

    for (int i = 0; i < 3; i++) {
        CHECK(redlock_lock_release(locks[i], NULL) == REDLOCK_OK);
        redlock_lock_free(locks[i]);
    }
    stats = stats_of(client);
    CHECK(redlock_stats_locks_held(stats) == 0);
    CHECK(strstr(redlock_stats_prometheus(stats), "redlock_hold_duration_seconds_count 3\n") !=
          NULL);
    redlock_stats_free(stats);
    redlock_client_free(client);
}

static void test_events_reach_the_callback_with_their_fields(void) {
    redlock_client *client = client_with(test_options());
    struct recorder r;
    recorder_init(&r);
    r.client = client; /* the callback reads the stats: it may call into the library */
    redlock_event_listener *listener = listen_to(client, &r);
    uint64_t before = (uint64_t)(wall_us() / 1000);

    redlock_lock *lock = NULL;
    REQUIRE(redlock_client_lock(client, "tel:ev", 10000, &lock, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_extend(lock, 10000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);

    int acquired = wait_for_event(&r, REDLOCK_EVENT_ACQUIRED, "tel:ev");
    int extended = wait_for_event(&r, REDLOCK_EVENT_EXTENDED, "tel:ev");
    int released = wait_for_event(&r, REDLOCK_EVENT_RELEASED, "tel:ev");
    REQUIRE(acquired >= 0 && extended >= 0 && released >= 0);
    CHECK(acquired < extended && extended < released); /* in the order they happened */
    pthread_mutex_lock(&r.mutex);
    struct seen_event a = r.seen[acquired], e = r.seen[extended], rel = r.seen[released];
    int stats_read = r.stats_read;
    pthread_mutex_unlock(&r.mutex);
    CHECK(strcmp(a.name, "acquired") == 0);
    CHECK(a.has_resource && a.has_lock_kind && strcmp(a.lock_kind, "plain") == 0);
    CHECK(!a.has_node && !a.has_reason);
    CHECK(a.has_duration);
    CHECK(a.unix_ms + 1000 >= before && a.unix_ms <= wall_us() / 1000 + 1000);
    CHECK(!a.on_main_thread && !e.on_main_thread && !rel.on_main_thread);
    CHECK(strcmp(e.name, "extended") == 0 && !e.has_duration);
    CHECK(strcmp(rel.name, "released") == 0 && rel.has_duration && !rel.has_reason);
    CHECK(stats_read >= 3);

    redlock_event_listener_free(listener);
    pthread_mutex_destroy(&r.mutex);
    redlock_client_free(client);
}

static void test_a_lost_lock_is_an_event_and_a_count(void) {
    redlock_client *client = client_with(test_options());
    struct recorder r;
    recorder_init(&r);
    redlock_event_listener *listener = listen_to(client, &r);

    /* Extended every 3 s from the start: the first extension finds the keys gone. */
    redlock_request *req = request_one("tel:lost", 9000);
    CHECK(redlock_request_set_auto_extend(req, 0, 0, 0, NULL) == REDLOCK_OK);
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    redlock_status st = redlock_request_acquire(req, client, NULL, NULL, &lock, &err);
    if (st != REDLOCK_OK)
        fprintf(stderr, "  acquire: %s\n", redlock_error_message(err));
    redlock_error_free(err);
    REQUIRE(st == REDLOCK_OK);
    for (size_t i = 0; i < n_urls; i++)
        raw_del(urls[i], "tel:lost");
    int lost = wait_for_event(&r, REDLOCK_EVENT_LOST, "tel:lost");
    REQUIRE(lost >= 0);
    pthread_mutex_lock(&r.mutex);
    struct seen_event l = r.seen[lost];
    pthread_mutex_unlock(&r.mutex);
    CHECK(strcmp(l.name, "lost") == 0);
    CHECK(l.has_reason && strcmp(l.reason, "refused") == 0);
    CHECK(l.has_duration);
    CHECK(redlock_lock_is_lost(lock));

    redlock_stats *stats = stats_of(client);
    CHECK(redlock_stats_lost(stats, "refused") == 1);
    CHECK(redlock_stats_lost(stats, NULL) == 1);
    CHECK(redlock_stats_lost(stats, "expired") == 0);
    CHECK(redlock_stats_locks_held(stats) == 0);
    redlock_stats_free(stats);

    redlock_lock_free(lock);
    redlock_request_free(req);
    redlock_event_listener_free(listener);
    pthread_mutex_destroy(&r.mutex);
    redlock_client_free(client);
}

/* Takes and releases `n` locks on `resource`, each a few events. */
static void churn(redlock_client *client, const char *resource, int n) {
    for (int i = 0; i < n; i++) {
        redlock_lock *lock = NULL;
        if (redlock_client_lock(client, resource, 10000, &lock, NULL) == REDLOCK_OK)
            redlock_lock_release(lock, NULL);
        redlock_lock_free(lock);
    }
}

static void test_a_freed_listener_is_never_called_again(void) {
    redlock_client *client = client_with(test_options());
    struct recorder first, second, self;
    recorder_init(&first);
    recorder_init(&second);
    recorder_init(&self);
    redlock_event_listener *a = listen_to(client, &first);
    redlock_event_listener *b = listen_to(client, &second);
    /* A listener that frees itself from inside its callback, at its first event. */
    self.self_free = listen_to(client, &self);

    churn(client, "tel:free:0", 2);
    CHECK(wait_for_event(&first, REDLOCK_EVENT_RELEASED, "tel:free:0") >= 0);
    CHECK(wait_for_event(&second, REDLOCK_EVENT_RELEASED, "tel:free:0") >= 0);
    CHECK(wait_for_event(&self, REDLOCK_EVENT_ACQUIRED, "tel:free:0") >= 0);

    /* Freed from this thread while events flow: once the free returned, nothing more comes. */
    redlock_event_listener_free(a);
    int after_free = recorder_count(&first);
    churn(client, "tel:free:1", 3);
    CHECK(wait_for_event(&second, REDLOCK_EVENT_RELEASED, "tel:free:1") >= 0);
    CHECK(recorder_count(&first) == after_free);
    CHECK(recorder_count(&self) == 1);

    redlock_event_listener_free(b);
    redlock_event_listener_free(NULL);
    pthread_mutex_destroy(&first.mutex);
    pthread_mutex_destroy(&second.mutex);
    pthread_mutex_destroy(&self.mutex);
    redlock_client_free(client);
}

static void test_a_listener_may_outlive_its_client(void) {
    redlock_client *client = client_with(test_options());
    struct recorder r;
    recorder_init(&r);
    redlock_event_listener *listener = listen_to(client, &r);
    churn(client, "tel:outlive", 1);
    CHECK(wait_for_event(&r, REDLOCK_EVENT_RELEASED, "tel:outlive") >= 0);
    redlock_client_free(client);
    redlock_event_listener_free(listener);
    pthread_mutex_destroy(&r.mutex);
}

static void test_bad_arguments(void) {
    redlock_client *client = client_with(test_options());
    struct recorder r;
    recorder_init(&r);
    redlock_event_listener *listener = NULL;
    redlock_error *err = NULL;
    check_error(redlock_client_on_event(NULL, record_event, &r, &listener, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_on_event(client, NULL, &r, &listener, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_on_event(client, record_event, &r, NULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(listener == NULL);
    redlock_stats *stats = NULL;
    check_error(redlock_client_stats(NULL, &stats, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_stats(client, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(stats == NULL);

    CHECK(redlock_event_kind_of(NULL) == REDLOCK_EVENT_UNKNOWN);
    CHECK(redlock_event_name(NULL) == NULL);
    CHECK(redlock_event_resource(NULL) == NULL);
    CHECK(redlock_event_lock_kind(NULL) == NULL);
    CHECK(redlock_event_node(NULL) == NULL);
    CHECK(redlock_event_reason(NULL) == NULL);
    uint64_t ms = 7;
    CHECK(!redlock_event_duration_ms(NULL, &ms) && ms == 7);
    CHECK(redlock_event_unix_ms(NULL) == 0);
    CHECK(redlock_stats_prometheus(NULL) == NULL);
    CHECK(redlock_stats_acquisitions(NULL, NULL) == 0);
    CHECK(redlock_stats_lost(NULL, "refused") == 0);
    CHECK(redlock_stats_locks_held(NULL) == 0);
    CHECK(redlock_stats_waiters(NULL) == 0);
    CHECK(redlock_stats_extensions(NULL) == 0);
    CHECK(redlock_stats_extensions_failed(NULL) == 0);
    CHECK(redlock_stats_events_dropped(NULL) == 0);
    redlock_stats_free(NULL);
    pthread_mutex_destroy(&r.mutex);
    redlock_client_free(client);
}

static void all(void) {
    test_stats_count_what_was_done();
    test_events_reach_the_callback_with_their_fields();
    test_a_lost_lock_is_an_event_and_a_count();
    test_a_freed_listener_is_never_called_again();
    test_a_listener_may_outlive_its_client();
    test_bad_arguments();
}

/* A majority is down: acquisitions end without a quorum, which is an event and a count. */
static void no_quorum(void) {
    redlock_client *client = client_with(test_options());
    struct recorder r;
    recorder_init(&r);
    redlock_event_listener *listener = listen_to(client, &r);
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    check_error(redlock_client_try_lock(client, "tel:nq", 10000, &lock, &err), REDLOCK_NO_QUORUM,
                &err);
    int nq = wait_for_event(&r, REDLOCK_EVENT_NO_QUORUM, "tel:nq");
    CHECK(nq >= 0);
    redlock_stats *stats = stats_of(client);
    CHECK(redlock_stats_acquisitions(stats, "no_quorum") == 1);
    CHECK(strstr(redlock_stats_prometheus(stats), "redlock_node_up{node=") != NULL);
    redlock_stats_free(stats);
    redlock_event_listener_free(listener);
    pthread_mutex_destroy(&r.mutex);
    redlock_client_free(client);
}

int main(int argc, char **argv) {
    main_thread = pthread_self();
    return suite_main(argc, argv, all, no_quorum);
}
