/*
 * The acquisition request and the cancel handle of the C ABI (ffi/src/request.rs,
 * ffi/src/cancel.rs) end to end, against real redis-server nodes started by ffi/tests/c_abi.rs:
 * a request is built once and acquired as often as needed, each acquisition with its own
 * cancel handle.
 *
 *   test_request all       URL...   every case that needs a healthy cluster
 *   test_request no-quorum URL...   run after the harness killed a majority of the nodes
 *
 * Prints "N passed, M failed" and exits non-zero on any failure. Plain C11 (POSIX for threads,
 * sockets, signals and timers).
 */
#include "harness.h"

#include <math.h>
#include <signal.h>

/* A client over the suite's nodes: the suite's node timeout, 3 retries 20 ± 10 ms apart (so a
 * refused call with the client's patience ends quickly). */
static redlock_client *new_client(void) {
    redlock_options *o = test_options();
    redlock_error *err = NULL;
    if (redlock_options_set_retry_count(o, 3, &err) != REDLOCK_OK ||
        redlock_options_set_retry_delay_ms(o, 20, &err) != REDLOCK_OK ||
        redlock_options_set_retry_jitter_ms(o, 10, &err) != REDLOCK_OK) {
        fprintf(stderr, "client options: %s\n", redlock_error_message(err));
        exit(2);
    }
    return client_with(o);
}

static redlock_request *request_many(const char *const *resources, size_t n, uint64_t ttl_ms) {
    redlock_request *req = NULL;
    redlock_error *err = NULL;
    if (redlock_request_new_many(resources, n, ttl_ms, &req, &err) != REDLOCK_OK) {
        fprintf(stderr, "redlock_request_new_many: %s\n", redlock_error_message(err));
        exit(2);
    }
    return req;
}

/* Acquires `req` with the cancel handle `cancel` (NULL: none), for the calling thread. */
static redlock_status acquire(const redlock_request *req, const redlock_client *client,
                              const redlock_cancel *cancel, redlock_lock **out,
                              redlock_error **err) {
    return redlock_request_acquire(req, client, cancel, NULL, out, err);
}

/* ---- 1. every setter with bad input ---- */

