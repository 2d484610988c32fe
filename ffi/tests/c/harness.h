/*
 * What the C suites share: the CHECK counters, the nodes named on the command line, clocks,
 * clients with the suite's node timeout, error checks, acquisitions run on a thread of their
 * own, and reading and writing the nodes behind the library's back.
 *
 * Include it before anything else (it sets _POSIX_C_SOURCE). Each suite is one translation
 * unit, so everything here is static; the functions are inline so that a suite need not use
 * every one of them.
 */
#ifndef REDLOCK_TEST_HARNESS_H
#define REDLOCK_TEST_HARNESS_H

#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "redlock.h"

static int passed, failed;

/* Counts one check; reports a failed one with where it stands. Returns `ok`. */
static inline int record(int ok, const char *macro, const char *file, int line,
                         const char *func, const char *cond) {
    if (ok) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "%s:%d: %s: %s(%s) failed\n", file, line, func, macro, cond);
    }
    return ok;
}

#define CHECK(cond) ((void)record((cond) ? 1 : 0, "CHECK", __FILE__, __LINE__, __func__, #cond))

/* Like CHECK, and returns from the calling test when it fails (what follows would crash). */
#define REQUIRE(cond)                                                                  \
    do {                                                                               \
        if (!record((cond) ? 1 : 0, "REQUIRE", __FILE__, __LINE__, __func__, #cond))   \
            return;                                                                    \
    } while (0)

/* The nodes, from the command line. */
static const char *const *urls;
static size_t n_urls;

/* How long a call waits for one node. Most checks need a single attempt to get every node's
 * answer, and on a loaded machine a node (or this process) can stall for much longer than the
 * library's 50 ms default: a patient second by default, more under valgrind (the harness sets
 * REDLOCK_TEST_NODE_TIMEOUT_MS). */
#define PATIENT_NODE_TIMEOUT_MS 1000
/* How long a cancelled call may take to return once its handle fired: generous, for valgrind
 * on a loaded machine; the library's own bound is a few milliseconds. */
#define CANCEL_BOUND_MS 5000
/* How long the nodes may take to apply what a call sent them after it returned on a quorum. */
#define SETTLE_MS 10000

static inline size_t quorum(void) { return n_urls / 2 + 1; }

static inline void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static inline uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The wall clock in µs since the Unix epoch, the unit of fencing tokens. */
static inline uint64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static inline uint64_t node_timeout_ms(void) {
    const char *timeout = getenv("REDLOCK_TEST_NODE_TIMEOUT_MS");
    return timeout != NULL ? strtoull(timeout, NULL, 10) : PATIENT_NODE_TIMEOUT_MS;
}

/* New options with the suite's node timeout and 3 retries (not the default 50: a refused lock
 * ends within about a second); the caller frees them. */
static inline redlock_options *test_options(void) {
    redlock_options *opts = NULL;
    redlock_error *err = NULL;
    if (redlock_options_new(&opts, &err) != REDLOCK_OK ||
        redlock_options_set_node_timeout_ms(opts, node_timeout_ms(), &err) != REDLOCK_OK ||
        redlock_options_set_retry_count(opts, 3, &err) != REDLOCK_OK) {
        fprintf(stderr, "test options: %s\n", redlock_error_message(err));
        exit(2);
    }
    return opts;
}

/* A client over the suite's nodes with `opts`, which it frees. */
static inline redlock_client *client_with(redlock_options *opts) {
    redlock_client *client = NULL;
    redlock_error *err = NULL;
    redlock_status st = redlock_client_new(urls, n_urls, opts, &client, &err);
    redlock_options_free(opts);
    if (st != REDLOCK_OK) {
        fprintf(stderr, "redlock_client_new: %s: %s\n", redlock_status_str(st),
                redlock_error_message(err));
        redlock_error_free(err);
        exit(2);
    }
    return client;
}

/* A failed call gives an error with its status and a non-empty message; `line` is the
 * caller's, for the report. The error is read through a pointer because the call that writes
 * it is an argument of this function. */
static inline void check_error_at(redlock_status st, redlock_status want, redlock_error **errp,
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

/* A request for a plain lock on `resource`; the caller frees it. */
static inline redlock_request *request_one(const char *resource, uint64_t ttl_ms) {
    redlock_request *req = NULL;
    redlock_error *err = NULL;
    if (redlock_request_new(resource, ttl_ms, &req, &err) != REDLOCK_OK) {
        fprintf(stderr, "redlock_request_new(%s): %s\n", resource, redlock_error_message(err));
        exit(2);
    }
    return req;
}

/* ---- acquisitions on a thread of their own ---- */

/* One redlock_request_acquire and what it returned. */
struct acquisition {
    const redlock_request *request;
    const redlock_client *client;
    const redlock_cancel *cancel; /* NULL: none */
    const char *caller;           /* NULL: the thread that runs it */
    int release;                  /* release the lock (the handle stays) as soon as it is ours */
    redlock_status status;        /* REDLOCK_PANIC until it returned */
    redlock_lock *lock;
    redlock_error *err;
    uint64_t returned_ms;
};

static inline struct acquisition acquisition(const redlock_request *request,
                                             const redlock_client *client,
                                             const redlock_cancel *cancel, const char *caller) {
    struct acquisition a = {request, client, cancel, caller, 0, REDLOCK_PANIC, NULL, NULL, 0};
    return a;
}

/* Runs the acquisition `arg` (a struct acquisition); a pthread start routine. */
static inline void *acquire_in_thread(void *arg) {
    struct acquisition *a = arg;
    a->status = redlock_request_acquire(a->request, a->client, a->cancel, a->caller, &a->lock,
                                        &a->err);
    a->returned_ms = now_ms();
    if (a->status == REDLOCK_OK && a->release)
        redlock_lock_release(a->lock, NULL);
    return NULL;
}

/* Frees what an acquisition returned. */
static inline void acquisition_free(struct acquisition *a) {
    redlock_lock_free(a->lock);
    redlock_error_free(a->err);
    a->lock = NULL;
    a->err = NULL;
}

/* Acquires on another OS thread, so that this thread's own holds do not count for a NULL
 * caller, then releases and frees what it got; returns the status. */
static inline redlock_status acquire_on_a_thread(const redlock_client *client,
                                                 const redlock_request *request,
                                                 const char *caller) {
    struct acquisition a = acquisition(request, client, NULL, caller);
    a.release = 1;
    pthread_t thread;
    if (pthread_create(&thread, NULL, acquire_in_thread, &a) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(2);
    }
    pthread_join(thread, NULL);
    acquisition_free(&a);
    return a.status;
}

/* ---- the nodes, behind the library's back ---- */

/* Sends one command (RESP array of `argc` strings) to the node at `url`
 * (redis://127.0.0.1:PORT) and reads the reply into `reply`; returns its length, or -1 when the
 * node did not answer. Replies here are short enough to come in one read. */
static inline int raw_command(const char *url, int argc, const char *const *argv, char *reply,
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

/* The integer a command replies with (`:N`), or -1 when the node did not answer with one. */
static inline long raw_integer(const char *url, int argc, const char *const *argv) {
    char reply[256];
    if (raw_command(url, argc, argv, reply, sizeof reply) < 0 || reply[0] != ':')
        return -1;
    return atol(reply + 1);
}

/* How many keys DEL deleted, or -1 when the node did not answer. */
static inline int raw_del(const char *url, const char *key) {
    const char *argv[] = {"DEL", key};
    return (int)raw_integer(url, 2, argv);
}

/* 1 if `key` exists on the node, 0 if not, -1 when the node did not answer. */
static inline int raw_exists(const char *url, const char *key) {
    const char *argv[] = {"EXISTS", key};
    long n = raw_integer(url, 2, argv);
    return n < 0 ? -1 : n > 0;
}

/* Whether the node holds `key` with the string `value`. */
static inline int raw_has_value(const char *url, const char *key, const char *value) {
    const char *argv[] = {"GET", key};
    char reply[256], want[256];
    snprintf(want, sizeof want, "$%zu\r\n%s\r\n", strlen(value), value);
    return raw_command(url, 2, argv, reply, sizeof reply) > 0 && strcmp(reply, want) == 0;
}

static inline int raw_set_px(const char *url, const char *key, const char *value,
                             const char *px) {
    const char *argv[] = {"SET", key, value, "PX", px};
    char reply[64];
    return raw_command(url, 5, argv, reply, sizeof reply) > 0 && strncmp(reply, "+OK", 3) == 0;
}

/* How many connections listen for releases of `resource` on the node (a client's waiters
 * share one), or -1 when the node did not answer. */
static inline long raw_waiting_clients(const char *url, const char *resource) {
    /* The library's channel for the key (src/wire.rs, `channel`): in the key's hash slot,
     * redlock:released:{<tag>}:<key> with the key's own tag, or the whole key as the tag. */
    char channel[512];
    const char *open = strchr(resource, '{');
    const char *close = open != NULL ? strchr(open + 1, '}') : NULL;
    if (open != NULL && close != NULL && close > open + 1)
        snprintf(channel, sizeof channel, "redlock:released:{%.*s}:%s", (int)(close - open - 1),
                 open + 1, resource);
    else if (strchr(resource, '}') == NULL)
        snprintf(channel, sizeof channel, "redlock:released:{%s}:%s", resource, resource);
    else
        snprintf(channel, sizeof channel, "redlock:released:%s", resource);
    const char *argv[] = {"PUBSUB", "NUMSUB", channel};
    char reply[512];
    if (raw_command(url, 3, argv, reply, sizeof reply) < 0 || reply[0] != '*')
        return -1;
    /* *2 $len channel :count, and the channel comes before the count's ':'. */
    const char *count = strrchr(reply, ':');
    return count != NULL ? atol(count + 1) : -1;
}

/* Waits until an acquisition waits for `resource` (it listens for its release on some node);
 * 1 if so within SETTLE_MS. A waiter listens only once it is well inside its call. */
static inline int waiting_for(const char *resource) {
    uint64_t until = now_ms() + SETTLE_MS;
    while (now_ms() <= until) {
        for (size_t i = 0; i < n_urls; i++)
            if (raw_waiting_clients(urls[i], resource) > 0)
                return 1;
        sleep_ms(20);
    }
    fprintf(stderr, "  nobody waits for %s\n", resource);
    return 0;
}

/* Waits until no node among urls[from..n_urls) has `key`; 1 if so within SETTLE_MS. A call
 * returns on a quorum, so the last nodes may apply its commands a moment later. */
static inline int gone_from(size_t from, const char *key) {
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

static inline int gone_everywhere(const char *key) { return gone_from(0, key); }

/* On how many nodes `key` exists now. */
static inline size_t on_nodes(const char *key) {
    size_t count = 0;
    for (size_t i = 0; i < n_urls; i++)
        if (raw_exists(urls[i], key) == 1)
            count++;
    return count;
}

/* A plain lock with one attempt gets `resource` at once (then releases it): it is free. */
static inline int free_now(redlock_client *client, const char *resource) {
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

/* The suite's main: `PROGRAM all URL...` runs `all`, `PROGRAM no-quorum URL...` (after the
 * harness killed a majority of the nodes) runs `no_quorum`. Prints "N passed, M failed" and
 * returns non-zero on any failure. */
static inline int suite_main(int argc, char **argv, void (*all)(void), void (*no_quorum)(void)) {
    if (argc < 3 || (strcmp(argv[1], "all") != 0 && strcmp(argv[1], "no-quorum") != 0)) {
        fprintf(stderr, "usage: %s all|no-quorum URL...\n", argv[0]);
        return 2;
    }
    urls = (const char *const *)&argv[2];
    n_urls = (size_t)(argc - 2);
    if (strcmp(argv[1], "no-quorum") == 0)
        no_quorum();
    else
        all();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

#endif /* REDLOCK_TEST_HARNESS_H */
