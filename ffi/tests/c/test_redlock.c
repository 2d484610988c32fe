/*
 * The C ABI end to end, against real redis-server nodes started by ffi/tests/c_abi.rs.
 *
 *   test_redlock all       URL...   every case that needs a healthy cluster
 *   test_redlock no-quorum URL...   run after the harness killed a majority of the nodes
 *
 * Prints "N passed, M failed" and exits non-zero on any failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

static const char *const *urls;
static size_t n_urls;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* How long a call waits for one node. Most checks need a single attempt to get every node's
 * answer, and on a loaded machine a node (or this process) can stall for much longer than the
 * library's 50 ms default: a patient second by default, more under valgrind (the harness sets
 * REDLOCK_TEST_NODE_TIMEOUT_MS). */
#define PATIENT_NODE_TIMEOUT_MS 1000

static uint64_t node_timeout_ms(void) {
    const char *timeout = getenv("REDLOCK_TEST_NODE_TIMEOUT_MS");
    return timeout != NULL ? strtoull(timeout, NULL, 10) : PATIENT_NODE_TIMEOUT_MS;
}

/* New options with the suite's node timeout; the caller frees them. */
static redlock_options *test_options(void) {
    redlock_options *opts = NULL;
    redlock_error *err = NULL;
    if (redlock_options_new(&opts, &err) != REDLOCK_OK ||
        redlock_options_set_node_timeout_ms(opts, node_timeout_ms(), &err) != REDLOCK_OK) {
        fprintf(stderr, "test options: %s\n", redlock_error_message(err));
        exit(2);
    }
    return opts;
}

