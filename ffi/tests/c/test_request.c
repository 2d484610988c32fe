/*
 * The acquisition request and the cancel handle of the C ABI (src/ffi/request.rs) end to end,
 * against real redis-server nodes started by ffi/tests/c_abi.rs.
 *
 *   test_request all       URL...   every case that needs a healthy cluster
 *   test_request no-quorum URL...   run after the harness killed a majority of the nodes
 *
 * Prints "N passed, M failed" and exits non-zero on any failure. Plain C99 (POSIX for threads,
 * sockets, signals and timers).
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "redlock.h"

static int passed, failed;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (cond) {                                                                    \
            passed++;                                                                  \
        } else {                                                                       \
            failed++;                                                                  \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, __func__, \
                    #cond);                                                            \
        }                                                                              \
    } while (0)

/* Like CHECK, and returns from the calling test when it fails (what follows would crash). */
#define REQUIRE(cond)                                                                  \
    do {                                                                               \
        if (cond) {                                                                    \
            passed++;                                                                  \
        } else {                                                                       \
            failed++;                                                                  \
            fprintf(stderr, "%s:%d: %s: REQUIRE(%s) failed\n", __FILE__, __LINE__, __func__, \
                    #cond);                                                            \
            return;                                                                    \
        }                                                                              \
    } while (0)

static const char *const *urls;
static size_t n_urls;

/* How long a cancelled call may take to return once its handle fired: generous, for valgrind
 * on a loaded machine; the library's own bound is a few milliseconds. */
#define CANCEL_BOUND_MS 5000
/* How long the nodes may take to apply what a call sent them after it returned on a quorum. */
#define SETTLE_MS 10000

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* How long a call waits for one node: a patient second, more under valgrind (the harness sets
 * REDLOCK_TEST_NODE_TIMEOUT_MS). */
static uint64_t node_timeout_ms(void) {
    const char *timeout = getenv("REDLOCK_TEST_NODE_TIMEOUT_MS");
    return timeout != NULL ? strtoull(timeout, NULL, 10) : 1000;
}

static size_t quorum(void) { return n_urls / 2 + 1; }

/* A client over the suite's nodes: the suite's node timeout, 3 retries 20 ± 10 ms apart (so a
 * refused call with the client's patience ends quickly). */
static redlock_client *new_client(void) {
    redlock_options *o = NULL;
    redlock_client *client = NULL;
    redlock_error *err = NULL;
    if (redlock_options_new(&o, &err) != REDLOCK_OK ||
        redlock_options_set_node_timeout_ms(o, node_timeout_ms(), &err) != REDLOCK_OK ||
        redlock_options_set_retry_count(o, 3, &err) != REDLOCK_OK ||
        redlock_options_set_retry_delay_ms(o, 20, &err) != REDLOCK_OK ||
        redlock_options_set_retry_jitter_ms(o, 10, &err) != REDLOCK_OK ||
        redlock_client_new(urls, n_urls, o, &client, &err) != REDLOCK_OK) {
        fprintf(stderr, "client: %s\n", redlock_error_message(err));
        exit(2);
    }
    redlock_options_free(o);
    return client;
}

/* A failed call gives an error with its status and a non-empty message; `line` is the
 * caller's, for the report. */
static void check_error_at(redlock_status st, redlock_status want, redlock_error **errp,
                           int line) {
    redlock_error *err = *errp;
    CHECK(st == want);
    CHECK(err != NULL);
    CHECK(redlock_error_status(err) == want);
    CHECK(redlock_error_message(err) != NULL && strlen(redlock_error_message(err)) > 0);
    if (st != want)
        fprintf(stderr, "  line %d: got %s (%s), wanted %s\n", line, redlock_status_str(st),
                err != NULL ? redlock_error_message(err) : "no error", redlock_status_str(want));
    redlock_error_free(err);
    *errp = NULL;
}
#define check_error(st, want, errp) check_error_at((st), (want), (errp), __LINE__)

static redlock_request *request_one(const char *resource, uint64_t ttl_ms) {
    redlock_request *req = NULL;
    redlock_error *err = NULL;
    if (redlock_request_new(resource, ttl_ms, &req, &err) != REDLOCK_OK) {
        fprintf(stderr, "redlock_request_new(%s): %s\n", resource, redlock_error_message(err));
        exit(2);
    }
    return req;
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

/* ---- reading the nodes behind the library's back ---- */

/* Sends one command (RESP array of `argc` strings) to the node at `url`
 * (redis://127.0.0.1:PORT) and reads the reply into `reply`; returns its length, or -1 when the
 * node did not answer. Replies here are short enough to come in one read. */
static int raw_command(const char *url, int argc, const char *const *argv, char *reply,
                       size_t cap) {
    const char *colon = strrchr(url, ':');
    if (colon == NULL || cap == 0)
        return -1;
    char cmd[512];
    size_t len = (size_t)snprintf(cmd, sizeof cmd, "*%d\r\n", argc);
    for (int i = 0; i < argc && len < sizeof cmd; i++)
        len += (size_t)snprintf(cmd + len, sizeof cmd - len, "$%zu\r\n%s\r\n", strlen(argv[i]),
                                argv[i]);
    if (len >= sizeof cmd)
        return -1;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)atoi(colon + 1));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval limit = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    ssize_t got = -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
        write(fd, cmd, len) == (ssize_t)len)
        got = read(fd, reply, cap - 1);
    close(fd);
    if (got <= 0)
        return -1;
    reply[got] = 0;
    return (int)got;
}