static void test_constructors_and_null_handles(void) {
    redlock_error *err = NULL;
    redlock_request *req = (redlock_request *)&err;
    redlock_request *const sentinel = req;
    const char bad_utf8[] = {'\xc3', '\x28', 0};

    check_error(redlock_request_new(NULL, 10000, &req, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new("", 10000, &req, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new(bad_utf8, 10000, &req, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new("cr:x", 10000, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(redlock_request_new(NULL, 10000, &req, NULL) == REDLOCK_INVALID_ARGUMENT);

    static char names[65][16];
    const char *distinct[65];
    for (int i = 0; i < 65; i++) {
        snprintf(names[i], sizeof names[i], "cr:n%d", i);
        distinct[i] = names[i];
    }
    const char *const twice[] = {"cr:x", "cr:y", "cr:x"};
    const char *const with_null[] = {"cr:x", NULL};
    const char *const with_empty[] = {"cr:x", ""};
    const char *const with_bad[] = {"cr:x", bad_utf8};
    check_error(redlock_request_new_many(NULL, 2, 10000, &req, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_new_many(distinct, 0, 10000, &req, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new_many(distinct, 65, 10000, &req, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new_many(twice, 3, 10000, &req, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_new_many(with_null, 2, 10000, &req, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new_many(with_empty, 2, 10000, &req, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new_many(with_bad, 2, 10000, &req, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new_many(distinct, 2, 10000, NULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(req == sentinel); /* out untouched on failure */

    /* 64 names is the limit, and it acquires (and releases) all of them. */
    redlock_client *client = new_client();
    redlock_request *all = NULL;
    CHECK(redlock_request_new_many(distinct, 64, 30000, &all, &err) == REDLOCK_OK && err == NULL);
    redlock_lock *lock = NULL;
    CHECK(acquire(all, client, NULL, &lock, &err) == REDLOCK_OK);
    CHECK(on_nodes("cr:n0") >= quorum() && on_nodes("cr:n63") >= quorum());
    CHECK(on_nodes("cr:n64") == 0);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_request_free(all);
    for (int i = 0; i < 64; i += 21) {
        CHECK(gone_everywhere(distinct[i]));
        CHECK(free_now(client, distinct[i]));
    }

    /* A NULL request is an error for every setter, never a crash. */
    redlock_cancel *cancel = NULL;
    CHECK(redlock_cancel_new(&cancel, &err) == REDLOCK_OK && err == NULL && cancel != NULL);
    check_error(redlock_request_set_fenced(NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_reentrant(NULL, "alice", &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_set_retries(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_retry_delay(NULL, 10, 10, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_set_wait(NULL, 10, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_notifications(NULL, false, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_set_fair(NULL, false, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_fair(NULL, true, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(redlock_request_set_fair(NULL, true, NULL) == REDLOCK_INVALID_ARGUMENT);
    check_error(redlock_request_set_auto_extend(NULL, 0.0, 0, 0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    CHECK(redlock_request_set_fenced(NULL, NULL) == REDLOCK_INVALID_ARGUMENT);
    redlock_request_free(NULL);

    /* The cancel handle's own NULL cases. */
    check_error(redlock_cancel_new(NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_cancel_trigger(NULL);
    CHECK(!redlock_cancel_is_triggered(NULL));
    CHECK(!redlock_cancel_is_triggered(cancel));
    redlock_cancel_trigger(cancel);
    redlock_cancel_trigger(cancel); /* idempotent */
    CHECK(redlock_cancel_is_triggered(cancel));
    redlock_cancel_free(cancel);
    redlock_cancel_free(NULL);

    /* redlock_request_acquire's own arguments: the request, the client and out must not be
     * NULL, the TTL must suit the client, the caller must be UTF-8 (it may be NULL, as the
     * cancel handle may). */
    redlock_request *ok = request_one("cr:acquire-args", 10000);
    redlock_lock *untouched = (redlock_lock *)&err;
    redlock_lock *const lsentinel = untouched;
    const char bad_caller[] = {'a', '\xc3', 0};
    CHECK(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    check_error(acquire(ok, NULL, cancel, &untouched, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(acquire(NULL, client, cancel, &untouched, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(acquire(ok, client, cancel, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_acquire(ok, client, cancel, bad_caller, &untouched, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(redlock_request_acquire(NULL, NULL, NULL, NULL, NULL, NULL) ==
          REDLOCK_INVALID_ARGUMENT);
    CHECK(!redlock_cancel_is_triggered(cancel)); /* a refused call leaves the handle alone */
    redlock_cancel_free(cancel);
    redlock_request *zero = request_one("cr:acquire-args", 0);
    check_error(acquire(zero, client, NULL, &untouched, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(zero);
    redlock_request *huge = request_one("cr:acquire-args", UINT64_MAX);
    check_error(acquire(huge, client, NULL, &untouched, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(huge);
    /* Too short to be auto-extended in time (it must exceed fraction x ttl + node timeout). */
    redlock_request *short_auto = request_one("cr:acquire-args", 10);
    CHECK(redlock_request_set_auto_extend(short_auto, 0.0, 0, 0, NULL) == REDLOCK_OK);
    check_error(acquire(short_auto, client, NULL, &untouched, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    redlock_request_free(short_auto);
    CHECK(untouched == lsentinel);
    /* None of it took the resource. */
    CHECK(gone_everywhere("cr:acquire-args"));
    CHECK(free_now(client, "cr:acquire-args"));
    redlock_request_free(ok);
    redlock_client_free(client);
}

/* Applies every bad value to `req`, and acquires it for a caller that is not UTF-8; each must
 * fail with a message and change nothing. */
static void apply_bad_setters(redlock_request *req, const redlock_client *client) {
    redlock_error *err = NULL;
    const char bad_utf8[] = {'\xff', '\xfe', 0};
    static char long_owner[1026];
    memset(long_owner, 'o', 1025);
    long_owner[1025] = 0;

    check_error(redlock_request_set_reentrant(req, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_reentrant(req, "", &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_reentrant(req, bad_utf8, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_set_reentrant(req, long_owner, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_set_retry_delay(req, UINT64_MAX, 0, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_retry_delay(req, 0, UINT64_MAX, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_retry_delay(req, 315360000001ULL, 10, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    const double bad_fractions[] = {-0.1, -0.0 - 1e-300, 1.0, 1.5, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad_fractions / sizeof bad_fractions[0]; i++)
        check_error(redlock_request_set_auto_extend(req, bad_fractions[i], 0, 0, &err),
                    REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_auto_extend(req, 0.5, UINT64_MAX, 0, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_auto_extend(req, 0.0, 315360000001ULL, 0, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    redlock_lock *lock = NULL;
    check_error(redlock_request_acquire(req, client, NULL, bad_utf8, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(lock == NULL);
}

/* Failed setters leave the request as it was: it still acquires the same kind, with the same
 * patience and auto-extension settings. */
static void test_bad_setters_change_nothing(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_lock *lock = NULL, *second = NULL;
    uint64_t n = 0;

    /* A plain request, one attempt, auto-extended with a cap of one extension. */
    redlock_request *plain = request_one("cr:bad-plain", 30000);
    CHECK(redlock_request_set_retries(plain, 0, &err) == REDLOCK_OK && err == NULL);
    CHECK(redlock_request_set_auto_extend(plain, 0.0, 0, 1, &err) == REDLOCK_OK && err == NULL);
    apply_bad_setters(plain, client);
    REQUIRE(acquire(plain, client, NULL, &lock, &err) == REDLOCK_OK);
    CHECK(strcmp(redlock_lock_resource(lock), "cr:bad-plain") == 0);
    CHECK(strlen(redlock_lock_token(lock)) == 40); /* a random token, not an owner */
    check_error(redlock_lock_fence(lock, &n, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_lock_hold_count(lock, &n, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(redlock_lock_is_held(lock));
    /* Still a single attempt: refused while held. */
    check_error(acquire(plain, client, NULL, &second, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(second == NULL);
    /* Still capped at one extension (manual ones count; the first automatic one is 10 s
     * away): a reset auto-extension would have no cap. */
    CHECK(redlock_lock_extend(lock, 30000, NULL) == REDLOCK_OK);
    check_error(redlock_lock_extend(lock, 30000, &err), REDLOCK_EXTENSION_LIMIT, &err);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    CHECK(gone_everywhere("cr:bad-plain"));

    /* A fenced request stays fenced. */
    redlock_request *fenced = request_one("cr:bad-fenced", 30000);
    CHECK(redlock_request_set_fenced(fenced, NULL) == REDLOCK_OK);
    apply_bad_setters(fenced, client);
    REQUIRE(acquire(fenced, client, NULL, &lock, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_fence(lock, &n, NULL) == REDLOCK_OK && n > 0);
    redlock_lock_free(lock);

    /* A reentrant request keeps its owner. */
    redlock_request *re = request_one("cr:bad-re", 30000);
    CHECK(redlock_request_set_reentrant(re, "alice", NULL) == REDLOCK_OK);
    apply_bad_setters(re, client);
    REQUIRE(acquire(re, client, NULL, &lock, NULL) == REDLOCK_OK);
    CHECK(strcmp(redlock_lock_token(lock), "alice") == 0);
    CHECK(redlock_lock_hold_count(lock, &n, NULL) == REDLOCK_OK && n == 1);
    redlock_lock_free(lock);

    /* A request of several resources takes no single-resource kind. */
    const char *const names[] = {"cr:bad-m2", "cr:bad-m1"};
    redlock_request *many = request_many(names, 2, 30000);
    check_error(redlock_request_set_fenced(many, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_reentrant(many, "alice", &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    apply_bad_setters(many, client);
    REQUIRE(acquire(many, client, NULL, &lock, NULL) == REDLOCK_OK);
    CHECK(strcmp(redlock_lock_resource(lock), "cr:bad-m1,cr:bad-m2") == 0);
    check_error(redlock_lock_fence(lock, &n, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_try_lock(client, "cr:bad-m1", 10000, &second, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    redlock_lock_free(lock);

    /* Good values at the edges are taken. A wait longer than 10 years is taken as 10 years. */
    CHECK(redlock_request_set_retries(many, UINT32_MAX, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_retry_delay(many, 315360000000ULL, 315360000000ULL, NULL) ==
          REDLOCK_OK);
    CHECK(redlock_request_set_retry_delay(many, 0, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_wait(many, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_wait(many, UINT64_MAX, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_auto_extend(many, 0.999, 315360000000ULL, UINT32_MAX, NULL) ==
          REDLOCK_OK);
    CHECK(redlock_request_set_auto_extend(many, 1e-9, 0, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_auto_extend(many, 0.0, 0, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_notifications(many, false, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_fair(many, false, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_fair(many, true, NULL) == REDLOCK_OK);
    CHECK(acquire(many, client, NULL, &lock, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);

    CHECK(gone_everywhere("cr:bad-fenced"));
    CHECK(gone_everywhere("cr:bad-re"));
    CHECK(gone_everywhere("cr:bad-m1") && gone_everywhere("cr:bad-m2"));
    redlock_request_free(plain);
    redlock_request_free(fenced);
    redlock_request_free(re);
    redlock_request_free(many);
    redlock_client_free(client);
}

/* ---- 2. kind x patience x auto-extension ---- */

enum kind { PLAIN, FENCED, REENTRANT, MANY, KINDS };
enum patience { DEFAULT, RETRIES, ONCE, WAIT, PATIENCES };
static const char *const kind_names[] = {"plain", "fenced", "reentrant", "many"};
static const char *const patience_names[] = {"default", "retries", "once", "wait"};

/* Each combination, on its own resources: acquired; the kind's facts; nobody else gets a
 * resource while it is held (and the request itself, for kinds that exclude it, is refused
 * with its patience); auto-extension keeps it alive; release; no key left; free again. */
static void run_combination(redlock_client *client, enum kind kind, enum patience patience,
                            int auto_extend) {
    char a[64], b[64];
    snprintf(a, sizeof a, "cr:%s:%s:%d:a", kind_names[kind], patience_names[patience],
             auto_extend);
    snprintf(b, sizeof b, "cr:%s:%s:%d:b", kind_names[kind], patience_names[patience],
             auto_extend);
    const char *const both[] = {b, a};
    size_t n_keys = kind == MANY ? 2 : 1;
    const char *const keys[] = {a, b};
    /* Auto-extended: an extension every node timeout; otherwise a TTL no run outlasts. */
    uint64_t ttl = auto_extend ? 10 * node_timeout_ms() : 30000;

    redlock_request *req = kind == MANY ? request_many(both, 2, ttl) : request_one(a, ttl);
    if (kind == FENCED)
        CHECK(redlock_request_set_fenced(req, NULL) == REDLOCK_OK);
    if (kind == REENTRANT)
        CHECK(redlock_request_set_reentrant(req, "owner-c", NULL) == REDLOCK_OK);
    switch (patience) {
    case DEFAULT:
        break;
    case RETRIES:
        CHECK(redlock_request_set_retries(req, 2, NULL) == REDLOCK_OK);
        CHECK(redlock_request_set_retry_delay(req, 20, 10, NULL) == REDLOCK_OK);
        break;
    case ONCE:
        CHECK(redlock_request_set_retries(req, 0, NULL) == REDLOCK_OK);
        break;
    case WAIT:
        CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
        break;
    default:
        break;
    }
    if (auto_extend)
        CHECK(redlock_request_set_auto_extend(req, 0.1, 0, 0, NULL) == REDLOCK_OK);

    redlock_error *err = NULL;
    redlock_lock *lock = NULL, *other = NULL;
    redlock_status st = acquire(req, client, NULL, &lock, &err);
    CHECK(st == REDLOCK_OK && err == NULL && lock != NULL);
    if (st != REDLOCK_OK) {
        fprintf(stderr, "  %s: %s: %s\n", a, redlock_status_str(st), redlock_error_message(err));
        redlock_error_free(err);
        redlock_request_free(req);
        return;
    }
    uint64_t t0 = now_ms();
    uint64_t deadline0 = t0 + redlock_lock_validity_ms(lock);
    CHECK(redlock_lock_is_held(lock));
    for (size_t i = 0; i < n_keys; i++)
        CHECK(on_nodes(keys[i]) >= quorum());

    uint64_t n = 0;
    switch (kind) {
    case PLAIN:
        CHECK(strcmp(redlock_lock_resource(lock), a) == 0);
        CHECK(strlen(redlock_lock_token(lock)) == 40);
        check_error(redlock_lock_fence(lock, &n, &err), REDLOCK_INVALID_ARGUMENT, &err);
        check_error(redlock_lock_hold_count(lock, &n, &err), REDLOCK_INVALID_ARGUMENT, &err);
        break;
    case FENCED: {
        CHECK(redlock_lock_fence(lock, &n, NULL) == REDLOCK_OK && n > 0);
        check_error(redlock_lock_hold_count(lock, &n, &err), REDLOCK_INVALID_ARGUMENT, &err);
        char fence_key[96];
        snprintf(fence_key, sizeof fence_key, "redlock:fence:{%s}", a);
        CHECK(on_nodes(fence_key) >= quorum()); /* the counter, kept without a TTL */
        break;
    }
    case REENTRANT: {
        CHECK(strcmp(redlock_lock_token(lock), "owner-c") == 0);
        CHECK(redlock_lock_hold_count(lock, &n, NULL) == REDLOCK_OK && n == 1);
        /* The same owner gets it again at once, with any patience: a second hold. */
        redlock_lock *again = NULL;
        CHECK(acquire(req, client, NULL, &again, NULL) == REDLOCK_OK);
        CHECK(redlock_lock_hold_count(again, &n, NULL) == REDLOCK_OK && n == 2);
        CHECK(redlock_lock_release(again, NULL) == REDLOCK_OK);
        redlock_lock_free(again);
        break;
    }
    case MANY: {
        char joined[130];
        snprintf(joined, sizeof joined, "%s,%s", a, b);
        CHECK(strcmp(redlock_lock_resource(lock), joined) == 0);
        check_error(redlock_lock_fence(lock, &n, &err), REDLOCK_INVALID_ARGUMENT, &err);
        break;
    }
    default:
        break;
    }

    /* Exclusion: a plain lock on any of its resources is refused while it is held ... */
    for (size_t i = 0; i < n_keys; i++) {
        check_error(redlock_client_try_lock(client, keys[i], 10000, &other, &err),
                    REDLOCK_NOT_ACQUIRED, &err);
        CHECK(other == NULL);
    }
    /* ... and so is the request itself when it is not reentrant, after its retries (a waiter
     * would wait the whole minute: that case is test_waiter_gets_the_lock_after_release). */
    if (kind != REENTRANT && patience != WAIT) {
        check_error(acquire(req, client, NULL, &other, &err), REDLOCK_NOT_ACQUIRED,
                    &err);
        CHECK(other == NULL);
    }

    if (auto_extend && patience == WAIT) {
        /* Watch one extension per kind happen (every node timeout): the deadline moves on. */
        int extended = 0;
        while (!extended && now_ms() < t0 + ttl / 2) {
            sleep_ms(50);
            extended = now_ms() + redlock_lock_validity_ms(lock) > deadline0 + ttl / 20;
        }
        CHECK(extended);
        CHECK(!redlock_lock_is_lost(lock));
    }
    CHECK(redlock_lock_is_held(lock));

    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    CHECK(!redlock_lock_is_held(lock));
    CHECK(!redlock_lock_is_lost(lock));
    for (size_t i = 0; i < n_keys; i++) {
        CHECK(gone_everywhere(keys[i]));
        CHECK(free_now(client, keys[i]));
    }
    redlock_lock_free(lock);
    redlock_request_free(req);
}

static void test_every_combination(void) {
    redlock_client *client = new_client();
    for (int k = 0; k < KINDS; k++)
        for (int p = 0; p < PATIENCES; p++)
            for (int ae = 0; ae <= 1; ae++)
                run_combination(client, (enum kind)k, (enum patience)p, ae);
    redlock_client_free(client);
}

/* A waiting request gets the lock when the holder releases, and gives up at its deadline. */
static void test_waiter_gets_the_lock_after_release(void) {
    redlock_client *client = new_client();
    redlock_lock *holder = NULL;
    CHECK(redlock_client_lock(client, "cr:wait", 30000, &holder, NULL) == REDLOCK_OK);
    redlock_request *req = request_one("cr:wait", 30000);
    CHECK(redlock_request_set_fenced(req, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
    struct acquisition w = acquisition(req, client, NULL, NULL);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, acquire_in_thread, &w) == 0);
    sleep_ms(300);
    CHECK(redlock_lock_release(holder, NULL) == REDLOCK_OK);
    pthread_join(thread, NULL);
    CHECK(w.status == REDLOCK_OK && w.lock != NULL);
    uint64_t fence = 0;
    CHECK(redlock_lock_fence(w.lock, &fence, NULL) == REDLOCK_OK && fence > 0);

    /* Held now by the waiter: a short wait gives up with REDLOCK_NOT_ACQUIRED. */
    redlock_request *brief = request_one("cr:wait", 30000);
    CHECK(redlock_request_set_wait(brief, 300, NULL) == REDLOCK_OK);
    redlock_lock *late = NULL;
    redlock_error *err = NULL;
    check_error(acquire(brief, client, NULL, &late, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(late == NULL);
    acquisition_free(&w); /* releases */
    CHECK(gone_everywhere("cr:wait"));
    CHECK(free_now(client, "cr:wait"));
    redlock_lock_free(holder);
    redlock_request_free(brief);
    redlock_request_free(req);
    redlock_client_free(client);
}

/* A waiter that leaves the cross-process queue (fair false) and one in it (fair true, also the
 * default) both get the lock when the holder releases. */
static void test_fair_and_unfair_waiters_get_the_lock(void) {
    redlock_client *client = new_client();
    const char *const keys[] = {"cr:fair-off", "cr:fair-on"};
    for (int fair = 0; fair <= 1; fair++) {
        const char *key = keys[fair];
        redlock_lock *holder = NULL;
        CHECK(redlock_client_lock(client, key, 30000, &holder, NULL) == REDLOCK_OK);
        redlock_request *req = request_one(key, 30000);
        redlock_error *err = NULL;
        CHECK(redlock_request_set_wait(req, 60000, &err) == REDLOCK_OK && err == NULL);
        /* The last call wins: the opposite first, then the one under test. */
        CHECK(redlock_request_set_fair(req, !fair, &err) == REDLOCK_OK && err == NULL);
        CHECK(redlock_request_set_fair(req, fair, &err) == REDLOCK_OK && err == NULL);
        struct acquisition w = acquisition(req, client, NULL, NULL);
        pthread_t thread;
        CHECK(pthread_create(&thread, NULL, acquire_in_thread, &w) == 0);
        CHECK(waiting_for(key));
        CHECK(redlock_lock_release(holder, NULL) == REDLOCK_OK);
        pthread_join(thread, NULL);
        CHECK(w.status == REDLOCK_OK && w.lock != NULL);
        if (w.status != REDLOCK_OK)
            fprintf(stderr, "  fair=%d: %s: %s\n", fair, redlock_status_str(w.status),
                    redlock_error_message(w.err));
        acquisition_free(&w); /* releases */
        CHECK(gone_everywhere(key));
        CHECK(free_now(client, key));
        redlock_lock_free(holder);
        redlock_request_free(req);
    }
    redlock_client_free(client);
}

/* ---- 3. cancellation ---- */

static redlock_cancel *new_cancel(void) {
    redlock_cancel *cancel = NULL;
    if (redlock_cancel_new(&cancel, NULL) != REDLOCK_OK) {
        fprintf(stderr, "redlock_cancel_new failed\n");
        exit(2);
    }
    return cancel;
}

/* Checks what a cancelled call returned, and frees it. */
static void check_cancelled(struct acquisition *w, uint64_t fired_ms) {
    CHECK(w->status == REDLOCK_CANCELLED);
    CHECK(w->lock == NULL);
    CHECK(w->err != NULL && redlock_error_status(w->err) == REDLOCK_CANCELLED);
    CHECK(w->err != NULL && strlen(redlock_error_message(w->err)) > 0);
    if (w->status != REDLOCK_CANCELLED)
        fprintf(stderr, "  got %s: %s\n", redlock_status_str(w->status),
                redlock_error_message(w->err));
    CHECK(w->returned_ms >= fired_ms && w->returned_ms - fired_ms < CANCEL_BOUND_MS);
    acquisition_free(w);
}

/* A waiter cancelled from another thread. The "holder" is a key set directly on a majority of
 * the nodes, so each of the waiter's attempts takes the other nodes and must undo that: once
 * cancelled, the waiter's key is on no node and the holder's keys are untouched. Then the same
 * with a retrying request against a lock held through the library. */
static void test_cancel_from_another_thread(void) {
    redlock_client *client = new_client();
    const char *key = "cr:cancel-thread";
    for (size_t i = 0; i < quorum(); i++)
        CHECK(raw_set_px(urls[i], key, "raw-holder", "120000"));

    redlock_cancel *cancel = new_cancel();
    redlock_request *req = request_one(key, 30000);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_retry_delay(req, 20, 10, NULL) == REDLOCK_OK);
    struct acquisition w = acquisition(req, client, cancel, NULL);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, acquire_in_thread, &w) == 0);
    sleep_ms(500);
    uint64_t fired = now_ms();
    redlock_cancel_trigger(cancel);
    pthread_join(thread, NULL);
    check_cancelled(&w, fired);
    CHECK(redlock_cancel_is_triggered(cancel));
    /* No key of the waiter anywhere; the holder's keys are still the holder's. */
    CHECK(gone_from(quorum(), key));
    for (size_t i = 0; i < quorum(); i++)
        CHECK(raw_has_value(urls[i], key, "raw-holder"));
    /* A fired handle ends the next call at once, before it sends anything. */
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    check_error(acquire(req, client, cancel, &lock, &err), REDLOCK_CANCELLED, &err);
    for (size_t i = 0; i < quorum(); i++)
        CHECK(raw_del(urls[i], key) == 1);
    CHECK(free_now(client, key));
    redlock_request_free(req);
    redlock_cancel_free(cancel);

    /* Retrying (no wait) against a held lock, cancelled between attempts; a many-request. */
    const char *const pair[] = {"cr:cancel-retry-a", "cr:cancel-retry-b"};
    redlock_lock *holder = NULL;
    CHECK(redlock_client_lock(client, pair[1], 30000, &holder, NULL) == REDLOCK_OK);
    cancel = new_cancel();
    req = request_many(pair, 2, 30000);
    CHECK(redlock_request_set_retries(req, UINT32_MAX, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_retry_delay(req, 50, 10, NULL) == REDLOCK_OK);
    struct acquisition r = acquisition(req, client, cancel, NULL);
    CHECK(pthread_create(&thread, NULL, acquire_in_thread, &r) == 0);
    sleep_ms(300);
    fired = now_ms();
    redlock_cancel_trigger(cancel);
    pthread_join(thread, NULL);
    check_cancelled(&r, fired);
    CHECK(redlock_lock_release(holder, NULL) == REDLOCK_OK);
    redlock_lock_free(holder);
    CHECK(gone_everywhere(pair[0]) && gone_everywhere(pair[1]));
    CHECK(free_now(client, pair[0]) && free_now(client, pair[1]));
    redlock_request_free(req);
    redlock_cancel_free(cancel);
    redlock_client_free(client);
}

/* The holder kept its lock through the cancelled calls; once it lets go (and is freed), `key`
 * is free. */
static void release_undisturbed(redlock_client *client, redlock_lock *holder, const char *key) {
    CHECK(redlock_lock_is_held(holder));
    CHECK(redlock_lock_release(holder, NULL) == REDLOCK_OK);
    redlock_lock_free(holder);
    CHECK(gone_everywhere(key));
    CHECK(free_now(client, key));
}

/* The handler does what the header allows in a signal handler: redlock_cancel_trigger, nothing
 * else. */
static redlock_cancel *volatile signal_cancel;

static void on_alarm(int signo) {
    (void)signo;
    redlock_cancel_trigger(signal_cancel);
}

/* A waiter on this thread, cancelled by SIGALRM (no SA_RESTART: the library's blocking calls
 * must survive an interrupted system call). */
static void test_cancel_from_a_signal_handler(void) {
    redlock_client *client = new_client();
    const char *key = "cr:cancel-signal";
    redlock_lock *holder = NULL;
    CHECK(redlock_client_lock(client, key, 60000, &holder, NULL) == REDLOCK_OK);

    redlock_cancel *cancel = new_cancel();
    signal_cancel = cancel;
    redlock_request *req = request_one(key, 30000);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);

    struct sigaction action, previous;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_alarm;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    CHECK(sigaction(SIGALRM, &action, &previous) == 0);
    const long delay_ms = 300;
    struct itimerval timer;
    memset(&timer, 0, sizeof timer);
    timer.it_value.tv_sec = delay_ms / 1000;
    timer.it_value.tv_usec = (delay_ms % 1000) * 1000;
    uint64_t start = now_ms();
    CHECK(setitimer(ITIMER_REAL, &timer, NULL) == 0);
    struct acquisition w = acquisition(req, client, cancel, NULL);
    acquire_in_thread(&w);
    /* The signal came delay_ms after start, or later: bound the return from there. */
    check_cancelled(&w, start + (uint64_t)delay_ms);
    CHECK(redlock_cancel_is_triggered(cancel));
    memset(&timer, 0, sizeof timer);
    setitimer(ITIMER_REAL, &timer, NULL);
    sigaction(SIGALRM, &previous, NULL);
    signal_cancel = NULL;

    release_undisturbed(client, holder, key);
    redlock_request_free(req);
    redlock_cancel_free(cancel);
    redlock_client_free(client);
}

/* A handle fired before the call ends it at once, with every patience and on a free resource,
 * without taking anything. */
static void test_cancel_before_the_call(void) {
    redlock_client *client = new_client();
    redlock_cancel *cancel = new_cancel();
    redlock_cancel_trigger(cancel);
    for (int p = 0; p < PATIENCES; p++) {
        redlock_request *req = request_one("cr:cancel-before", 30000);
        if (p == RETRIES)
            CHECK(redlock_request_set_retries(req, 5, NULL) == REDLOCK_OK);
        if (p == ONCE)
            CHECK(redlock_request_set_retries(req, 0, NULL) == REDLOCK_OK);
        if (p == WAIT)
            CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
        struct acquisition w = acquisition(req, client, cancel, NULL);
        uint64_t start = now_ms();
        acquire_in_thread(&w);
        check_cancelled(&w, start);
        redlock_request_free(req);
    }
    CHECK(gone_everywhere("cr:cancel-before"));
    CHECK(free_now(client, "cr:cancel-before"));
    redlock_cancel_free(cancel);
    redlock_client_free(client);
}

/* Acquires `req` on this thread with `cancel`, then releases and frees the lock; the status. */
static redlock_status acquire_and_release(const redlock_request *req,
                                          const redlock_client *client,
                                          const redlock_cancel *cancel) {
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    redlock_status st = acquire(req, client, cancel, &lock, &err);
    if (st == REDLOCK_OK && redlock_lock_release(lock, NULL) != REDLOCK_OK)
        st = REDLOCK_PANIC;
    redlock_lock_free(lock);
    redlock_error_free(err);
    return st;
}

#define SHARERS 4

/* One request, acquired again and again and by several threads at once, each call with a
 * handle of its own: a handle ends only the calls it is passed to, and the request stays as it
 * was built. */
static void test_one_request_many_cancel_handles(void) {
    redlock_client *client = new_client();
    const char *key = "cr:shared-request";
    redlock_request *req = request_one(key, 30000);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);

    /* One after another on this thread: none, a fired handle, a live one, none again. */
    redlock_cancel *fired = new_cancel();
    redlock_cancel *live = new_cancel();
    redlock_cancel_trigger(fired);
    CHECK(acquire_and_release(req, client, NULL) == REDLOCK_OK);
    CHECK(acquire_and_release(req, client, fired) == REDLOCK_CANCELLED);
    CHECK(acquire_and_release(req, client, live) == REDLOCK_OK);
    CHECK(acquire_and_release(req, client, NULL) == REDLOCK_OK);
    CHECK(acquire_and_release(req, client, fired) == REDLOCK_CANCELLED);
    CHECK(!redlock_cancel_is_triggered(live));
    redlock_cancel_free(fired);
    redlock_cancel_free(live);
    CHECK(gone_everywhere(key));

    /* At once, from SHARERS threads, behind a holder: every other handle fires, and those calls
     * alone return REDLOCK_CANCELLED; the others get the lock in turn once the holder lets go
     * (each releases it as soon as it has it). */
    redlock_lock *holder = NULL;
    CHECK(redlock_client_lock(client, key, 30000, &holder, NULL) == REDLOCK_OK);
    redlock_cancel *cancels[SHARERS];
    struct acquisition waiters[SHARERS];
    pthread_t threads[SHARERS];
    for (int i = 0; i < SHARERS; i++) {
        cancels[i] = new_cancel();
        waiters[i] = acquisition(req, client, cancels[i], NULL);
        waiters[i].release = 1;
        CHECK(pthread_create(&threads[i], NULL, acquire_in_thread, &waiters[i]) == 0);
    }
    CHECK(waiting_for(key));
    uint64_t fired_ms = now_ms();
    for (int i = 0; i < SHARERS; i += 2)
        redlock_cancel_trigger(cancels[i]);
    for (int i = 0; i < SHARERS; i += 2) {
        pthread_join(threads[i], NULL);
        check_cancelled(&waiters[i], fired_ms);
    }
    CHECK(redlock_lock_is_held(holder)); /* nobody else had it meanwhile */
    CHECK(redlock_lock_release(holder, NULL) == REDLOCK_OK);
    redlock_lock_free(holder);
    for (int i = 1; i < SHARERS; i += 2) {
        pthread_join(threads[i], NULL);
        CHECK(waiters[i].status == REDLOCK_OK && waiters[i].lock != NULL);
        CHECK(!redlock_lock_is_held(waiters[i].lock)); /* released by its thread */
        CHECK(!redlock_cancel_is_triggered(cancels[i]));
        acquisition_free(&waiters[i]);
    }
    for (int i = 0; i < SHARERS; i++)
        redlock_cancel_free(cancels[i]);
    CHECK(gone_everywhere(key));
    CHECK(free_now(client, key));
    redlock_request_free(req);

    /* A read request shared by SHARERS threads at once, each with a live handle: they all hold
     * it together. */
    const char *readers_key = "cr:shared-readers";
    redlock_request *read = request_one(readers_key, 30000);
    CHECK(redlock_request_set_read(read, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_retries(read, 0, NULL) == REDLOCK_OK);
    for (int i = 0; i < SHARERS; i++) {
        cancels[i] = new_cancel();
        waiters[i] = acquisition(read, client, cancels[i], NULL);
        CHECK(pthread_create(&threads[i], NULL, acquire_in_thread, &waiters[i]) == 0);
    }
    for (int i = 0; i < SHARERS; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < SHARERS; i++)
        CHECK(waiters[i].status == REDLOCK_OK && redlock_lock_is_held(waiters[i].lock));
    CHECK(on_nodes(readers_key) >= quorum());
    for (int i = 0; i < SHARERS; i++) {
        CHECK(redlock_lock_release(waiters[i].lock, NULL) == REDLOCK_OK);
        acquisition_free(&waiters[i]);
        redlock_cancel_free(cancels[i]);
    }
    CHECK(gone_everywhere(readers_key));
    redlock_request_free(read);
    redlock_client_free(client);
}

/* A cancel handle belongs to the calls it is passed to, not to the request: freed, it leaves
 * the request whole, and a call in progress keeps what it needs of it. A handle fired after
 * the lock was acquired changes nothing: the caller owns the lock. */
static void test_cancel_handle_lifetime(void) {
    redlock_client *client = new_client();
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    redlock_request *req = request_one("cr:cancel-life", 30000);

    /* Used, then freed: the request acquires on without it. */
    redlock_cancel *cancel = new_cancel();
    CHECK(acquire_and_release(req, client, cancel) == REDLOCK_OK);
    redlock_cancel_free(cancel);
    CHECK(acquire_and_release(req, client, NULL) == REDLOCK_OK);

    /* Fired, used and freed: that call was cancelled, the request is not. */
    cancel = new_cancel();
    redlock_cancel_trigger(cancel);
    check_error(acquire(req, client, cancel, &lock, &err), REDLOCK_CANCELLED, &err);
    redlock_cancel_free(cancel);
    CHECK(acquire_and_release(req, client, NULL) == REDLOCK_OK);

    /* Fired after the lock was acquired. */
    cancel = new_cancel();
    CHECK(acquire(req, client, cancel, &lock, NULL) == REDLOCK_OK);
    redlock_cancel_trigger(cancel);
    CHECK(redlock_lock_is_held(lock));
    CHECK(redlock_lock_extend(lock, 30000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_cancel_free(cancel);
    CHECK(gone_everywhere("cr:cancel-life"));
    CHECK(free_now(client, "cr:cancel-life"));

    /* Freed while a call with it waits: the call goes on and gets the lock once the holder
     * lets go. (It is freed only once the call is seen waiting: before that, the call may not
     * have read the handle yet.) */
    const char *key = "cr:cancel-freed-waiting";
    redlock_lock *holder = NULL;
    CHECK(redlock_client_lock(client, key, 30000, &holder, NULL) == REDLOCK_OK);
    redlock_request *waiting = request_one(key, 30000);
    CHECK(redlock_request_set_wait(waiting, 60000, NULL) == REDLOCK_OK);
    cancel = new_cancel();
    struct acquisition w = acquisition(waiting, client, cancel, NULL);
    w.release = 1;
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, acquire_in_thread, &w) == 0);
    CHECK(waiting_for(key));
    redlock_cancel_free(cancel);
    CHECK(redlock_lock_release(holder, NULL) == REDLOCK_OK);
    redlock_lock_free(holder);
    pthread_join(thread, NULL);
    CHECK(w.status == REDLOCK_OK);
    acquisition_free(&w);
    CHECK(gone_everywhere(key));
    redlock_request_free(waiting);

    /* Fired and freed at once while a call with it waits: the call is cancelled all the same. */
    key = "cr:cancel-fired-freed";
    CHECK(redlock_client_lock(client, key, 30000, &holder, NULL) == REDLOCK_OK);
    waiting = request_one(key, 30000);
    CHECK(redlock_request_set_wait(waiting, 60000, NULL) == REDLOCK_OK);
    cancel = new_cancel();
    w = acquisition(waiting, client, cancel, NULL);
    CHECK(pthread_create(&thread, NULL, acquire_in_thread, &w) == 0);
    CHECK(waiting_for(key));
    uint64_t fired = now_ms();
    redlock_cancel_trigger(cancel);
    redlock_cancel_free(cancel);
    pthread_join(thread, NULL);
    check_cancelled(&w, fired);
    release_undisturbed(client, holder, key);
    redlock_request_free(waiting);

    redlock_request_free(req);
    redlock_client_free(client);
}

/* ---- with a majority of the nodes gone ---- */

static void test_no_quorum(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_lock *lock = NULL;
    redlock_request *req = request_one("cr:no-quorum", 30000);
    CHECK(redlock_request_set_retries(req, 1, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_retry_delay(req, 10, 0, NULL) == REDLOCK_OK);
    redlock_status st = acquire(req, client, NULL, &lock, &err);
    CHECK(st == REDLOCK_NO_QUORUM);
    CHECK(err != NULL && strstr(redlock_error_message(err), "127.0.0.1:") != NULL);
    redlock_error_free(err);
    CHECK(lock == NULL);
    redlock_request_free(req);

    /* A waiter facing too few nodes keeps trying until its deadline; a cancel ends it. */
    redlock_cancel *cancel = new_cancel();
    req = request_one("cr:no-quorum", 30000);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
    struct acquisition w = acquisition(req, client, cancel, NULL);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, acquire_in_thread, &w) == 0);
    sleep_ms(300);
    uint64_t fired = now_ms();
    redlock_cancel_trigger(cancel);
    pthread_join(thread, NULL);
    check_cancelled(&w, fired);
    redlock_request_free(req);
    redlock_cancel_free(cancel);
    redlock_client_free(client);
}

static void all(void) {
    test_constructors_and_null_handles();
    test_bad_setters_change_nothing();
    test_every_combination();
    test_waiter_gets_the_lock_after_release();
    test_fair_and_unfair_waiters_get_the_lock();
    test_cancel_from_another_thread();
    test_cancel_from_a_signal_handler();
    test_cancel_before_the_call();
    test_one_request_many_cancel_handles();
    test_cancel_handle_lifetime();
}

int main(int argc, char **argv) { return suite_main(argc, argv, all, test_no_quorum); }