/* A client over the suite's nodes with `opts`, which it frees. */
static redlock_client *client_with(redlock_options *opts) {
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

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static redlock_client *new_client(void) {
    redlock_options *opts = test_options();
    CHECK(redlock_options_set_retry_count(opts, 100, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_retry_delay_ms(opts, 5, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_retry_jitter_ms(opts, 5, NULL) == REDLOCK_OK);
    return client_with(opts);
}

/* A failed call gives an error with its status and a non-empty message. The error is read
 * through a pointer because the call that writes it is an argument of this function. */
static void check_error(redlock_status st, redlock_status want, redlock_error **errp) {
    redlock_error *err = *errp;
    CHECK(st == want);
    CHECK(err != NULL);
    CHECK(redlock_error_status(err) == want);
    CHECK(redlock_error_message(err) != NULL && strlen(redlock_error_message(err)) > 0);
    redlock_error_free(err);
    *errp = NULL;
}

static void test_round_trip(void) {
    redlock_client *client = new_client();
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    uint64_t start = now_ms();
    CHECK(redlock_client_lock(client, "c:round-trip", 10000, &lock, &err) == REDLOCK_OK);
    CHECK(err == NULL);
    CHECK(lock != NULL);
    CHECK(strcmp(redlock_lock_resource(lock), "c:round-trip") == 0);
    CHECK(strlen(redlock_lock_token(lock)) == 40);
    uint64_t v = redlock_lock_validity_ms(lock);
    uint64_t elapsed = now_ms() - start;
    /* The TTL less the drift allowance (1% + 2 ms) and the time the call took. */
    CHECK(v <= 10000 - 102);
    CHECK(v + elapsed + 2 >= 10000 - 102);
    CHECK(redlock_lock_extend(lock, 60000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_validity_ms(lock) > 50000);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_validity_ms(lock) == 0);
    CHECK(strcmp(redlock_lock_resource(lock), "c:round-trip") == 0); /* handle stays valid */
    check_error(redlock_lock_extend(lock, 1000, &err), REDLOCK_LOST, &err);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK); /* a second release is a no-op */
    redlock_lock_free(lock);

    /* try_lock, and the lock is free again after the release. */
    CHECK(redlock_client_try_lock(client, "c:round-trip", 10000, &lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_client_free(client);
}

static void test_not_acquired(void) {
    redlock_client *client = new_client();
    redlock_lock *held = NULL, *other = (redlock_lock *)&held;
    redlock_error *err = NULL;
    CHECK(redlock_client_try_lock(client, "c:busy", 10000, &held, NULL) == REDLOCK_OK);
    redlock_lock *const sentinel = other;
    check_error(redlock_client_try_lock(client, "c:busy", 10000, &other, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    CHECK(other == sentinel); /* out untouched on failure */
    /* Freeing a held lock releases it: the resource becomes free. */
    redlock_lock_free(held);
    int acquired = 0;
    for (int i = 0; i < 100 && !acquired; i++) {
        if (redlock_client_try_lock(client, "c:busy", 10000, &other, NULL) == REDLOCK_OK) {
            acquired = 1;
            redlock_lock_free(other);
        } else {
            sleep_ms(10);
        }
    }
    CHECK(acquired);
    redlock_client_free(client);
}

static void test_lock_outlives_client(void) {
    redlock_client *client = new_client();
    redlock_lock *lock = NULL;
    CHECK(redlock_client_lock(client, "c:outlive", 10000, &lock, NULL) == REDLOCK_OK);
    redlock_client_free(client);
    CHECK(redlock_lock_extend(lock, 10000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
}

#define THREADS 4
#define ITERATIONS 20
static volatile long counter;

struct worker {
    redlock_client *client;
    long wins;
};

static void *contend(void *arg) {
    struct worker *w = arg;
    for (int i = 0; i < ITERATIONS; i++) {
        redlock_lock *lock = NULL;
        if (redlock_client_lock(w->client, "c:counter", 5000, &lock, NULL) != REDLOCK_OK)
            continue;
        long seen = counter; /* deliberately non-atomic read-modify-write */
        sleep_ms(1);
        counter = seen + 1;
        w->wins++;
        redlock_lock_release(lock, NULL);
        redlock_lock_free(lock);
    }
    return NULL;
}

static void test_threads_exclude_each_other(void) {
    redlock_client *client = new_client();
    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i].client = client;
        workers[i].wins = 0;
        pthread_create(&threads[i], NULL, contend, &workers[i]);
    }
    long wins = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        wins += workers[i].wins;
    }
    CHECK(wins > 0);
    CHECK(counter == wins);
    redlock_client_free(client);
}

static void test_invalid_arguments(void) {
    redlock_client *client = new_client();
    redlock_client *c2 = (redlock_client *)&client;
    redlock_client *const csentinel = c2;
    redlock_lock *lock = (redlock_lock *)&client;
    redlock_lock *const lsentinel = lock;
    redlock_error *err = NULL;

    /* Client construction. */
    check_error(redlock_client_new(urls, 0, NULL, &c2, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_new(NULL, 3, NULL, &c2, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_new(urls, n_urls, NULL, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    const char *with_null[] = {urls[0], NULL};
    check_error(redlock_client_new(with_null, 2, NULL, &c2, &err), REDLOCK_INVALID_ARGUMENT, &err);
    const char *bad_urls[] = {"not a url", "", "redis://", "http://127.0.0.1:1", "\xff\xfe"};
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        check_error(redlock_client_new(&bad_urls[i], 1, NULL, &c2, &err),
                    REDLOCK_INVALID_ARGUMENT, &err);
    }
    const char *twice[] = {urls[0], urls[0]};
    check_error(redlock_client_new(twice, 2, NULL, &c2, &err), REDLOCK_INVALID_ARGUMENT, &err);
    /* TLS files: unreadable, or given for nodes that do not use TLS, fail the client; the
     * options are checked when they are set (see test_options_setters). */
    const char *tls_url[] = {"rediss://127.0.0.1:1"};
    redlock_options *opts = NULL;
    CHECK(redlock_options_new(&opts, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_tls_ca_file(opts, "/nonexistent/redlock-ca.pem", NULL) ==
          REDLOCK_OK);
    CHECK(redlock_client_new(tls_url, 1, opts, &c2, &err) == REDLOCK_INVALID_ARGUMENT);
    CHECK(err != NULL && strstr(redlock_error_message(err), "redlock-ca.pem") != NULL);
    redlock_error_free(err);
    err = NULL;
    check_error(redlock_client_new(urls, n_urls, opts, &c2, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_options_free(opts);
    CHECK(redlock_options_new(&opts, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_tls_client_cert_file(opts, "/nonexistent/client.pem",
                                                   "/nonexistent/client.key", NULL) == REDLOCK_OK);
    check_error(redlock_client_new(tls_url, 1, opts, &c2, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_options_free(opts);
    CHECK(c2 == csentinel);
    /* A NULL err is allowed: only the status comes back. */
    CHECK(redlock_client_new(urls, 0, NULL, &c2, NULL) == REDLOCK_INVALID_ARGUMENT);

    /* Locking. */
    check_error(redlock_client_lock(NULL, "x", 1000, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock(client, NULL, 1000, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock(client, "", 1000, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock(client, "\xc3\x28", 1000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_try_lock(client, "x", 0, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_try_lock(client, "x", 1, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_try_lock(client, "x", UINT64_MAX, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_try_lock(client, "x", 1000, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(lock == lsentinel);

    /* Lock operations. */
    check_error(redlock_lock_extend(NULL, 1000, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_lock_release(NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_lock *held = NULL;
    CHECK(redlock_client_try_lock(client, "c:args", 10000, &held, NULL) == REDLOCK_OK);
    check_error(redlock_lock_extend(held, 0, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(redlock_lock_validity_ms(held) > 0); /* a bad extend changes nothing */
    redlock_lock_free(held);

    /* NULL-safe accessors and frees. */
    CHECK(redlock_lock_validity_ms(NULL) == 0);
    CHECK(redlock_lock_resource(NULL) == NULL);
    CHECK(redlock_lock_token(NULL) == NULL);
    CHECK(redlock_error_message(NULL) == NULL);
    CHECK(redlock_error_status(NULL) == REDLOCK_OK);
    redlock_lock_free(NULL);
    redlock_client_free(NULL);
    redlock_error_free(NULL);
    CHECK(strcmp(redlock_status_str(REDLOCK_NO_QUORUM), "REDLOCK_NO_QUORUM") == 0);
    CHECK(strcmp(redlock_status_str(-1), "REDLOCK_UNKNOWN_STATUS") == 0);
    CHECK(strcmp(redlock_version(), REDLOCK_VERSION) == 0);
    redlock_client_free(client);
}

/* The options builders: defaults, every setter with good and bad input, and a failed setter
 * changes nothing. */
static void test_options_setters(void) {
    redlock_error *err = NULL;
    /* NULL options read as the defaults, like NULL options in redlock_client_new. */
    CHECK(redlock_options_retry_count(NULL) == 3);
    CHECK(redlock_options_retry_delay_ms(NULL) == 200);
    CHECK(redlock_options_retry_jitter_ms(NULL) == 100);
    CHECK(redlock_options_drift_factor(NULL) == 0.01);
    CHECK(redlock_options_node_timeout_ms(NULL) == 50);
    CHECK(redlock_options_max_extensions(NULL) == 0);
    CHECK(redlock_options_restart_grace_ms(NULL) == 0);
    check_error(redlock_options_new(NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);

    redlock_options *o = NULL;
    CHECK(redlock_options_new(&o, &err) == REDLOCK_OK && err == NULL && o != NULL);
    CHECK(redlock_options_retry_count(o) == 3);
    CHECK(redlock_options_node_timeout_ms(o) == 50);

    /* Good values are taken. */
    CHECK(redlock_options_set_retry_count(o, 7, &err) == REDLOCK_OK && err == NULL);
    CHECK(redlock_options_set_retry_delay_ms(o, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_retry_jitter_ms(o, 315360000000ULL, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_drift_factor(o, 0.0, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_node_timeout_ms(o, 1, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_max_extensions(o, 9, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_restart_grace_ms(o, 1234, NULL) == REDLOCK_OK);
    CHECK(redlock_options_retry_count(o) == 7);
    CHECK(redlock_options_retry_delay_ms(o) == 0);
    CHECK(redlock_options_retry_jitter_ms(o) == 315360000000ULL);
    CHECK(redlock_options_drift_factor(o) == 0.0);
    CHECK(redlock_options_node_timeout_ms(o) == 1);
    CHECK(redlock_options_max_extensions(o) == 9);
    CHECK(redlock_options_restart_grace_ms(o) == 1234);
    /* 0 turns the cap and the grace off again. */
    CHECK(redlock_options_set_max_extensions(o, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_restart_grace_ms(o, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_options_max_extensions(o) == 0 && redlock_options_restart_grace_ms(o) == 0);

    /* Bad values: REDLOCK_INVALID_ARGUMENT with a message, and nothing changes. */
    check_error(redlock_options_set_retry_delay_ms(o, 315360000001ULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_retry_jitter_ms(o, UINT64_MAX, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_drift_factor(o, 1.0, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_drift_factor(o, -0.1, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_drift_factor(o, 0.0 / 0.0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_drift_factor(o, 1.0 / 0.0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_node_timeout_ms(o, 0, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_node_timeout_ms(o, UINT64_MAX, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_restart_grace_ms(o, UINT64_MAX, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    const char bad_utf8[] = {'\xff', '\xfe', 0};
    check_error(redlock_options_set_tls_ca_file(o, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_tls_ca_file(o, "", &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_tls_ca_file(o, bad_utf8, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_tls_client_cert_file(o, "/c.pem", NULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_tls_client_cert_file(o, NULL, "/c.key", &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_tls_client_cert_file(o, "", "/c.key", &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_tls_client_cert_file(o, "/c.pem", bad_utf8, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(redlock_options_retry_delay_ms(o) == 0);
    CHECK(redlock_options_retry_jitter_ms(o) == 315360000000ULL);
    CHECK(redlock_options_drift_factor(o) == 0.0);
    CHECK(redlock_options_node_timeout_ms(o) == 1);
    /* The failed TLS setters left no TLS file behind: a redis:// client builds. */
    CHECK(redlock_options_set_node_timeout_ms(o, node_timeout_ms(), NULL) == REDLOCK_OK);
    redlock_client *client = NULL;
    CHECK(redlock_client_new(urls, n_urls, o, &client, NULL) == REDLOCK_OK);
    /* The client copied the options: changing or freeing them does not touch it. */
    CHECK(redlock_options_set_retry_count(o, 0, NULL) == REDLOCK_OK);
    redlock_client *second = NULL;
    CHECK(redlock_client_new(urls, n_urls, o, &second, NULL) == REDLOCK_OK);
    redlock_options_free(o);
    redlock_lock *lock = NULL;
    CHECK(redlock_client_try_lock(client, "c:options", 10000, &lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_client_free(second);
    redlock_client_free(client);

    /* A NULL handle is an error for every setter, never a crash. */
    check_error(redlock_options_set_retry_count(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_retry_delay_ms(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_retry_jitter_ms(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_drift_factor(NULL, 0.01, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_node_timeout_ms(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_max_extensions(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_restart_grace_ms(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_tls_ca_file(NULL, "/ca.pem", &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_tls_client_cert_file(NULL, "/c.pem", "/c.key", &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(redlock_options_set_retry_count(NULL, 1, NULL) == REDLOCK_INVALID_ARGUMENT);
    redlock_options_free(NULL);

    /* Lock options. */
    check_error(redlock_lock_options_new(NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_lock_options *lo = NULL;
    CHECK(redlock_lock_options_new(&lo, NULL) == REDLOCK_OK && lo != NULL);
    CHECK(redlock_lock_options_set_auto_extend(lo, true, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_options_set_extend_fraction(lo, 0.5, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_options_set_max_hold_ms(lo, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_options_set_wait_timeout_ms(lo, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_options_set_notifications(lo, false, NULL) == REDLOCK_OK);
    check_error(redlock_lock_options_set_extend_fraction(lo, 0.0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_lock_options_set_extend_fraction(lo, 1.0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_lock_options_set_extend_fraction(lo, 0.0 / 0.0, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_lock_options_set_max_hold_ms(lo, UINT64_MAX, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_lock_options_set_wait_timeout_ms(lo, UINT64_MAX, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_lock_options_set_auto_extend(NULL, true, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_lock_options_set_extend_fraction(NULL, 0.5, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_lock_options_set_max_hold_ms(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_lock_options_set_wait_timeout_ms(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_lock_options_set_notifications(NULL, true, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    /* The options still work after the failed setters: auto-extended at half the TTL, one
     * attempt (a wait of 0). */
    client = new_client();
    uint64_t ttl = 5 * node_timeout_ms();
    CHECK(redlock_client_lock_with(client, "c:lock-options", ttl, lo, &lock, NULL) == REDLOCK_OK);
    redlock_lock *other = NULL;
    check_error(redlock_client_lock_with(client, "c:lock-options", ttl, lo, &other, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    sleep_ms((long)(ttl + ttl / 2));
    CHECK(redlock_lock_is_held(lock)); /* extended past its first TTL */
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_lock_options_free(lo);
    redlock_lock_options_free(NULL);
    redlock_client_free(client);
}

/* Every node was started by the test moments ago, so a grace of an hour keeps all of them out
 * of acquire quorums; the status of each node says so, and nothing stays locked. */
static void test_restart_grace_and_node_status(void) {
    redlock_options *opts = test_options();
    CHECK(redlock_options_set_retry_count(opts, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_restart_grace_ms(opts, 3600000, NULL) == REDLOCK_OK);
    redlock_client *guarded = client_with(opts);
    CHECK(redlock_client_node_count(guarded) == n_urls);
    CHECK(redlock_client_node_count(NULL) == 0);

    redlock_node_status *status = NULL;
    for (size_t i = 0; i < n_urls; i++) {
        CHECK(redlock_client_node_status(guarded, i, &status, NULL) == REDLOCK_OK);
        const char *address = redlock_node_status_address(status);
        CHECK(address != NULL && strstr(address, "127.0.0.1:") != NULL);
        CHECK(redlock_node_status_connected(status));
        CHECK(redlock_node_status_connects(status) == 1);
        CHECK(redlock_node_status_restarts(status) == 0);
        CHECK(strlen(redlock_node_status_run_id(status)) == 40);
        uint64_t uptime = redlock_node_status_uptime_ms(status);
        CHECK(uptime != UINT64_MAX && uptime < 3600000);
        uint64_t grace = redlock_node_status_grace_remaining_ms(status);
        CHECK(grace > 0 && grace <= 3600000);
        CHECK(redlock_node_status_last_error(status) == NULL);
        redlock_node_status_free(status);
        status = NULL;
    }

    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    redlock_status st = redlock_client_try_lock(guarded, "c:grace", 10000, &lock, &err);
    CHECK(st == REDLOCK_NO_QUORUM);
    CHECK(lock == NULL);
    CHECK(err != NULL && strstr(redlock_error_message(err), "restart_grace") != NULL);
    redlock_error_free(err);

    /* The nodes' SETs were undone: a client without the grace gets the lock at once. */
    redlock_client *plain = new_client();
    CHECK(redlock_client_node_status(plain, 0, &status, NULL) == REDLOCK_OK);
    CHECK(redlock_node_status_grace_remaining_ms(status) == 0);
    redlock_node_status_free(status);
    CHECK(redlock_client_lock(plain, "c:grace", 10000, &lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_client_free(plain);

    redlock_node_status *untouched = (redlock_node_status *)&guarded;
    redlock_node_status *const sentinel = untouched;
    check_error(redlock_client_node_status(guarded, n_urls, &untouched, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(untouched == sentinel); /* out untouched on failure */
    check_error(redlock_client_node_status(NULL, 0, &untouched, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_client_node_status(guarded, 0, NULL, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    CHECK(untouched == sentinel);
    /* NULL-safe accessors. */
    CHECK(redlock_node_status_address(NULL) == NULL);
    CHECK(!redlock_node_status_connected(NULL));
    CHECK(redlock_node_status_connects(NULL) == 0);
    CHECK(redlock_node_status_restarts(NULL) == 0);
    CHECK(redlock_node_status_uptime_ms(NULL) == UINT64_MAX);
    CHECK(redlock_node_status_grace_remaining_ms(NULL) == 0);
    CHECK(redlock_node_status_run_id(NULL) == NULL);
    CHECK(redlock_node_status_last_error(NULL) == NULL);
    redlock_node_status_free(NULL);
    redlock_client_free(guarded);
}

/* Fenced locks: tokens grow from holder to holder; other kinds of lock have none. */
static void test_fenced(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    uint64_t previous = 0;
    for (int i = 0; i < 3; i++) {
        redlock_lock *lock = NULL;
        CHECK(redlock_client_lock_fenced(client, "c:fenced", 10000, &lock, &err) == REDLOCK_OK);
        uint64_t fence = 0;
        CHECK(redlock_lock_fence(lock, &fence, NULL) == REDLOCK_OK);
        CHECK(fence > previous);
        previous = fence;
        /* A plain lock on the same resource is refused while the fenced one is held. */
        redlock_lock *plain = NULL;
        check_error(redlock_client_try_lock(client, "c:fenced", 10000, &plain, &err),
                    REDLOCK_NOT_ACQUIRED, &err);
        CHECK(plain == NULL);
        CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
        /* The token stays readable after release. */
        uint64_t again = 0;
        CHECK(redlock_lock_fence(lock, &again, NULL) == REDLOCK_OK && again == fence);
        redlock_lock_free(lock);
    }
    redlock_lock *lock = NULL;
    CHECK(redlock_client_try_lock_fenced(client, "c:fenced", 10000, &lock, NULL) == REDLOCK_OK);
    uint64_t fence = 0;
    CHECK(redlock_lock_fence(lock, &fence, NULL) == REDLOCK_OK && fence > previous);
    redlock_lock_free(lock);

    /* A plain lock has no token: out untouched. */
    redlock_lock *plain = NULL;
    CHECK(redlock_client_try_lock(client, "c:unfenced", 10000, &plain, NULL) == REDLOCK_OK);
    uint64_t untouched = 77;
    check_error(redlock_lock_fence(plain, &untouched, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(untouched == 77);
    check_error(redlock_lock_hold_count(plain, &untouched, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_lock_fence(plain, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_lock_fence(NULL, &untouched, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(untouched == 77);
    redlock_lock_free(plain);

    lock = NULL;
    check_error(redlock_client_lock_fenced(NULL, "c:fenced", 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_fenced(client, NULL, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_try_lock_fenced(client, "", 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_fenced(client, "c:fenced", 0, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_fenced(client, "c:fenced", 10000, NULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(lock == NULL);
    redlock_client_free(client);
}

/* Reentrant locks: nested holds of one owner, another owner waits for the last release. */
static void test_reentrant(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_lock *outer = NULL, *inner = NULL, *other = NULL;
    CHECK(redlock_client_lock_reentrant(client, "c:re", "alice", 10000, &outer, &err) ==
          REDLOCK_OK);
    CHECK(redlock_client_try_lock_reentrant(client, "c:re", "alice", 10000, &inner, &err) ==
          REDLOCK_OK);
    uint64_t holds = 0;
    CHECK(redlock_lock_hold_count(outer, &holds, NULL) == REDLOCK_OK && holds == 1);
    CHECK(redlock_lock_hold_count(inner, &holds, NULL) == REDLOCK_OK && holds == 2);
    CHECK(strcmp(redlock_lock_token(inner), "alice") == 0);
    check_error(redlock_client_try_lock_reentrant(client, "c:re", "bob", 10000, &other, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    check_error(redlock_client_try_lock(client, "c:re", 10000, &other, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    CHECK(redlock_lock_extend(inner, 20000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(inner, NULL) == REDLOCK_OK);
    check_error(redlock_client_try_lock_reentrant(client, "c:re", "bob", 10000, &other, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    CHECK(other == NULL);
    CHECK(redlock_lock_release(outer, NULL) == REDLOCK_OK);
    CHECK(redlock_client_try_lock_reentrant(client, "c:re", "bob", 10000, &other, NULL) ==
          REDLOCK_OK);
    /* Freeing an unreleased hold releases it. */
    redlock_lock_free(other);
    redlock_lock_free(inner);
    redlock_lock_free(outer);

    redlock_lock *lock = NULL;
    const char bad_utf8[] = {'\xc3', '\x28', 0};
    check_error(redlock_client_lock_reentrant(client, "c:re2", NULL, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_reentrant(client, "c:re2", "", 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_reentrant(client, "c:re2", bad_utf8, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_try_lock_reentrant(client, NULL, "alice", 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_reentrant(client, "c:re2", "alice", 10000, NULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(lock == NULL);
    redlock_client_free(client);
}

/* Multi-resource locks: all or nothing, released together. */
static void test_many(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    const char *const set[] = {"c:m-b", "c:m-a"};
    redlock_lock *lock = NULL, *other = NULL;
    CHECK(redlock_client_lock_many(client, set, 2, 10000, &lock, &err) == REDLOCK_OK);
    CHECK(strcmp(redlock_lock_resource(lock), "c:m-a,c:m-b") == 0);
    check_error(redlock_client_try_lock(client, "c:m-b", 10000, &other, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    const char *const overlapping[] = {"c:m-b", "c:m-c"};
    check_error(redlock_client_try_lock_many(client, overlapping, 2, 10000, &other, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    CHECK(redlock_lock_extend(lock, 20000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    CHECK(redlock_client_try_lock_many(client, overlapping, 2, 10000, &other, NULL) ==
          REDLOCK_OK);
    redlock_lock_free(other);
    redlock_lock_free(lock);

    lock = NULL;
    const char *const twice[] = {"c:x", "c:x"};
    const char *const with_null[] = {"c:x", NULL};
    const char *const with_empty[] = {"c:x", ""};
    const char *many[65];
    for (int i = 0; i < 65; i++)
        many[i] = "c:same";
    check_error(redlock_client_lock_many(client, set, 0, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_many(client, NULL, 2, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_many(client, twice, 2, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_many(client, with_null, 2, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_try_lock_many(client, with_empty, 2, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_many(client, many, 65, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_many(client, set, 2, 0, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_many(NULL, set, 2, 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_many(client, set, 2, 10000, NULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(lock == NULL);
    redlock_client_free(client);
}

/* ---- auto-extension, the lost signal, waiting ---- */

/* A TTL that leaves room for an extension every third of it plus node_timeout. */
static uint64_t auto_ttl_ms(void) { return 3 * node_timeout_ms() + 150; }

/* Deletes `key` on the node at `url` (redis://127.0.0.1:PORT) behind the library's back;
 * returns how many keys it deleted, or -1 when the node did not answer. */
static int raw_del(const char *url, const char *key) {
    const char *colon = strrchr(url, ':');
    if (colon == NULL)
        return -1;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)atoi(colon + 1));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    char cmd[256];
    int n = snprintf(cmd, sizeof cmd, "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", strlen(key), key);
    char reply[64] = {0};
    int ok = connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
             write(fd, cmd, (size_t)n) == n && read(fd, reply, sizeof reply - 1) > 0;
    close(fd);
    return ok && reply[0] == ':' ? atoi(reply + 1) : -1;
}

/* Deletes `key` on the node at `url` once it is there: a lock call returns on a quorum, so a
 * slow node may apply its SET a moment later, after a DEL sent at once. */
static int raw_del_when_set(const char *url, const char *key) {
    for (int i = 0; i < 100; i++) {
        int deleted = raw_del(url, key);
        if (deleted != 0)
            return deleted;
        sleep_ms(10);
    }
    return 0;
}

static void test_auto_extend_outlives_ttl(void) {
    redlock_client *client = new_client();
    redlock_client *other = new_client();
    /* Room for an extension (every third of the TTL) to fail on a stalled majority and be
     * retried a node timeout later: with 3 node timeouts, one stall of a second under load (the
     * valgrind run beside this one) lost the lock. */
    uint64_t ttl = 5 * node_timeout_ms();
    redlock_lock *lock = NULL;
    CHECK(redlock_client_lock_auto(client, "c:auto", ttl, &lock, NULL) == REDLOCK_OK);
    /* The client handle may go: the lock keeps it alive and keeps being extended. */
    redlock_client_free(client);
    for (int i = 0; i < 3; i++) {
        sleep_ms((long)ttl / 2);
        CHECK(redlock_lock_is_held(lock));
        /* Nobody else gets it. (Refused, normally; a node stalling past the node timeout
         * could make it a no-quorum failure, which is no lock either.) */
        redlock_lock *stolen = NULL;
        CHECK(redlock_client_try_lock(other, "c:auto", ttl, &stolen, NULL) != REDLOCK_OK);
        CHECK(stolen == NULL);
        redlock_lock_free(stolen);
    }
    CHECK(!redlock_lock_is_lost(lock));
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    CHECK(!redlock_lock_is_held(lock));
    CHECK(!redlock_lock_is_lost(lock));
    redlock_lock_free(lock);
    redlock_lock *next = NULL;
    CHECK(redlock_client_try_lock(other, "c:auto", ttl, &next, NULL) == REDLOCK_OK);
    redlock_lock_free(next);
    redlock_client_free(other);
}

struct lost_flag {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    int held_in_callback;
    char resource[64];
    redlock_lock *lock;
};

static void on_lost(void *user, const char *resource) {
    struct lost_flag *f = user;
    /* Calling back into the lock from the extender thread must not deadlock. */
    int held = redlock_lock_is_held(f->lock);
    pthread_mutex_lock(&f->mu);
    f->calls++;
    f->held_in_callback = held;
    snprintf(f->resource, sizeof f->resource, "%s", resource);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Waits up to `ms` for the callback; returns its call count. */
static int wait_lost(struct lost_flag *f, long ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&f->mu);
    while (f->calls == 0 && pthread_cond_timedwait(&f->cv, &f->mu, &until) == 0) {
    }
    int calls = f->calls;
    pthread_mutex_unlock(&f->mu);
    return calls;
}

static void test_lost_callback_when_keys_vanish(void) {
    redlock_client *client = new_client();
    uint64_t ttl = auto_ttl_ms();
    struct lost_flag f = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1, "", NULL};
    CHECK(redlock_client_lock_auto(client, "c:vanish", ttl, &f.lock, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_on_lost(f.lock, on_lost, &f, NULL) == REDLOCK_OK);
    /* Delete the keys on a majority of the nodes. */
    for (size_t i = 0; i < n_urls / 2 + 1; i++)
        CHECK(raw_del_when_set(urls[i], "c:vanish") >= 0);
    CHECK(wait_lost(&f, 20 * (long)ttl) == 1);
    CHECK(f.held_in_callback == 0);
    CHECK(strcmp(f.resource, "c:vanish") == 0);
    CHECK(redlock_lock_is_lost(f.lock));
    CHECK(!redlock_lock_is_held(f.lock));
    CHECK(redlock_lock_validity_ms(f.lock) == 0);
    redlock_error *err = NULL;
    check_error(redlock_lock_release(f.lock, &err), REDLOCK_LOST, &err);
    redlock_lock_free(f.lock);
    redlock_client_free(client);
}

static void test_max_hold_ends_in_lost(void) {
    redlock_client *client = new_client();
    uint64_t ttl = auto_ttl_ms();
    redlock_lock_options *opts = NULL;
    CHECK(redlock_lock_options_new(&opts, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_options_set_auto_extend(opts, true, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_options_set_max_hold_ms(opts, ttl, NULL) == REDLOCK_OK);
    struct lost_flag f = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1, "", NULL};
    CHECK(redlock_client_lock_with(client, "c:max-hold", ttl, opts, &f.lock, NULL) == REDLOCK_OK);
    redlock_lock_options_free(opts); /* the lock keeps what it needs */
    CHECK(redlock_lock_on_lost(f.lock, on_lost, &f, NULL) == REDLOCK_OK);
    CHECK(wait_lost(&f, 20 * (long)ttl) == 1);
    CHECK(redlock_lock_is_lost(f.lock));
    /* Registered after the loss: runs at once, on this thread. */
    struct lost_flag late = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1, "", f.lock};
    CHECK(redlock_lock_on_lost(f.lock, on_lost, &late, NULL) == REDLOCK_OK);
    CHECK(late.calls == 1);
    redlock_lock_free(f.lock);
    redlock_client_free(client);
}

struct waiter {
    redlock_client *client;
    redlock_status status;
};

static void *wait_for_lock(void *arg) {
    struct waiter *w = arg;
    redlock_lock *lock = NULL;
    w->status = redlock_client_lock_wait(w->client, "c:wait", 10000, 60000, &lock, NULL);
    redlock_lock_free(lock);
    return NULL;
}

static void test_waiters_get_the_lock_after_release(void) {
    redlock_options *o = test_options();
    /* The fallback would be slow: notifications wake the waiters. */
    CHECK(redlock_options_set_retry_delay_ms(o, 1000, NULL) == REDLOCK_OK);
    redlock_client *client = client_with(o);
    redlock_lock *holder = NULL;
    CHECK(redlock_client_lock(client, "c:wait", 10000, &holder, NULL) == REDLOCK_OK);
    pthread_t threads[3];
    struct waiter waiters[3];
    for (int i = 0; i < 3; i++) {
        waiters[i].client = client;
        waiters[i].status = REDLOCK_PANIC;
        pthread_create(&threads[i], NULL, wait_for_lock, &waiters[i]);
    }
    sleep_ms(200);
    CHECK(redlock_lock_release(holder, NULL) == REDLOCK_OK);
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        CHECK(waiters[i].status == REDLOCK_OK);
    }
    redlock_lock_free(holder);
    /* Giving up at the deadline. */
    CHECK(redlock_client_lock(client, "c:wait", 10000, &holder, NULL) == REDLOCK_OK);
    redlock_lock *late = NULL;
    redlock_error *err = NULL;
    check_error(redlock_client_lock_wait(client, "c:wait", 10000, 100, &late, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    CHECK(late == NULL);
    redlock_lock_free(holder);
    redlock_client_free(client);
}

static void test_lock_with_bad_arguments(void) {
    redlock_client *client = new_client();
    redlock_lock *lock = (redlock_lock *)&client;
    redlock_lock *const sentinel = lock;
    redlock_error *err = NULL;
    redlock_lock_options *opts = NULL;
    CHECK(redlock_lock_options_new(&opts, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_options_set_auto_extend(opts, true, NULL) == REDLOCK_OK);
    /* A TTL too short to auto-extend: it must exceed fraction x ttl + node_timeout. */
    check_error(redlock_client_lock_with(client, "c:bad", 3, opts, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    redlock_lock_options_free(opts);
    check_error(redlock_client_lock_auto(client, "c:bad", 3, &lock, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_client_lock_auto(NULL, "c:bad", 10000, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_wait(client, NULL, 10000, 10, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_wait(client, "\xc3\x28", 10000, 10, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_lock_with(client, "c:bad", 10000, NULL, NULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(lock == sentinel);
    check_error(redlock_lock_on_lost(NULL, on_lost, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_lock *held = NULL;
    /* NULL options: the defaults, like redlock_client_lock. */
    CHECK(redlock_client_lock_with(client, "c:bad", 10000, NULL, &held, NULL) == REDLOCK_OK);
    check_error(redlock_lock_on_lost(held, NULL, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_lock_free(held);
    CHECK(!redlock_lock_is_held(NULL));
    CHECK(!redlock_lock_is_lost(NULL));
    redlock_client_free(client);
}

static void test_no_quorum(void) {
    redlock_options *opts = test_options();
    CHECK(redlock_options_set_retry_count(opts, 1, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_retry_delay_ms(opts, 10, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_retry_jitter_ms(opts, 0, NULL) == REDLOCK_OK);
    redlock_client *client = client_with(opts);
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    redlock_status st = redlock_client_lock(client, "c:no-quorum", 10000, &lock, &err);
    CHECK(st == REDLOCK_NO_QUORUM);
    CHECK(lock == NULL);
    /* The message names a failed node. */
    CHECK(err != NULL && strstr(redlock_error_message(err), "127.0.0.1:") != NULL);
    redlock_error_free(err);
    redlock_client_free(client);
}

/* ---- Inspection and forced release (redlock_client_inspect, redlock_client_force_release) ---- */

/* Nodes whose key is a token equal to `token` with a TTL in (0, max_ttl] ms. */
static size_t nodes_with_token(const redlock_inspection *insp, const char *token, uint64_t max_ttl) {
    size_t found = 0;
    for (size_t i = 0; i < redlock_inspection_node_count(insp); i++) {
        uint64_t ttl = 0;
        const char *t = redlock_inspection_node_token(insp, i);
        if (redlock_inspection_node_key_kind(insp, i) == REDLOCK_KEY_TOKEN && t != NULL &&
            strcmp(t, token) == 0 && redlock_inspection_node_error(insp, i) == NULL &&
            redlock_inspection_node_ttl_ms(insp, i, &ttl) && ttl > 0 && ttl <= max_ttl &&
            !redlock_inspection_node_persistent(insp, i) &&
            strcmp(redlock_inspection_node_key_type(insp, i), "string") == 0)
            found++;
    }
    return found;
}

static size_t nodes_of_kind(const redlock_inspection *insp, redlock_key_kind kind) {
    size_t found = 0;
    for (size_t i = 0; i < redlock_inspection_node_count(insp); i++)
        if (redlock_inspection_node_key_kind(insp, i) == kind)
            found++;
    return found;
}

static size_t outcomes(const redlock_forced_release *r, redlock_release_outcome outcome) {
    size_t found = 0;
    for (size_t i = 0; i < redlock_forced_release_node_count(r); i++)
        if (redlock_forced_release_node_outcome(r, i) == outcome)
            found++;
    return found;
}

static redlock_inspection *inspect(redlock_client *client, const char *resource) {
    redlock_inspection *insp = NULL;
    redlock_error *err = NULL;
    redlock_status st = redlock_client_inspect(client, resource, &insp, &err);
    CHECK(st == REDLOCK_OK && insp != NULL && err == NULL);
    if (st != REDLOCK_OK) {
        fprintf(stderr, "inspect %s: %s\n", resource, redlock_error_message(err));
        redlock_error_free(err);
        exit(2);
    }
    return insp;
}

static redlock_forced_release *force(redlock_client *client, const char *resource,
                                     const char *token) {
    redlock_forced_release *r = NULL;
    redlock_error *err = NULL;
    redlock_status st = redlock_client_force_release(client, resource, token, &r, &err);
    CHECK(st == REDLOCK_OK && r != NULL && err == NULL);
    if (st != REDLOCK_OK) {
        fprintf(stderr, "force_release %s: %s\n", resource, redlock_error_message(err));
        redlock_error_free(err);
        exit(2);
    }
    return r;
}

static void test_inspect_plain_fenced_and_free(void) {
    redlock_client *client = new_client();
    size_t quorum = n_urls / 2 + 1;

    redlock_inspection *insp = inspect(client, "c:insp-free");
    CHECK(strcmp(redlock_inspection_resource(insp), "c:insp-free") == 0);
    CHECK(!redlock_inspection_held(insp));
    CHECK(redlock_inspection_holder(insp) == NULL);
    uint64_t fence = 12345;
    CHECK(!redlock_inspection_fence(insp, &fence) && fence == 12345);
    CHECK(redlock_inspection_quorum(insp) == quorum);
    CHECK(redlock_inspection_node_count(insp) == n_urls);
    CHECK(nodes_of_kind(insp, REDLOCK_KEY_ABSENT) == n_urls);
    for (size_t i = 0; i < n_urls; i++) {
        const char *address = redlock_inspection_node_address(insp, i);
        /* host:port of the URL, never the scheme (nor any credentials). */
        CHECK(address != NULL && strstr(urls[i], address) != NULL &&
              strstr(address, "redis://") == NULL);
        CHECK(redlock_inspection_node_error(insp, i) == NULL);
        CHECK(strcmp(redlock_inspection_node_key_type(insp, i), "none") == 0);
        CHECK(!redlock_inspection_node_ttl_ms(insp, i, NULL));
        CHECK(redlock_inspection_node_token(insp, i) == NULL);
        CHECK(redlock_inspection_node_owner_count(insp, i) == 0);
    }
    redlock_inspection_free(insp);

    redlock_lock *lock = NULL;
    CHECK(redlock_client_try_lock(client, "c:insp", 20000, &lock, NULL) == REDLOCK_OK);
    insp = inspect(client, "c:insp");
    CHECK(redlock_inspection_held(insp));
    CHECK(redlock_inspection_holder(insp) != NULL &&
          strcmp(redlock_inspection_holder(insp), redlock_lock_token(lock)) == 0);
    /* On a quorum: the lock's token with a TTL no longer than the one set. */
    CHECK(nodes_with_token(insp, redlock_lock_token(lock), 20000) >= quorum);
    CHECK(!redlock_inspection_fence(insp, NULL));
    redlock_inspection_free(insp);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);

    lock = NULL;
    CHECK(redlock_client_try_lock_fenced(client, "c:insp-fenced", 20000, &lock, NULL) ==
          REDLOCK_OK);
    uint64_t issued = 0;
    CHECK(redlock_lock_fence(lock, &issued, NULL) == REDLOCK_OK);
    insp = inspect(client, "c:insp-fenced");
    CHECK(redlock_inspection_held(insp));
    CHECK(nodes_with_token(insp, redlock_lock_token(lock), 20000) >= quorum);
    CHECK(redlock_inspection_fence(insp, &fence) && fence >= issued);
    size_t fenced_nodes = 0;
    for (size_t i = 0; i < n_urls; i++) {
        uint64_t f = 0;
        if (redlock_inspection_node_fence(insp, i, &f) && f >= issued)
            fenced_nodes++;
    }
    CHECK(fenced_nodes >= quorum);
    redlock_inspection_free(insp);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_client_free(client);
}

static void test_inspect_reentrant_owners(void) {
    redlock_client *client = new_client();
    size_t quorum = n_urls / 2 + 1;
    redlock_lock *outer = NULL, *inner = NULL;
    CHECK(redlock_client_try_lock_reentrant(client, "c:insp-re", "alice", 20000, &outer, NULL) ==
          REDLOCK_OK);
    CHECK(redlock_client_try_lock_reentrant(client, "c:insp-re", "alice", 20000, &inner, NULL) ==
          REDLOCK_OK);
    redlock_inspection *insp = inspect(client, "c:insp-re");
    CHECK(redlock_inspection_held(insp));
    CHECK(redlock_inspection_holder(insp) != NULL &&
          strcmp(redlock_inspection_holder(insp), "alice") == 0);
    size_t twice = 0;
    for (size_t i = 0; i < n_urls; i++) {
        uint64_t holds = 0, ttl = 0;
        if (redlock_inspection_node_key_kind(insp, i) != REDLOCK_KEY_OWNERS)
            continue;
        CHECK(redlock_inspection_node_token(insp, i) == NULL);
        CHECK(strcmp(redlock_inspection_node_key_type(insp, i), "hash") == 0);
        CHECK(redlock_inspection_node_owner(insp, i, 1, &holds) == NULL);
        const char *owner = redlock_inspection_node_owner(insp, i, 0, &holds);
        if (redlock_inspection_node_owner_count(insp, i) == 1 && owner != NULL &&
            strcmp(owner, "alice") == 0 && holds == 2 &&
            redlock_inspection_node_ttl_ms(insp, i, &ttl) && ttl > 0 && ttl <= 20000)
            twice++;
    }
    CHECK(twice >= quorum);
    redlock_inspection_free(insp);
    CHECK(redlock_lock_release(inner, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(outer, NULL) == REDLOCK_OK);
    redlock_lock_free(inner);
    redlock_lock_free(outer);
    redlock_client_free(client);
}

static void test_force_release(void) {
    redlock_client *client = new_client();
    size_t quorum = n_urls / 2 + 1;
    redlock_lock *lock = NULL;
    CHECK(redlock_client_try_lock_fenced(client, "c:insp-force", 20000, &lock, NULL) ==
          REDLOCK_OK);
    uint64_t issued = 0;
    CHECK(redlock_lock_fence(lock, &issued, NULL) == REDLOCK_OK);

    /* Another token: the key is kept wherever it is set. */
    redlock_forced_release *r = force(client, "c:insp-force", "not-the-token");
    CHECK(strcmp(redlock_forced_release_resource(r), "c:insp-force") == 0);
    CHECK(strcmp(redlock_forced_release_token(r), "not-the-token") == 0);
    CHECK(redlock_forced_release_node_count(r) == n_urls);
    CHECK(redlock_forced_release_quorum(r) == quorum);
    CHECK(outcomes(r, REDLOCK_RELEASE_HELD_BY_OTHER) >= quorum);
    CHECK(!redlock_forced_release_on_quorum(r));
    CHECK(redlock_forced_release_confirmed(r) < quorum);
    redlock_forced_release_free(r);
    redlock_inspection *insp = inspect(client, "c:insp-force");
    CHECK(redlock_inspection_held(insp));
    CHECK(nodes_with_token(insp, redlock_lock_token(lock), 20000) >= quorum);
    redlock_inspection_free(insp);
    CHECK(redlock_lock_is_held(lock));

    /* The lock's own token: deleted on a quorum, fence counter kept. */
    r = force(client, "c:insp-force", redlock_lock_token(lock));
    CHECK(redlock_forced_release_on_quorum(r));
    CHECK(redlock_forced_release_confirmed(r) >= quorum);
    CHECK(outcomes(r, REDLOCK_RELEASE_DELETED) >= quorum);
    for (size_t i = 0; i < n_urls; i++) {
        const char *address = redlock_forced_release_node_address(r, i);
        CHECK(address != NULL && strstr(urls[i], address) != NULL);
        CHECK(redlock_forced_release_node_error(r, i) == NULL);
    }
    redlock_forced_release_free(r);
    insp = inspect(client, "c:insp-force");
    CHECK(!redlock_inspection_held(insp));
    CHECK(nodes_of_kind(insp, REDLOCK_KEY_ABSENT) >= quorum);
    uint64_t fence = 0;
    CHECK(redlock_inspection_fence(insp, &fence) && fence >= issued);
    redlock_inspection_free(insp);
    /* The holder finds out at its next extension. */
    redlock_error *err = NULL;
    check_error(redlock_lock_extend(lock, 20000, &err), REDLOCK_LOST, &err);
    redlock_lock_free(lock);

    /* No token: whatever holds it goes, a reentrant lock included. */
    lock = NULL;
    CHECK(redlock_client_try_lock_reentrant(client, "c:insp-force", "bob", 20000, &lock, NULL) ==
          REDLOCK_OK);
    r = force(client, "c:insp-force", NULL);
    CHECK(redlock_forced_release_token(r) == NULL);
    CHECK(redlock_forced_release_on_quorum(r));
    CHECK(outcomes(r, REDLOCK_RELEASE_DELETED) >= quorum);
    redlock_forced_release_free(r);
    redlock_lock *again = NULL;
    CHECK(redlock_client_try_lock(client, "c:insp-force", 20000, &again, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(again, NULL) == REDLOCK_OK);
    redlock_lock_free(again);
    redlock_lock_free(lock);

    /* Nothing there: absent on a quorum, which confirms it is free. */
    r = force(client, "c:insp-never", NULL);
    CHECK(outcomes(r, REDLOCK_RELEASE_ABSENT) >= quorum);
    CHECK(redlock_forced_release_on_quorum(r));
    redlock_forced_release_free(r);
    redlock_client_free(client);
}

static void test_inspect_bad_input(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    const char bad_utf8[] = {'\xc3', '\x28', 0};
    redlock_inspection *insp = NULL;
    check_error(redlock_client_inspect(NULL, "c:x", &insp, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_inspect(client, NULL, &insp, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_client_inspect(client, "", &insp, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_inspect(client, bad_utf8, &insp, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_client_inspect(client, "c:x", NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(insp == NULL);
    CHECK(redlock_client_inspect(client, "", &insp, NULL) == REDLOCK_INVALID_ARGUMENT);

    redlock_forced_release *r = NULL;
    check_error(redlock_client_force_release(NULL, "c:x", NULL, &r, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_force_release(client, NULL, NULL, &r, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_force_release(client, "", NULL, &r, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_force_release(client, "c:x", "", &r, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_force_release(client, "c:x", bad_utf8, &r, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_force_release(client, "c:x", "tok", NULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(r == NULL);

    /* Accessors take NULL and indexes out of range. */
    CHECK(redlock_inspection_resource(NULL) == NULL);
    CHECK(!redlock_inspection_held(NULL));
    CHECK(redlock_inspection_holder(NULL) == NULL);
    CHECK(!redlock_inspection_fence(NULL, NULL));
    CHECK(redlock_inspection_quorum(NULL) == 0);
    CHECK(redlock_inspection_node_count(NULL) == 0);
    CHECK(redlock_inspection_node_address(NULL, 0) == NULL);
    CHECK(redlock_inspection_node_key_kind(NULL, 0) == REDLOCK_KEY_UNKNOWN);
    CHECK(redlock_inspection_node_owner(NULL, 0, 0, NULL) == NULL);
    redlock_inspection_free(NULL);
    CHECK(redlock_forced_release_node_count(NULL) == 0);
    CHECK(!redlock_forced_release_on_quorum(NULL));
    CHECK(redlock_forced_release_node_outcome(NULL, 0) == REDLOCK_RELEASE_ERROR);
    redlock_forced_release_free(NULL);
    insp = inspect(client, "c:x");
    CHECK(redlock_inspection_node_address(insp, n_urls) == NULL);
    CHECK(redlock_inspection_node_error(insp, n_urls) == NULL);
    CHECK(redlock_inspection_node_key_kind(insp, n_urls) == REDLOCK_KEY_UNKNOWN);
    CHECK(redlock_inspection_node_key_type(insp, n_urls) == NULL);
    CHECK(!redlock_inspection_node_ttl_ms(insp, n_urls, NULL));
    CHECK(!redlock_inspection_node_fence(insp, n_urls, NULL));
    redlock_inspection_free(insp);
    r = force(client, "c:x", "tok");
    CHECK(redlock_forced_release_node_outcome(r, n_urls) == REDLOCK_RELEASE_ERROR);
    CHECK(redlock_forced_release_node_address(r, n_urls) == NULL);
    CHECK(redlock_forced_release_node_error(r, n_urls) == NULL);
    redlock_forced_release_free(r);
    redlock_client_free(client);
}

/* With a majority of the nodes killed: both calls still succeed, and the dead nodes' entries
 * carry their errors. */
static void test_inspect_with_dead_nodes(void) {
    redlock_options *opts = test_options();
    redlock_client *client = client_with(opts);
    size_t dead = n_urls / 2 + 1; /* the harness kills a majority */
    redlock_inspection *insp = inspect(client, "c:insp-dead");
    CHECK(redlock_inspection_node_count(insp) == n_urls);
    CHECK(!redlock_inspection_held(insp));
    size_t errors = 0;
    for (size_t i = 0; i < n_urls; i++) {
        const char *e = redlock_inspection_node_error(insp, i);
        if (e != NULL) {
            errors++;
            CHECK(strlen(e) > 0);
            CHECK(redlock_inspection_node_key_kind(insp, i) == REDLOCK_KEY_UNKNOWN);
            CHECK(redlock_inspection_node_key_type(insp, i) == NULL);
        } else {
            CHECK(redlock_inspection_node_key_kind(insp, i) == REDLOCK_KEY_ABSENT);
        }
    }
    CHECK(errors >= dead);
    redlock_inspection_free(insp);

    redlock_forced_release *r = force(client, "c:insp-dead", NULL);
    CHECK(!redlock_forced_release_on_quorum(r));
    CHECK(outcomes(r, REDLOCK_RELEASE_ERROR) >= dead);
    for (size_t i = 0; i < n_urls; i++) {
        const char *e = redlock_forced_release_node_error(r, i);
        CHECK((e != NULL) == (redlock_forced_release_node_outcome(r, i) == REDLOCK_RELEASE_ERROR));
    }
    redlock_forced_release_free(r);
    redlock_client_free(client);
}

/* ---- End of inspection and forced release ---- */
/* ---- Read-write locks and semaphores (issue 17): redlock_request_set_read/_write/_semaphore,
 * redlock_lock_permit. ---- */

/* A request for `resource` with a single attempt, made a read (kind 'r'), write ('w') or
 * semaphore of `permits` ('s') request; the caller frees it. */
static redlock_request *rw_request(const char *resource, char kind, uint32_t permits) {
    redlock_request *req = NULL;
    redlock_error *err = NULL;
    redlock_status st = redlock_request_new(resource, 10000, &req, &err);
    if (st == REDLOCK_OK) {
        st = redlock_request_set_retries(req, 0, &err);
    }
    if (st == REDLOCK_OK) {
        st = kind == 'r'   ? redlock_request_set_read(req, &err)
             : kind == 'w' ? redlock_request_set_write(req, &err)
                           : redlock_request_set_semaphore(req, permits, &err);
    }
    if (st != REDLOCK_OK) {
        fprintf(stderr, "rw_request: %s\n", redlock_error_message(err));
        exit(2);
    }
    return req;
}

struct acquirer {
    redlock_client *client;
    const redlock_request *request;
    redlock_status status;
};

/* Acquires on another thread (so the calling thread's own holds do not count) and releases. */
static void *acquire_elsewhere(void *arg) {
    struct acquirer *a = arg;
    redlock_lock *lock = NULL;
    a->status = redlock_client_acquire(a->client, a->request, &lock, NULL);
    if (a->status == REDLOCK_OK) {
        redlock_lock_release(lock, NULL);
        redlock_lock_free(lock);
    }
    return NULL;
}

static redlock_status acquire_on_a_thread(redlock_client *client, const redlock_request *req) {
    struct acquirer a = {client, req, REDLOCK_PANIC};
    pthread_t thread;
    pthread_create(&thread, NULL, acquire_elsewhere, &a);
    pthread_join(thread, NULL);
    return a.status;
}

static void test_read_write(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_request *read = rw_request("c:rw", 'r', 0);
    redlock_request *write = rw_request("c:rw", 'w', 0);

    /* Two readers at once. */
    redlock_lock *r1 = NULL, *r2 = NULL;
    CHECK(redlock_client_acquire(client, read, &r1, NULL) == REDLOCK_OK);
    CHECK(redlock_client_acquire(client, read, &r2, NULL) == REDLOCK_OK);
    CHECK(r1 != NULL && r2 != NULL && r1 != r2);
    CHECK(redlock_lock_is_held(r1) && redlock_lock_is_held(r2));
    /* A third reader on another thread gets in too. */
    CHECK(acquire_on_a_thread(client, read) == REDLOCK_OK);
    /* A writer elsewhere and a plain lock are refused while readers hold it. */
    CHECK(acquire_on_a_thread(client, write) == REDLOCK_NOT_ACQUIRED);
    redlock_lock *plain = NULL;
    check_error(redlock_client_try_lock(client, "c:rw", 10000, &plain, &err), REDLOCK_NOT_ACQUIRED,
                &err);
    CHECK(plain == NULL);
    /* This thread holds a read lock: asking for the write lock is an error, not a wait. */
    redlock_lock *w = NULL;
    check_error(redlock_client_acquire(client, write, &w, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(w == NULL);
    /* Releasing one reader leaves the other: the writer is still refused. */
    CHECK(redlock_lock_release(r1, NULL) == REDLOCK_OK);
    CHECK(acquire_on_a_thread(client, write) == REDLOCK_NOT_ACQUIRED);
    /* A reader extends only itself. */
    CHECK(redlock_lock_extend(r2, 20000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(r2, NULL) == REDLOCK_OK);
    redlock_lock_free(r1);
    redlock_lock_free(r2);

    /* The last reader gone, a writer gets in and excludes readers elsewhere. */
    CHECK(redlock_client_acquire(client, write, &w, NULL) == REDLOCK_OK);
    CHECK(acquire_on_a_thread(client, read) == REDLOCK_NOT_ACQUIRED);
    CHECK(acquire_on_a_thread(client, write) == REDLOCK_NOT_ACQUIRED);
    /* Holding the write lock, this thread's read request is an error. */
    redlock_lock *r3 = NULL;
    check_error(redlock_client_acquire(client, read, &r3, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(r3 == NULL);
    /* Read and write locks have no permit and no fencing token; out untouched. */
    uint32_t permit = 77;
    check_error(redlock_lock_permit(w, &permit, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(permit == 77);
    CHECK(redlock_lock_release(w, NULL) == REDLOCK_OK);
    redlock_lock_free(w);

    /* A plain holder excludes readers. */
    CHECK(redlock_client_try_lock(client, "c:rw", 10000, &plain, NULL) == REDLOCK_OK);
    CHECK(acquire_on_a_thread(client, read) == REDLOCK_NOT_ACQUIRED);
    CHECK(redlock_lock_release(plain, NULL) == REDLOCK_OK);
    redlock_lock_free(plain);
    CHECK(acquire_on_a_thread(client, read) == REDLOCK_OK);

    redlock_request_free(read);
    redlock_request_free(write);
    redlock_client_free(client);
}

static void test_semaphore(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_request *sem = rw_request("c:sem", 's', 2);
    redlock_lock *a = NULL, *b = NULL, *c = NULL;
    CHECK(redlock_client_acquire(client, sem, &a, NULL) == REDLOCK_OK);
    CHECK(redlock_client_acquire(client, sem, &b, NULL) == REDLOCK_OK);
    uint32_t pa = 77, pb = 77;
    CHECK(redlock_lock_permit(a, &pa, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_permit(b, &pb, NULL) == REDLOCK_OK);
    CHECK(pa < 2 && pb < 2 && pa != pb);
    /* The third is refused. */
    check_error(redlock_client_acquire(client, sem, &c, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(c == NULL);
    /* Another number of permits for the same semaphore is an error while permits are held. */
    redlock_request *three = rw_request("c:sem", 's', 3);
    check_error(redlock_client_acquire(client, three, &c, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(c == NULL);
    redlock_request_free(three);
    /* Releasing one lets the next in, on the freed slot. */
    CHECK(redlock_lock_release(a, NULL) == REDLOCK_OK);
    CHECK(redlock_client_acquire(client, sem, &c, NULL) == REDLOCK_OK);
    uint32_t pc = 77;
    CHECK(redlock_lock_permit(c, &pc, NULL) == REDLOCK_OK && pc == pa);
    /* The permit stays readable after release; extension works on a slot. */
    uint32_t again = 77;
    CHECK(redlock_lock_permit(a, &again, NULL) == REDLOCK_OK && again == pa);
    CHECK(redlock_lock_extend(b, 20000, NULL) == REDLOCK_OK);
    /* Bad arguments to redlock_lock_permit; out untouched. */
    uint32_t untouched = 77;
    check_error(redlock_lock_permit(NULL, &untouched, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_lock_permit(c, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(untouched == 77);
    redlock_lock_free(a);
    redlock_lock_free(b);
    redlock_lock_free(c);
    redlock_request_free(sem);
    redlock_client_free(client);
}

static void test_read_write_semaphore_bad_arguments(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_request *req = NULL;
    CHECK(redlock_request_new("c:rw-bad", 10000, &req, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_retries(req, 0, NULL) == REDLOCK_OK);
    check_error(redlock_request_set_semaphore(req, 0, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_semaphore(req, 1025, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_semaphore(req, UINT32_MAX, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    /* The request was left unchanged: still a plain lock, so no permit. */
    redlock_lock *lock = NULL;
    CHECK(redlock_client_acquire(client, req, &lock, NULL) == REDLOCK_OK);
    uint32_t permit = 77;
    check_error(redlock_lock_permit(lock, &permit, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(permit == 77);
    redlock_lock_free(lock);
    /* The limits themselves are fine. */
    CHECK(redlock_request_set_semaphore(req, 1, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_semaphore(req, 1024, NULL) == REDLOCK_OK);
    redlock_request_free(req);

    /* Several resources: no read, write or semaphore. */
    const char *names[] = {"c:rw-a", "c:rw-b"};
    redlock_request *many = NULL;
    CHECK(redlock_request_new_many(names, 2, 10000, &many, NULL) == REDLOCK_OK);
    check_error(redlock_request_set_read(many, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_write(many, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_semaphore(many, 2, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(many);

    check_error(redlock_request_set_read(NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_write(NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_semaphore(NULL, 2, &err), REDLOCK_INVALID_ARGUMENT, &err);
    /* NULL err is fine. */
    CHECK(redlock_request_set_read(NULL, NULL) == REDLOCK_INVALID_ARGUMENT);
    redlock_client_free(client);
}

/* ---- end of read-write locks and semaphores ---- */

static void test_guard_settings(void) {
    redlock_options *opts = NULL;
    redlock_error *err = NULL;
    CHECK(redlock_options_new(&opts, NULL) == REDLOCK_OK);
    /* Defaults, and for NULL. */
    CHECK(redlock_options_clock_guard(opts) && redlock_options_clock_guard(NULL));
    CHECK(redlock_options_clock_jump_threshold_ms(opts) == 50);
    CHECK(redlock_options_clock_quarantine_ms(opts) == 60000);
    CHECK(!redlock_options_strict_servers(opts) && !redlock_options_strict_servers(NULL));

    CHECK(redlock_options_set_clock_jump_threshold_ms(opts, 250, &err) == REDLOCK_OK);
    CHECK(redlock_options_set_clock_quarantine_ms(opts, 120000, &err) == REDLOCK_OK);
    CHECK(redlock_options_set_strict_servers(opts, true, &err) == REDLOCK_OK);
    CHECK(err == NULL);
    CHECK(redlock_options_clock_jump_threshold_ms(opts) == 250);
    CHECK(redlock_options_clock_quarantine_ms(opts) == 120000);
    CHECK(redlock_options_strict_servers(opts));
    /* Off, then on again: the default threshold, as with the Rust builder; a threshold
     * turns the guard on. */
    CHECK(redlock_options_set_clock_guard(opts, false, NULL) == REDLOCK_OK);
    CHECK(!redlock_options_clock_guard(opts));
    CHECK(redlock_options_set_clock_guard(opts, true, NULL) == REDLOCK_OK);
    CHECK(redlock_options_clock_guard(opts));
    CHECK(redlock_options_clock_jump_threshold_ms(opts) == 50);
    CHECK(redlock_options_set_clock_guard(opts, false, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_clock_jump_threshold_ms(opts, 250, NULL) == REDLOCK_OK);
    CHECK(redlock_options_clock_guard(opts));
    CHECK(redlock_options_clock_jump_threshold_ms(opts) == 250);

    /* Bad input: refused with a message naming the setting, the old value kept. */
    check_error(redlock_options_set_clock_quarantine_ms(opts, 0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    CHECK(redlock_options_set_clock_quarantine_ms(opts, 0, &err) == REDLOCK_INVALID_ARGUMENT);
    CHECK(err != NULL && strstr(redlock_error_message(err), "clock_quarantine_ms") != NULL);
    redlock_error_free(err);
    err = NULL;
    uint64_t eleven_years = 11ULL * 365 * 24 * 3600 * 1000;
    check_error(redlock_options_set_clock_quarantine_ms(opts, eleven_years, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_clock_jump_threshold_ms(opts, eleven_years, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_clock_jump_threshold_ms(opts, UINT64_MAX, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(redlock_options_clock_quarantine_ms(opts) == 120000);
    CHECK(redlock_options_clock_jump_threshold_ms(opts) == 250);
    check_error(redlock_options_set_clock_guard(NULL, true, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_clock_jump_threshold_ms(NULL, 10, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_options_set_clock_quarantine_ms(NULL, 10, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_options_set_strict_servers(NULL, true, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    /* NULL err is allowed. */
    CHECK(redlock_options_set_clock_quarantine_ms(opts, 0, NULL) == REDLOCK_INVALID_ARGUMENT);
    redlock_options_free(opts);
}

static void test_guard_node_status(void) {
    /* The test nodes are standalone masters without replicas or maxmemory. */
    redlock_options *opts = test_options();
    CHECK(redlock_options_set_strict_servers(opts, true, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_clock_quarantine_ms(opts, 30000, NULL) == REDLOCK_OK);
    redlock_client *client = client_with(opts);
    /* An acquire samples every node's TIME. */
    redlock_lock *lock = NULL;
    CHECK(redlock_client_lock(client, "c:guard-status", 10000, &lock, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    size_t sampled = 0;
    for (size_t i = 0; i < n_urls; i++) {
        redlock_node_status *status = NULL;
        CHECK(redlock_client_node_status(client, i, &status, NULL) == REDLOCK_OK);
        const char *version = redlock_node_status_server_version(status);
        CHECK(version != NULL && version[0] >= '1' && version[0] <= '9');
        const char *persistence = redlock_node_status_persistence(status);
        CHECK(persistence != NULL && strstr(persistence, "AOF") != NULL);
        CHECK(redlock_node_status_warning_count(status) == 0);
        CHECK(redlock_node_status_warning(status, 0) == NULL);
        CHECK(redlock_node_status_quarantine_remaining_ms(status) == 0);
        CHECK(redlock_node_status_quarantine_reason(status) == NULL);
        int64_t offset = INT64_MIN;
        if (redlock_node_status_clock_offset_ms(status, &offset)) {
            /* Same host: the node's clock is ours, within a generous bound. */
            CHECK(offset > -5000 && offset < 5000);
            sampled++;
        } else {
            CHECK(offset == INT64_MIN);
        }
        CHECK(!redlock_node_status_clock_offset_ms(status, NULL));
        redlock_node_status_free(status);
    }
    /* Calls return on a quorum: at least that many nodes have answered TIME. */
    CHECK(sampled >= n_urls / 2 + 1);
    /* NULL status. */
    CHECK(redlock_node_status_server_version(NULL) == NULL);
    CHECK(redlock_node_status_persistence(NULL) == NULL);
    CHECK(redlock_node_status_warning_count(NULL) == 0);
    CHECK(redlock_node_status_warning(NULL, 0) == NULL);
    int64_t untouched = 7;
    CHECK(!redlock_node_status_clock_offset_ms(NULL, &untouched) && untouched == 7);
    CHECK(redlock_node_status_quarantine_remaining_ms(NULL) == 0);
    CHECK(redlock_node_status_quarantine_reason(NULL) == NULL);
    redlock_client_free(client);
}

/* ---- end of the clock guard block ---- */

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s all|no-quorum URL...\n", argv[0]);
        return 2;
    }
    urls = (const char *const *)&argv[2];
    n_urls = (size_t)(argc - 2);
    if (strcmp(argv[1], "no-quorum") == 0) {
        test_no_quorum();
        test_inspect_with_dead_nodes();
    } else {
        test_round_trip();
        test_not_acquired();
        test_lock_outlives_client();
        test_threads_exclude_each_other();
        test_invalid_arguments();
        test_options_setters();
        test_restart_grace_and_node_status();
        test_fenced();
        test_reentrant();
        test_many();
        test_auto_extend_outlives_ttl();
        test_lost_callback_when_keys_vanish();
        test_max_hold_ends_in_lost();
        test_waiters_get_the_lock_after_release();
        test_lock_with_bad_arguments();
        test_inspect_plain_fenced_and_free();
        test_inspect_reentrant_owners();
        test_force_release();
        test_inspect_bad_input();
        test_read_write();
        test_semaphore();
        test_read_write_semaphore_bad_arguments();
        test_guard_settings();
        test_guard_node_status();
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