/* 1 if `key` exists on the node, 0 if not, -1 when the node did not answer. */
static int raw_exists(const char *url, const char *key) {
    const char *argv[] = {"EXISTS", key};
    char reply[64];
    if (raw_command(url, 2, argv, reply, sizeof reply) < 0 || reply[0] != ':')
        return -1;
    return atoi(reply + 1) > 0;
}

/* Whether the node holds `key` with the string `value`. */
static int raw_has_value(const char *url, const char *key, const char *value) {
    const char *argv[] = {"GET", key};
    char reply[256], want[256];
    snprintf(want, sizeof want, "$%zu\r\n%s\r\n", strlen(value), value);
    return raw_command(url, 2, argv, reply, sizeof reply) > 0 && strcmp(reply, want) == 0;
}

static int raw_set_px(const char *url, const char *key, const char *value, const char *px) {
    const char *argv[] = {"SET", key, value, "PX", px};
    char reply[64];
    return raw_command(url, 5, argv, reply, sizeof reply) > 0 && strncmp(reply, "+OK", 3) == 0;
}

static int raw_del(const char *url, const char *key) {
    const char *argv[] = {"DEL", key};
    char reply[64];
    return raw_command(url, 2, argv, reply, sizeof reply) > 0 && reply[0] == ':';
}

/* Waits until no node among urls[from..n_urls) has `key`; 1 if so within SETTLE_MS. A call
 * returns on a quorum, so the last nodes may apply its commands a moment later. */
static int gone_from(size_t from, const char *key) {
    uint64_t until = now_ms() + SETTLE_MS;
    for (;;) {
        int present = 0;
        for (size_t i = from; i < n_urls; i++)
            if (raw_exists(urls[i], key) != 0)
                present++;
        if (present == 0)
            return 1;
        if (now_ms() > until) {
            fprintf(stderr, "  %s still on %d node(s)\n", key, present);
            return 0;
        }
        sleep_ms(20);
    }
}

static int gone_everywhere(const char *key) { return gone_from(0, key); }

/* On how many nodes `key` exists now. */
static size_t on_nodes(const char *key) {
    size_t count = 0;
    for (size_t i = 0; i < n_urls; i++)
        if (raw_exists(urls[i], key) == 1)
            count++;
    return count;
}

/* A plain lock with one attempt gets `resource` at once (then releases it): it is free. */
static int free_now(redlock_client *client, const char *resource) {
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    redlock_status st = redlock_client_try_lock(client, resource, 10000, &lock, &err);
    if (st != REDLOCK_OK) {
        fprintf(stderr, "  try_lock(%s): %s: %s\n", resource, redlock_status_str(st),
                redlock_error_message(err));
        redlock_error_free(err);
        return 0;
    }
    int released = redlock_lock_release(lock, NULL) == REDLOCK_OK;
    redlock_lock_free(lock);
    return released;
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
    CHECK(redlock_client_acquire(client, all, &lock, &err) == REDLOCK_OK);
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
    check_error(redlock_request_set_auto_extend(NULL, 0.0, 0, 0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_set_cancel(NULL, cancel, &err), REDLOCK_INVALID_ARGUMENT, &err);
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

    /* redlock_client_acquire's own arguments. */
    redlock_request *ok = request_one("cr:acquire-args", 10000);
    redlock_lock *untouched = (redlock_lock *)&err;
    redlock_lock *const lsentinel = untouched;
    check_error(redlock_client_acquire(NULL, ok, &untouched, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_client_acquire(client, NULL, &untouched, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_client_acquire(client, ok, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request *zero = request_one("cr:acquire-args", 0);
    check_error(redlock_client_acquire(client, zero, &untouched, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    redlock_request_free(zero);
    redlock_request *huge = request_one("cr:acquire-args", UINT64_MAX);
    check_error(redlock_client_acquire(client, huge, &untouched, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    redlock_request_free(huge);
    /* Too short to be auto-extended in time (it must exceed fraction x ttl + node timeout). */
    redlock_request *short_auto = request_one("cr:acquire-args", 10);
    CHECK(redlock_request_set_auto_extend(short_auto, 0.0, 0, 0, NULL) == REDLOCK_OK);
    check_error(redlock_client_acquire(client, short_auto, &untouched, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(short_auto);
    CHECK(untouched == lsentinel);
    /* None of it took the resource. */
    CHECK(gone_everywhere("cr:acquire-args"));
    CHECK(free_now(client, "cr:acquire-args"));
    redlock_request_free(ok);
    redlock_client_free(client);
}

/* Applies every bad value to `req`; each must fail with a message and change nothing. */
static void apply_bad_setters(redlock_request *req) {
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
    check_error(redlock_request_set_cancel(req, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
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
    apply_bad_setters(plain);
    REQUIRE(redlock_client_acquire(client, plain, &lock, &err) == REDLOCK_OK);
    CHECK(strcmp(redlock_lock_resource(lock), "cr:bad-plain") == 0);
    CHECK(strlen(redlock_lock_token(lock)) == 40); /* a random token, not an owner */
    check_error(redlock_lock_fence(lock, &n, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_lock_hold_count(lock, &n, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(redlock_lock_is_held(lock));
    /* Still a single attempt: refused while held. */
    check_error(redlock_client_acquire(client, plain, &second, &err), REDLOCK_NOT_ACQUIRED, &err);
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
    apply_bad_setters(fenced);
    REQUIRE(redlock_client_acquire(client, fenced, &lock, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_fence(lock, &n, NULL) == REDLOCK_OK && n > 0);
    redlock_lock_free(lock);

    /* A reentrant request keeps its owner. */
    redlock_request *re = request_one("cr:bad-re", 30000);
    CHECK(redlock_request_set_reentrant(re, "alice", NULL) == REDLOCK_OK);
    apply_bad_setters(re);
    REQUIRE(redlock_client_acquire(client, re, &lock, NULL) == REDLOCK_OK);
    CHECK(strcmp(redlock_lock_token(lock), "alice") == 0);
    CHECK(redlock_lock_hold_count(lock, &n, NULL) == REDLOCK_OK && n == 1);
    redlock_lock_free(lock);

    /* A request of several resources takes no single-resource kind. */
    const char *const names[] = {"cr:bad-m2", "cr:bad-m1"};
    redlock_request *many = request_many(names, 2, 30000);
    check_error(redlock_request_set_fenced(many, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_reentrant(many, "alice", &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    apply_bad_setters(many);
    REQUIRE(redlock_client_acquire(client, many, &lock, NULL) == REDLOCK_OK);
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
    CHECK(redlock_client_acquire(client, many, &lock, NULL) == REDLOCK_OK);
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
    redlock_status st = redlock_client_acquire(client, req, &lock, &err);
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
        CHECK(redlock_client_acquire(client, req, &again, NULL) == REDLOCK_OK);
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
        check_error(redlock_client_acquire(client, req, &other, &err), REDLOCK_NOT_ACQUIRED,
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

struct acquirer {
    redlock_client *client;
    const redlock_request *request;
    redlock_status status;
    redlock_error *err;
    redlock_lock *lock;
    uint64_t returned_ms;
};

static void *acquire_in_thread(void *arg) {
    struct acquirer *w = arg;
    w->status = redlock_client_acquire(w->client, w->request, &w->lock, &w->err);
    w->returned_ms = now_ms();
    return NULL;
}

/* A waiting request gets the lock when the holder releases, and gives up at its deadline. */
static void test_waiter_gets_the_lock_after_release(void) {
    redlock_client *client = new_client();
    redlock_lock *holder = NULL;
    CHECK(redlock_client_lock(client, "cr:wait", 30000, &holder, NULL) == REDLOCK_OK);
    redlock_request *req = request_one("cr:wait", 30000);
    CHECK(redlock_request_set_fenced(req, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
    struct acquirer w = {client, req, REDLOCK_PANIC, NULL, NULL, 0};
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
    check_error(redlock_client_acquire(client, brief, &late, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(late == NULL);
    redlock_lock_free(w.lock); /* releases */
    CHECK(gone_everywhere("cr:wait"));
    CHECK(free_now(client, "cr:wait"));
    redlock_lock_free(holder);
    redlock_request_free(brief);
    redlock_request_free(req);
    redlock_client_free(client);
}

/* ---- 3. cancellation ---- */

/* Checks what a cancelled call returned. */
static void check_cancelled(struct acquirer *w, uint64_t fired_ms) {
    CHECK(w->status == REDLOCK_CANCELLED);
    CHECK(w->lock == NULL);
    CHECK(w->err != NULL && redlock_error_status(w->err) == REDLOCK_CANCELLED);
    CHECK(w->err != NULL && strlen(redlock_error_message(w->err)) > 0);
    if (w->status != REDLOCK_CANCELLED)
        fprintf(stderr, "  got %s: %s\n", redlock_status_str(w->status),
                redlock_error_message(w->err));
    CHECK(w->returned_ms >= fired_ms && w->returned_ms - fired_ms < CANCEL_BOUND_MS);
    redlock_error_free(w->err);
    redlock_lock_free(w->lock);
    w->err = NULL;
    w->lock = NULL;
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

    redlock_cancel *cancel = NULL;
    CHECK(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    redlock_request *req = request_one(key, 30000);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_retry_delay(req, 20, 10, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_cancel(req, cancel, NULL) == REDLOCK_OK);
    struct acquirer w = {client, req, REDLOCK_PANIC, NULL, NULL, 0};
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
    check_error(redlock_client_acquire(client, req, &lock, &err), REDLOCK_CANCELLED, &err);
    for (size_t i = 0; i < quorum(); i++)
        CHECK(raw_del(urls[i], key));
    CHECK(free_now(client, key));
    redlock_request_free(req);
    redlock_cancel_free(cancel);

    /* Retrying (no wait) against a held lock, cancelled between attempts; a many-request. */
    const char *const pair[] = {"cr:cancel-retry-a", "cr:cancel-retry-b"};
    redlock_lock *holder = NULL;
    CHECK(redlock_client_lock(client, pair[1], 30000, &holder, NULL) == REDLOCK_OK);
    CHECK(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    req = request_many(pair, 2, 30000);
    CHECK(redlock_request_set_retries(req, UINT32_MAX, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_retry_delay(req, 50, 10, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_cancel(req, cancel, NULL) == REDLOCK_OK);
    struct acquirer r = {client, req, REDLOCK_PANIC, NULL, NULL, 0};
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

    redlock_cancel *cancel = NULL;
    CHECK(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    signal_cancel = cancel;
    redlock_request *req = request_one(key, 30000);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_cancel(req, cancel, NULL) == REDLOCK_OK);

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
    struct acquirer w = {client, req, REDLOCK_PANIC, NULL, NULL, 0};
    acquire_in_thread(&w);
    /* The signal came delay_ms after start, or later: bound the return from there. */
    check_cancelled(&w, start + (uint64_t)delay_ms);
    CHECK(redlock_cancel_is_triggered(cancel));
    memset(&timer, 0, sizeof timer);
    setitimer(ITIMER_REAL, &timer, NULL);
    sigaction(SIGALRM, &previous, NULL);
    signal_cancel = NULL;

    /* The holder was never disturbed; after its release the resource is free. */
    CHECK(redlock_lock_is_held(holder));
    CHECK(redlock_lock_release(holder, NULL) == REDLOCK_OK);
    redlock_lock_free(holder);
    CHECK(gone_everywhere(key));
    CHECK(free_now(client, key));
    redlock_request_free(req);
    redlock_cancel_free(cancel);
    redlock_client_free(client);
}

/* A handle fired before the call ends it at once, with every patience and on a free resource,
 * without taking anything. */
static void test_cancel_before_the_call(void) {
    redlock_client *client = new_client();
    redlock_cancel *cancel = NULL;
    CHECK(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    redlock_cancel_trigger(cancel);
    for (int p = 0; p < PATIENCES; p++) {
        redlock_request *req = request_one("cr:cancel-before", 30000);
        if (p == RETRIES)
            CHECK(redlock_request_set_retries(req, 5, NULL) == REDLOCK_OK);
        if (p == ONCE)
            CHECK(redlock_request_set_retries(req, 0, NULL) == REDLOCK_OK);
        if (p == WAIT)
            CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
        CHECK(redlock_request_set_cancel(req, cancel, NULL) == REDLOCK_OK);
        struct acquirer w = {client, req, REDLOCK_PANIC, NULL, NULL, 0};
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

/* The request keeps its own reference to the handle: freeing the handle breaks nothing, and a
 * handle fired then freed still cancels. A handle fired after the lock was acquired changes
 * nothing: the caller owns the lock. */
static void test_cancel_handle_lifetime(void) {
    redlock_client *client = new_client();
    redlock_cancel *cancel = NULL;
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;

    CHECK(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    redlock_request *req = request_one("cr:cancel-life", 30000);
    CHECK(redlock_request_set_cancel(req, cancel, NULL) == REDLOCK_OK);
    redlock_cancel_free(cancel);
    CHECK(redlock_client_acquire(client, req, &lock, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_request_free(req);

    CHECK(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    req = request_one("cr:cancel-life", 30000);
    CHECK(redlock_request_set_cancel(req, cancel, NULL) == REDLOCK_OK);
    redlock_cancel_trigger(cancel);
    redlock_cancel_free(cancel);
    check_error(redlock_client_acquire(client, req, &lock, &err), REDLOCK_CANCELLED, &err);
    redlock_request_free(req);

    CHECK(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    req = request_one("cr:cancel-life", 30000);
    CHECK(redlock_request_set_cancel(req, cancel, NULL) == REDLOCK_OK);
    CHECK(redlock_client_acquire(client, req, &lock, NULL) == REDLOCK_OK);
    redlock_cancel_trigger(cancel);
    CHECK(redlock_lock_is_held(lock));
    CHECK(redlock_lock_extend(lock, 30000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_request_free(req);
    redlock_cancel_free(cancel);

    CHECK(gone_everywhere("cr:cancel-life"));
    CHECK(free_now(client, "cr:cancel-life"));
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
    redlock_status st = redlock_client_acquire(client, req, &lock, &err);
    CHECK(st == REDLOCK_NO_QUORUM);
    CHECK(err != NULL && strstr(redlock_error_message(err), "127.0.0.1:") != NULL);
    redlock_error_free(err);
    CHECK(lock == NULL);
    redlock_request_free(req);

    /* A waiter facing too few nodes keeps trying until its deadline; a cancel ends it. */
    redlock_cancel *cancel = NULL;
    CHECK(redlock_cancel_new(&cancel, NULL) == REDLOCK_OK);
    req = request_one("cr:no-quorum", 30000);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_cancel(req, cancel, NULL) == REDLOCK_OK);
    struct acquirer w = {client, req, REDLOCK_PANIC, NULL, NULL, 0};
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

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s all|no-quorum URL...\n", argv[0]);
        return 2;
    }
    urls = (const char *const *)&argv[2];
    n_urls = (size_t)(argc - 2);
    if (strcmp(argv[1], "no-quorum") == 0) {
        test_no_quorum();
    } else {
        test_constructors_and_null_handles();
        test_bad_setters_change_nothing();
        test_every_combination();
        test_waiter_gets_the_lock_after_release();
        test_cancel_from_another_thread();
        test_cancel_from_a_signal_handler();
        test_cancel_before_the_call();
        test_cancel_handle_lifetime();
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
