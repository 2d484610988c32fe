/*
 * The C ABI end to end, against real redis-server nodes started by ffi/tests/c_abi.rs.
 *
 *   test_redlock all       URL...   every case that needs a healthy cluster
 *   test_redlock no-quorum URL...   run after the harness killed a majority of the nodes
 *
 * Prints "N passed, M failed" and exits non-zero on any failure.
 */
#include "harness.h"

/* A client that retries patiently (100 times, 5 ± 5 ms apart). */
static redlock_client *new_client(void) {
    redlock_options *opts = test_options();
    CHECK(redlock_options_set_retry_count(opts, 100, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_retry_delay_ms(opts, 5, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_retry_jitter_ms(opts, 5, NULL) == REDLOCK_OK);
    return client_with(opts);
}

/* Acquires `req` with no cancel handle, for the calling thread. */
static redlock_status acquire(const redlock_request *req, const redlock_client *client,
                              redlock_lock **out, redlock_error **err) {
    return redlock_request_acquire(req, client, NULL, NULL, out, err);
}

/* Acquires `req` as `acquire` does, then frees it: a request used once. */
static redlock_status acquire_and_free(redlock_request *req, const redlock_client *client,
                                       redlock_lock **out, redlock_error **err) {
    redlock_status st = acquire(req, client, out, err);
    redlock_request_free(req);
    return st;
}

enum patience { RETRY, ONCE };

/* `req` with a single attempt for ONCE, the client's retries for RETRY. */
static redlock_request *with_patience(redlock_request *req, enum patience patience) {
    if (patience == ONCE && redlock_request_set_retries(req, 0, NULL) != REDLOCK_OK) {
        fprintf(stderr, "redlock_request_set_retries failed\n");
        exit(2);
    }
    return req;
}

/* A request for a fenced lock; the caller frees it. */
static redlock_request *fenced(const char *resource, uint64_t ttl_ms, enum patience patience) {
    redlock_request *req = request_one(resource, ttl_ms);
    if (redlock_request_set_fenced(req, NULL) != REDLOCK_OK) {
        fprintf(stderr, "redlock_request_set_fenced(%s) failed\n", resource);
        exit(2);
    }
    return with_patience(req, patience);
}

/* A request for one hold of a reentrant lock of `owner`; the caller frees it. */
static redlock_request *reentrant(const char *resource, const char *owner, uint64_t ttl_ms,
                                  enum patience patience) {
    redlock_request *req = request_one(resource, ttl_ms);
    if (redlock_request_set_reentrant(req, owner, NULL) != REDLOCK_OK) {
        fprintf(stderr, "redlock_request_set_reentrant(%s, %s) failed\n", resource, owner);
        exit(2);
    }
    return with_patience(req, patience);
}

/* A request for all of `resources` at once; the caller frees it. */
static redlock_request *many(const char *const *resources, size_t n, uint64_t ttl_ms,
                             enum patience patience) {
    redlock_request *req = NULL;
    if (redlock_request_new_many(resources, n, ttl_ms, &req, NULL) != REDLOCK_OK) {
        fprintf(stderr, "redlock_request_new_many failed\n");
        exit(2);
    }
    return with_patience(req, patience);
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

/* The texts of the common errors, as a C user reads them: the library's words, the same in
 * every language (tests/error_texts.rs checks them in Rust). */
static void expect_text(redlock_status st, redlock_status want, redlock_error **err,
                        const char *part) {
    CHECK(st == want);
    CHECK(*err != NULL);
    const char *text = redlock_error_message(*err);
    if (strstr(text, part) == NULL) {
        fprintf(stderr, "expected \"%s\" in: %s\n", part, text);
        CHECK(0);
    }
    redlock_error_free(*err);
    *err = NULL;
}

static void test_error_texts(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_lock *lock = NULL, *held = NULL;
    expect_text(redlock_client_try_lock(client, "c:texts", 0, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err,
                "ttl must be at least 3 ms (with drift_factor 0.01) and at most 10 years, got 0 ms");
    const char *bad[] = {"redis://host:notaport"};
    redlock_client *none = NULL;
    expect_text(redlock_client_new(bad, 1, NULL, &none, &err), REDLOCK_INVALID_ARGUMENT, &err,
                "not a usable Redis URL: invalid port number");
    CHECK(none == NULL);
    CHECK(redlock_client_try_lock(client, "c:texts", 10000, &held, NULL) == REDLOCK_OK);
    expect_text(redlock_client_try_lock(client, "c:texts", 10000, &lock, &err),
                REDLOCK_NOT_ACQUIRED, &err,
                "not acquired after 1 attempt(s), held by another owner; the last attempt: 0 "
                "granted, ");
    CHECK(redlock_client_try_lock(client, "c:texts", 10000, &lock, &err) == REDLOCK_NOT_ACQUIRED);
    CHECK(strstr(redlock_error_message(err), "refused: ") != NULL);
    redlock_error_free(err);
    err = NULL;
    CHECK(redlock_lock_release(held, NULL) == REDLOCK_OK);
    redlock_lock_free(held);
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

/* Whether `text` shows either secret of the URLs of test_no_secret_shows. */
static int shows_secret(const char *text) {
    return text != NULL && (strstr(text, "L3FT") != NULL || strstr(text, "R1GHT") != NULL);
}

/* No password shows, whatever characters it holds: node URLs with each character that ends a
 * part of a URL or changes its meaning, and a space, in the user, the password and
 * sentinel_password. The error of a refused URL, and the node address of an accepted one,
 * never show the secrets L3FT and R1GHT. The text before a character in the user names this
 * machine, should a URL parse with it as the host. */
static void test_no_secret_shows(void) {
    const char reserved[] = "#/?&@:%+ ";
    const char *schemes[][2] = {{"redis", ""}, {"redis+sentinel", "/m"}, {"redis+cluster", ""}};
    int refused = 0;
    for (const char *c = reserved; *c; c++) {
        char forms[8][200];
        size_t n = 0;
        for (size_t k = 0; k < 3; k++) {
            snprintf(forms[n++], sizeof forms[0], "%s://localhost%cx:L3FT-R1GHT@127.0.0.1:1%s",
                     schemes[k][0], *c, schemes[k][1]);
            snprintf(forms[n++], sizeof forms[0], "%s://u:L3FT%cR1GHT@127.0.0.1:1%s",
                     schemes[k][0], *c, schemes[k][1]);
        }
        snprintf(forms[n++], sizeof forms[0],
                 "redis+sentinel://127.0.0.1:1/m?sentinel_user=u&sentinel_password=L3FT%cR1GHT",
                 *c);
        snprintf(forms[n++], sizeof forms[0],
                 "redis+sentinel://127.0.0.1:1/m?sentinel_password=L3FT%cR1GHT"
                 "&sentinel=127.0.0.1:2",
                 *c);
        for (size_t i = 0; i < n; i++) {
            const char *url[] = {forms[i]};
            redlock_client *client = NULL;
            redlock_error *err = NULL;
            if (redlock_client_new(url, 1, NULL, &client, &err) != REDLOCK_OK) {
                refused++;
                CHECK(!shows_secret(redlock_error_message(err)));
                if (shows_secret(redlock_error_message(err)))
                    fprintf(stderr, "  %s: %s\n", forms[i], redlock_error_message(err));
                redlock_error_free(err);
                continue;
            }
            redlock_node_status *status = NULL;
            CHECK(redlock_client_node_status(client, 0, &status, NULL) == REDLOCK_OK);
            CHECK(!shows_secret(redlock_node_status_address(status)));
            redlock_node_status_free(status);
            redlock_client_free(client);
        }
    }
    CHECK(refused > 20);
    /* Bytes that are not UTF-8 around the secret. */
    const char *not_utf8[] = {"redis://u:L3FT\xff\xfeR1GHT@127.0.0.1:1"};
    redlock_client *client = NULL;
    redlock_error *err = NULL;
    CHECK(redlock_client_new(not_utf8, 1, NULL, &client, &err) == REDLOCK_INVALID_ARGUMENT);
    CHECK(!shows_secret(redlock_error_message(err)));
    redlock_error_free(err);
}

/* Resource names are capped at 4096 bytes, and node URLs too: the error says the limit and
 * the length, and quotes neither. */
static void test_size_caps(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    char *name = malloc(4098);
    REQUIRE(name != NULL);
    memset(name, 'r', 4096);
    name[4096] = 0;
    redlock_request *req = NULL;
    CHECK(redlock_request_new(name, 1000, &req, NULL) == REDLOCK_OK);
    redlock_request_free(req);
    name[4096] = 'r';
    name[4097] = 0;
    req = NULL;
    CHECK(redlock_request_new(name, 1000, &req, &err) == REDLOCK_INVALID_ARGUMENT);
    CHECK(err != NULL && strstr(redlock_error_message(err), "4097 bytes") != NULL &&
          strstr(redlock_error_message(err), "4096") != NULL &&
          strstr(redlock_error_message(err), "rrrr") == NULL);
    redlock_error_free(err);
    err = NULL;
    redlock_lock *lock = NULL;
    check_error(redlock_client_try_lock(client, name, 1000, &lock, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    redlock_inspection *insp = NULL;
    check_error(redlock_client_inspect(client, name, &insp, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_forced_release *r = NULL;
    check_error(redlock_client_force_release(client, name, NULL, &r, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    const char *many[] = {"c:short", name};
    check_error(redlock_request_new_many(many, 2, 1000, &req, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    free(name);
    redlock_client_free(client);

    size_t len = (size_t)1 << 20;
    char *url = malloc(len + 1);
    REQUIRE(url != NULL);
    memset(url, 'h', len);
    memcpy(url, "redis://", 8);
    memcpy(url + len - 2, ":1", 2);
    url[len] = 0;
    const char *huge[] = {url};
    redlock_client *c2 = NULL;
    CHECK(redlock_client_new(huge, 1, NULL, &c2, &err) == REDLOCK_INVALID_ARGUMENT);
    CHECK(err != NULL && strstr(redlock_error_message(err), "1048576 bytes") != NULL &&
          strstr(redlock_error_message(err), "4096") != NULL &&
          strlen(redlock_error_message(err)) < 300);
    redlock_error_free(err);
    free(url);
}

/* The options builders: defaults, every setter with good and bad input, and a failed setter
 * changes nothing. */
static void test_options_setters(void) {
    redlock_error *err = NULL;
    /* NULL options read as the defaults, like NULL options in redlock_client_new: 50 retries
     * 200 ± 100 ms apart, the README's "about 10 s". */
    CHECK(redlock_options_retry_count(NULL) == 50);
    CHECK(redlock_options_retry_delay_ms(NULL) == 200);
    CHECK(redlock_options_retry_jitter_ms(NULL) == 100);
    CHECK(redlock_options_drift_factor(NULL) == 0.01);
    CHECK(redlock_options_node_timeout_ms(NULL) == 50);
    CHECK(redlock_options_max_extensions(NULL) == 0);
    CHECK(redlock_options_restart_grace_ms(NULL) == 0);
    check_error(redlock_options_new(NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);

    redlock_options *o = NULL;
    CHECK(redlock_options_new(&o, &err) == REDLOCK_OK && err == NULL && o != NULL);
    CHECK(redlock_options_retry_count(o) == 50);
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

    /* The per-acquisition settings live on a request: auto-extension, waiting,
     * notifications, each checked by its setter. */
    redlock_request *req = request_one("c:lock-options", 5 * node_timeout_ms());
    CHECK(redlock_request_set_auto_extend(req, 0.5, 0, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_wait(req, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_notifications(req, false, NULL) == REDLOCK_OK);
    /* 0 asks for the default fraction (1/3), and a wait beyond 10 years is 10 years: neither
     * is an error, and both are replaced by the next good call below. */
    CHECK(redlock_request_set_auto_extend(req, 0.0, 0, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_wait(req, UINT64_MAX, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_auto_extend(req, 0.5, 0, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_wait(req, 0, NULL) == REDLOCK_OK);
    check_error(redlock_request_set_auto_extend(req, 1.0, 0, 0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_set_auto_extend(req, -0.5, 0, 0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_set_auto_extend(req, 0.0 / 0.0, 0, 0, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_auto_extend(req, 0.5, UINT64_MAX, 0, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_auto_extend(NULL, 0.5, 0, 0, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_set_wait(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_notifications(NULL, true, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    /* The request still works after the failed setters: auto-extended at half the TTL, one
     * attempt (a wait of 0). */
    client = new_client();
    uint64_t ttl = 5 * node_timeout_ms();
    CHECK(acquire(req, client, &lock, NULL) == REDLOCK_OK);
    redlock_lock *other = NULL;
    check_error(acquire(req, client, &other, &err), REDLOCK_NOT_ACQUIRED, &err);
    sleep_ms((long)(ttl + ttl / 2));
    CHECK(redlock_lock_is_held(lock)); /* extended past its first TTL */
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    redlock_lock_free(lock);
    redlock_request_free(req);
    redlock_request_free(NULL);
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
        CHECK(redlock_node_status_master(status) == NULL); /* a standalone node */
        CHECK(redlock_node_status_failovers(status) == 0);
        CHECK(redlock_node_status_errors(status) == 0);
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
    CHECK(redlock_node_status_master(NULL) == NULL);
    CHECK(redlock_node_status_failovers(NULL) == 0);
    CHECK(redlock_node_status_errors(NULL) == 0);
    CHECK(redlock_node_status_uptime_ms(NULL) == UINT64_MAX);
    CHECK(redlock_node_status_grace_remaining_ms(NULL) == 0);
    CHECK(redlock_node_status_run_id(NULL) == NULL);
    CHECK(redlock_node_status_last_error(NULL) == NULL);
    redlock_node_status_free(NULL);
    redlock_client_free(guarded);
}

/* Fenced locks: tokens grow from holder to holder and are about the acquisition's time in µs
 * since the epoch; other kinds of lock have none. One request serves every acquisition. */
static void test_fenced(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_request *req = fenced("c:fenced", 10000, RETRY);
    uint64_t previous = 0;
    for (int i = 0; i < 3; i++) {
        redlock_lock *lock = NULL;
        uint64_t before = wall_us();
        CHECK(acquire(req, client, &lock, &err) == REDLOCK_OK);
        uint64_t after = wall_us();
        uint64_t fence = 0;
        CHECK(redlock_lock_fence(lock, &fence, NULL) == REDLOCK_OK);
        CHECK(fence > previous);
        /* The nodes run on this host's clock: the token is the time of the acquisition (a
         * second either way for a loaded machine), not a small count. */
        CHECK(fence + 1000000 >= before && fence <= after + 1000000);
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
    redlock_request_free(req);
    redlock_lock *lock = NULL;
    CHECK(acquire_and_free(fenced("c:fenced", 10000, ONCE), client, &lock, NULL) == REDLOCK_OK);
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

    /* Bad input: the resource is checked by redlock_request_new, the TTL, the client and the
     * out-parameter by redlock_request_acquire. */
    lock = NULL;
    redlock_request *none = (redlock_request *)&err;
    redlock_request *const sentinel = none;
    check_error(redlock_request_new(NULL, 10000, &none, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new("", 10000, &none, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(none == sentinel);
    req = fenced("c:fenced", 10000, RETRY);
    check_error(acquire(req, NULL, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(acquire(req, client, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(req);
    check_error(acquire_and_free(fenced("c:fenced", 0, RETRY), client, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(lock == NULL);
    redlock_client_free(client);
}

/* Reentrant locks: nested holds of one owner, another owner waits for the last release. */
static void test_reentrant(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_lock *outer = NULL, *inner = NULL, *other = NULL;
    redlock_request *alice = reentrant("c:re", "alice", 10000, RETRY);
    redlock_request *bob = reentrant("c:re", "bob", 10000, ONCE);
    CHECK(acquire(alice, client, &outer, &err) == REDLOCK_OK);
    CHECK(acquire_and_free(reentrant("c:re", "alice", 10000, ONCE), client, &inner, &err) ==
          REDLOCK_OK);
    uint64_t holds = 0;
    CHECK(redlock_lock_hold_count(outer, &holds, NULL) == REDLOCK_OK && holds == 1);
    CHECK(redlock_lock_hold_count(inner, &holds, NULL) == REDLOCK_OK && holds == 2);
    CHECK(strcmp(redlock_lock_token(inner), "alice") == 0);
    check_error(acquire(bob, client, &other, &err), REDLOCK_NOT_ACQUIRED, &err);
    check_error(redlock_client_try_lock(client, "c:re", 10000, &other, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    CHECK(redlock_lock_extend(inner, 20000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(inner, NULL) == REDLOCK_OK);
    check_error(acquire(bob, client, &other, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(other == NULL);
    CHECK(redlock_lock_release(outer, NULL) == REDLOCK_OK);
    CHECK(acquire(bob, client, &other, NULL) == REDLOCK_OK);
    /* Freeing an unreleased hold releases it. */
    redlock_lock_free(other);
    redlock_lock_free(inner);
    redlock_lock_free(outer);
    redlock_request_free(alice);
    redlock_request_free(bob);

    /* Bad owners are refused by the setter, which leaves the request a plain one. */
    redlock_lock *lock = NULL;
    const char bad_utf8[] = {'\xc3', '\x28', 0};
    redlock_request *req = request_one("c:re2", 10000);
    check_error(redlock_request_set_reentrant(req, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_reentrant(req, "", &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_set_reentrant(req, bad_utf8, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    CHECK(acquire(req, client, &lock, NULL) == REDLOCK_OK);
    check_error(redlock_lock_hold_count(lock, &holds, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_lock_free(lock);
    lock = NULL;
    redlock_request_free(req);
    req = reentrant("c:re2", "alice", 10000, ONCE);
    check_error(acquire(req, client, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(req);
    CHECK(lock == NULL);
    redlock_client_free(client);
}

/* Multi-resource locks: all or nothing, released together. */
static void test_many(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    const char *const set[] = {"c:m-b", "c:m-a"};
    const char *const overlapping[] = {"c:m-b", "c:m-c"};
    redlock_lock *lock = NULL, *other = NULL;
    redlock_request *overlapping_once = many(overlapping, 2, 10000, ONCE);
    CHECK(acquire_and_free(many(set, 2, 10000, RETRY), client, &lock, &err) == REDLOCK_OK);
    CHECK(strcmp(redlock_lock_resource(lock), "c:m-a,c:m-b") == 0);
    check_error(redlock_client_try_lock(client, "c:m-b", 10000, &other, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    check_error(acquire(overlapping_once, client, &other, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(redlock_lock_extend(lock, 20000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(lock, NULL) == REDLOCK_OK);
    CHECK(acquire(overlapping_once, client, &other, NULL) == REDLOCK_OK);
    redlock_lock_free(other);
    redlock_lock_free(lock);
    redlock_request_free(overlapping_once);

    /* Bad sets are refused by redlock_request_new_many (out untouched); the TTL, the client
     * and the out-parameter by redlock_request_acquire. */
    lock = NULL;
    redlock_request *none = (redlock_request *)&err;
    redlock_request *const sentinel = none;
    const char *const twice[] = {"c:x", "c:x"};
    const char *const with_null[] = {"c:x", NULL};
    const char *const with_empty[] = {"c:x", ""};
    const char *too_many[65];
    for (int i = 0; i < 65; i++)
        too_many[i] = "c:same";
    check_error(redlock_request_new_many(set, 0, 10000, &none, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_new_many(NULL, 2, 10000, &none, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_new_many(twice, 2, 10000, &none, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_request_new_many(with_null, 2, 10000, &none, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new_many(with_empty, 2, 10000, &none, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new_many(too_many, 65, 10000, &none, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(none == sentinel);
    check_error(acquire_and_free(many(set, 2, 0, RETRY), client, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request *req = many(set, 2, 10000, RETRY);
    check_error(acquire(req, NULL, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(acquire(req, client, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(req);
    CHECK(lock == NULL);
    redlock_client_free(client);
}

/* ---- auto-extension, the lost signal, waiting ---- */

/* A TTL that leaves room for an extension every third of it plus node_timeout. */
static uint64_t auto_ttl_ms(void) { return 3 * node_timeout_ms() + 150; }

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

/* A request auto-extended with the defaults (every third of the TTL) and the client's
 * retries; the caller frees it. */
static redlock_request *auto_extended(const char *resource, uint64_t ttl_ms) {
    redlock_request *req = request_one(resource, ttl_ms);
    if (redlock_request_set_auto_extend(req, 0.0, 0, 0, NULL) != REDLOCK_OK) {
        fprintf(stderr, "redlock_request_set_auto_extend(%s) failed\n", resource);
        exit(2);
    }
    return req;
}

static void test_auto_extend_outlives_ttl(void) {
    redlock_client *client = new_client();
    redlock_client *other = new_client();
    /* Room for an extension (every third of the TTL) to fail on a stalled majority and be
     * retried a node timeout later: with 3 node timeouts, one stall of a second under load (the
     * valgrind run beside this one) lost the lock. */
    uint64_t ttl = 5 * node_timeout_ms();
    redlock_lock *lock = NULL;
    CHECK(acquire_and_free(auto_extended("c:auto", ttl), client, &lock, NULL) == REDLOCK_OK);
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
    CHECK(acquire_and_free(auto_extended("c:vanish", ttl), client, &f.lock, NULL) == REDLOCK_OK);
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
    redlock_request *req = request_one("c:max-hold", ttl);
    CHECK(redlock_request_set_auto_extend(req, 0.0, ttl, 0, NULL) == REDLOCK_OK);
    struct lost_flag f = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1, "", NULL};
    CHECK(acquire(req, client, &f.lock, NULL) == REDLOCK_OK);
    redlock_request_free(req); /* the lock keeps what it needs */
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

/* One waiting request, acquired by three threads at once: each gets the lock in turn. */
static void test_waiters_get_the_lock_after_release(void) {
    redlock_options *o = test_options();
    /* The fallback would be slow: notifications wake the waiters. */
    CHECK(redlock_options_set_retry_delay_ms(o, 1000, NULL) == REDLOCK_OK);
    redlock_client *client = client_with(o);
    redlock_lock *holder = NULL;
    CHECK(redlock_client_lock(client, "c:wait", 10000, &holder, NULL) == REDLOCK_OK);
    redlock_request *req = request_one("c:wait", 10000);
    CHECK(redlock_request_set_wait(req, 60000, NULL) == REDLOCK_OK);
    pthread_t threads[3];
    struct acquisition waiters[3];
    for (int i = 0; i < 3; i++) {
        waiters[i] = acquisition(req, client, NULL, NULL);
        waiters[i].release = 1;
        CHECK(pthread_create(&threads[i], NULL, acquire_in_thread, &waiters[i]) == 0);
    }
    sleep_ms(200);
    CHECK(redlock_lock_release(holder, NULL) == REDLOCK_OK);
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        CHECK(waiters[i].status == REDLOCK_OK);
        acquisition_free(&waiters[i]);
    }
    redlock_lock_free(holder);
    redlock_request_free(req);
    /* Giving up at the deadline. */
    CHECK(redlock_client_lock(client, "c:wait", 10000, &holder, NULL) == REDLOCK_OK);
    redlock_lock *late = NULL;
    redlock_error *err = NULL;
    req = request_one("c:wait", 10000);
    CHECK(redlock_request_set_wait(req, 100, NULL) == REDLOCK_OK);
    check_error(acquire(req, client, &late, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(late == NULL);
    redlock_request_free(req);
    redlock_lock_free(holder);
    redlock_client_free(client);
}

static void test_auto_extend_and_wait_bad_arguments(void) {
    redlock_client *client = new_client();
    redlock_lock *lock = (redlock_lock *)&client;
    redlock_lock *const sentinel = lock;
    redlock_error *err = NULL;
    /* A TTL too short to auto-extend: it must exceed fraction x ttl + node_timeout. */
    redlock_request *req = request_one("c:bad", 3);
    CHECK(redlock_request_set_auto_extend(req, 0.5, 0, 0, NULL) == REDLOCK_OK);
    check_error(acquire(req, client, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(req);
    check_error(acquire_and_free(auto_extended("c:bad", 3), client, &lock, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    req = auto_extended("c:bad", 10000);
    check_error(acquire(req, NULL, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(req);
    redlock_request *none = (redlock_request *)&client;
    check_error(redlock_request_new(NULL, 10000, &none, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_request_new("\xc3\x28", 10000, &none, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    CHECK(none == (redlock_request *)&client);
    req = request_one("c:bad", 10000);
    CHECK(redlock_request_set_wait(req, 10, NULL) == REDLOCK_OK);
    check_error(acquire(req, client, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(acquire(NULL, client, &lock, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request_free(req);
    CHECK(lock == sentinel);
    check_error(redlock_lock_on_lost(NULL, on_lost, NULL, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_lock *held = NULL;
    /* A request with no setter called: a plain lock with the client's retries, like
     * redlock_client_lock. */
    CHECK(acquire_and_free(request_one("c:bad", 10000), client, &held, NULL) == REDLOCK_OK);
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
    CHECK(acquire_and_free(fenced("c:insp-fenced", 20000, ONCE), client, &lock, NULL) ==
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
    redlock_request *alice = reentrant("c:insp-re", "alice", 20000, ONCE);
    CHECK(acquire(alice, client, &outer, NULL) == REDLOCK_OK);
    CHECK(acquire(alice, client, &inner, NULL) == REDLOCK_OK);
    redlock_request_free(alice);
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
    CHECK(acquire_and_free(fenced("c:insp-force", 20000, ONCE), client, &lock, NULL) ==
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
    CHECK(acquire_and_free(reentrant("c:insp-force", "bob", 20000, ONCE), client, &lock, NULL) ==
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

/* ---- Read-write locks and semaphores: redlock_request_set_read/_write/_semaphore,
 * redlock_lock_permit, and the caller of redlock_request_acquire ---- */

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

static void test_read_write(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_request *read = rw_request("c:rw", 'r', 0);
    redlock_request *write = rw_request("c:rw", 'w', 0);

    /* Two readers at once. */
    redlock_lock *r1 = NULL, *r2 = NULL;
    CHECK(acquire(read, client, &r1, NULL) == REDLOCK_OK);
    CHECK(acquire(read, client, &r2, NULL) == REDLOCK_OK);
    CHECK(r1 != NULL && r2 != NULL && r1 != r2);
    CHECK(redlock_lock_is_held(r1) && redlock_lock_is_held(r2));
    /* A third reader on another thread gets in too. */
    CHECK(acquire_on_a_thread(client, read, NULL) == REDLOCK_OK);
    /* A writer elsewhere and a plain lock are refused while readers hold it. */
    CHECK(acquire_on_a_thread(client, write, NULL) == REDLOCK_NOT_ACQUIRED);
    redlock_lock *plain = NULL;
    check_error(redlock_client_try_lock(client, "c:rw", 10000, &plain, &err), REDLOCK_NOT_ACQUIRED,
                &err);
    CHECK(plain == NULL);
    /* This thread holds a read lock: asking for the write lock is an error, not a wait. */
    redlock_lock *w = NULL;
    check_error(acquire(write, client, &w, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(w == NULL);
    /* Releasing one reader leaves the other: the writer is still refused. */
    CHECK(redlock_lock_release(r1, NULL) == REDLOCK_OK);
    CHECK(acquire_on_a_thread(client, write, NULL) == REDLOCK_NOT_ACQUIRED);
    /* A reader extends only itself. */
    CHECK(redlock_lock_extend(r2, 20000, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(r2, NULL) == REDLOCK_OK);
    redlock_lock_free(r1);
    redlock_lock_free(r2);

    /* The last reader gone, a writer gets in and excludes readers elsewhere. */
    CHECK(acquire(write, client, &w, NULL) == REDLOCK_OK);
    CHECK(acquire_on_a_thread(client, read, NULL) == REDLOCK_NOT_ACQUIRED);
    CHECK(acquire_on_a_thread(client, write, NULL) == REDLOCK_NOT_ACQUIRED);
    /* Holding the write lock, this thread's read request is an error. */
    redlock_lock *r3 = NULL;
    check_error(acquire(read, client, &r3, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(r3 == NULL);
    /* Read and write locks have no permit and no fencing token; out untouched. */
    uint32_t permit = 77;
    check_error(redlock_lock_permit(w, &permit, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(permit == 77);
    CHECK(redlock_lock_release(w, NULL) == REDLOCK_OK);
    redlock_lock_free(w);

    /* A plain holder excludes readers. */
    CHECK(redlock_client_try_lock(client, "c:rw", 10000, &plain, NULL) == REDLOCK_OK);
    CHECK(acquire_on_a_thread(client, read, NULL) == REDLOCK_NOT_ACQUIRED);
    CHECK(redlock_lock_release(plain, NULL) == REDLOCK_OK);
    redlock_lock_free(plain);
    CHECK(acquire_on_a_thread(client, read, NULL) == REDLOCK_OK);

    redlock_request_free(read);
    redlock_request_free(write);
    redlock_client_free(client);
}

/* Releases `lock` `after_ms` from its start; a pthread start routine. */
struct later_release {
    redlock_lock *lock;
    long after_ms;
    redlock_status status;
};

static void *release_later(void *arg) {
    struct later_release *r = arg;
    sleep_ms(r->after_ms);
    r->status = redlock_lock_release(r->lock, NULL);
    return NULL;
}

/* Acquires `req` on this thread for `caller`. */
static redlock_status acquire_for(const redlock_request *req, const redlock_client *client,
                                  const char *caller, redlock_lock **out, redlock_error **err) {
    return redlock_request_acquire(req, client, NULL, caller, out, err);
}

/* The caller of redlock_request_acquire: whose holds the read-write self-wait check looks at.
 * A named caller is the same caller on every OS thread; NULL (and "") is the calling OS
 * thread; a caller that is not UTF-8 is refused before anything happens. */
static void test_caller(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_request *read = rw_request("c:caller", 'r', 0);
    redlock_request *write = rw_request("c:caller", 'w', 0);
    redlock_request *write_waiting = rw_request("c:caller", 'w', 0);
    CHECK(redlock_request_set_wait(write_waiting, 60000, NULL) == REDLOCK_OK);
    redlock_lock *r = NULL, *w = NULL;

    /* alice holds a read lock, taken on this thread. */
    CHECK(acquire_for(read, client, "alice", &r, NULL) == REDLOCK_OK);
    /* alice is refused her write lock on any thread: she would wait for herself. */
    CHECK(acquire_on_a_thread(client, write, "alice") == REDLOCK_INVALID_ARGUMENT);
    check_error(acquire_for(write, client, "alice", &w, &err), REDLOCK_INVALID_ARGUMENT, &err);
    /* The message names the caller. */
    CHECK(acquire_for(write, client, "alice", &w, &err) == REDLOCK_INVALID_ARGUMENT);
    CHECK(err != NULL && strstr(redlock_error_message(err), "alice") != NULL);
    redlock_error_free(err);
    err = NULL;
    /* Another caller on this same thread is refused by the nodes after its attempt, like
     * anyone: alice's hold is not the thread's, nor bob's. */
    check_error(acquire_for(write, client, "bob", &w, &err), REDLOCK_NOT_ACQUIRED, &err);
    check_error(acquire_for(write, client, NULL, &w, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(w == NULL);
    /* alice's further read locks are fine, from anywhere. */
    CHECK(acquire_on_a_thread(client, read, "alice") == REDLOCK_OK);
    /* bob waits on this thread until alice's read lock goes (released from another thread),
     * then gets the write lock. */
    struct later_release later = {r, 300, REDLOCK_PANIC};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, release_later, &later) == 0);
    CHECK(acquire_for(write_waiting, client, "bob", &w, NULL) == REDLOCK_OK);
    pthread_join(thread, NULL);
    CHECK(later.status == REDLOCK_OK);
    redlock_lock_free(r);
    r = NULL;
    /* bob holds the write lock: his read request is refused on any thread; alice's, now that
     * she holds nothing, only by the nodes. */
    CHECK(acquire_on_a_thread(client, read, "bob") == REDLOCK_INVALID_ARGUMENT);
    CHECK(acquire_on_a_thread(client, read, "alice") == REDLOCK_NOT_ACQUIRED);
    check_error(acquire_for(read, client, NULL, &r, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(redlock_lock_release(w, NULL) == REDLOCK_OK);
    redlock_lock_free(w);
    w = NULL;

    /* NULL is the calling OS thread, and so is "". */
    CHECK(acquire_for(read, client, NULL, &r, NULL) == REDLOCK_OK);
    check_error(acquire_for(write, client, NULL, &w, &err), REDLOCK_INVALID_ARGUMENT, &err);
    check_error(acquire_for(write, client, "", &w, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(acquire_on_a_thread(client, write, NULL) == REDLOCK_NOT_ACQUIRED);
    check_error(acquire_for(write, client, "carol", &w, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(w == NULL);
    CHECK(redlock_lock_release(r, NULL) == REDLOCK_OK);
    redlock_lock_free(r);

    /* A hold ends with its lock, also when the lock is freed without a release: then alice may
     * wait for the write lock (until the freed reader is gone from the nodes). */
    CHECK(acquire_for(read, client, "alice", &r, NULL) == REDLOCK_OK);
    redlock_lock_free(r);
    CHECK(acquire_for(write_waiting, client, "alice", &w, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(w, NULL) == REDLOCK_OK);
    redlock_lock_free(w);
    w = NULL;

    /* A caller that is not UTF-8: REDLOCK_INVALID_ARGUMENT, out untouched, nothing taken, no
     * hold recorded, whatever the kind. */
    const char bad_utf8[] = {'\xff', 'a', 0};
    redlock_lock *untouched = (redlock_lock *)&client;
    redlock_lock *const sentinel = untouched;
    check_error(acquire_for(read, client, bad_utf8, &untouched, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(acquire_for(write_waiting, client, bad_utf8, &untouched, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    redlock_request *plain = request_one("c:caller", 10000);
    check_error(acquire_for(plain, client, bad_utf8, &untouched, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    CHECK(untouched == sentinel);
    CHECK(gone_everywhere("c:caller"));
    /* This thread holds nothing: its write lock comes at the first attempt, and so do the
     * requests that were refused, unchanged. */
    CHECK(acquire_for(write, client, NULL, &w, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(w, NULL) == REDLOCK_OK);
    redlock_lock_free(w);
    CHECK(acquire_for(read, client, "alice", &r, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(r, NULL) == REDLOCK_OK);
    redlock_lock_free(r);
    CHECK(acquire(plain, client, &w, NULL) == REDLOCK_OK);
    redlock_lock_free(w);

    /* Other kinds ignore the caller: a plain lock is no more the caller's than anyone's. */
    CHECK(acquire_for(plain, client, "alice", &w, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_retries(plain, 0, NULL) == REDLOCK_OK);
    check_error(acquire_for(plain, client, "alice", &r, &err), REDLOCK_NOT_ACQUIRED, &err);
    redlock_lock_free(w);
    redlock_request_free(plain);

    redlock_request_free(read);
    redlock_request_free(write);
    redlock_request_free(write_waiting);
    redlock_client_free(client);
}

static void test_semaphore(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;
    redlock_request *sem = rw_request("c:sem", 's', 2);
    redlock_lock *a = NULL, *b = NULL, *c = NULL;
    CHECK(acquire(sem, client, &a, NULL) == REDLOCK_OK);
    CHECK(acquire(sem, client, &b, NULL) == REDLOCK_OK);
    uint32_t pa = 77, pb = 77;
    CHECK(redlock_lock_permit(a, &pa, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_permit(b, &pb, NULL) == REDLOCK_OK);
    CHECK(pa < 2 && pb < 2 && pa != pb);
    /* The third is refused. */
    check_error(acquire(sem, client, &c, &err), REDLOCK_NOT_ACQUIRED, &err);
    CHECK(c == NULL);
    /* Another number of permits for the same semaphore is an error while permits are held. */
    redlock_request *three = rw_request("c:sem", 's', 3);
    check_error(acquire(three, client, &c, &err), REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(c == NULL);
    redlock_request_free(three);
    /* Releasing one lets the next in, on the freed slot. */
    CHECK(redlock_lock_release(a, NULL) == REDLOCK_OK);
    CHECK(acquire(sem, client, &c, NULL) == REDLOCK_OK);
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
    CHECK(acquire(req, client, &lock, NULL) == REDLOCK_OK);
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

/* The read, write, semaphore and fenced shorthands acquire their kinds: readers share, a
 * writer excludes them, a semaphore gives its permits and no more, a fenced lock has a token
 * that grows. */
static void test_kind_shorthands(void) {
    redlock_client *client = new_client();
    redlock_error *err = NULL;

    redlock_lock *r1 = NULL, *r2 = NULL, *w = NULL, *plain = NULL;
    CHECK(redlock_client_read_lock(client, "c:sh-rw", 10000, &r1, NULL) == REDLOCK_OK);
    CHECK(redlock_client_read_lock(client, "c:sh-rw", 10000, &r2, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_is_held(r1) && redlock_lock_is_held(r2));
    /* A writer is a plain lock on the nodes: refused while readers hold the resource. */
    check_error(redlock_client_try_lock(client, "c:sh-rw", 10000, &plain, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    /* This thread holds a read lock: asking for the write lock is refused at once. */
    check_error(redlock_client_write_lock(client, "c:sh-rw", 10000, &w, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(w == NULL);
    CHECK(redlock_lock_release(r1, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(r2, NULL) == REDLOCK_OK);
    redlock_lock_free(r1);
    redlock_lock_free(r2);
    CHECK(redlock_client_write_lock(client, "c:sh-rw", 10000, &w, NULL) == REDLOCK_OK);
    check_error(redlock_client_try_lock(client, "c:sh-rw", 10000, &plain, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    CHECK(redlock_lock_release(w, NULL) == REDLOCK_OK);
    redlock_lock_free(w);

    redlock_lock *a = NULL, *b = NULL, *c = NULL;
    CHECK(redlock_client_semaphore(client, "c:sh-sem", 2, 10000, &a, NULL) == REDLOCK_OK);
    CHECK(redlock_client_semaphore(client, "c:sh-sem", 2, 10000, &b, NULL) == REDLOCK_OK);
    uint32_t pa = 0, pb = 0;
    CHECK(redlock_lock_permit(a, &pa, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_permit(b, &pb, NULL) == REDLOCK_OK);
    CHECK(pa != pb && pa < 2 && pb < 2);
    redlock_request *third = NULL;
    CHECK(redlock_request_new("c:sh-sem", 10000, &third, NULL) == REDLOCK_OK);
    CHECK(redlock_request_set_semaphore(third, 2, NULL) == REDLOCK_OK);
    check_error(acquire_and_free(with_patience(third, ONCE), client, &c, &err),
                REDLOCK_NOT_ACQUIRED, &err);
    check_error(redlock_client_semaphore(client, "c:sh-sem", 0, 10000, &c, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_semaphore(client, "c:sh-sem", 1025, 10000, &c, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(c == NULL);
    CHECK(redlock_lock_release(a, NULL) == REDLOCK_OK);
    CHECK(redlock_lock_release(b, NULL) == REDLOCK_OK);
    redlock_lock_free(a);
    redlock_lock_free(b);

    uint64_t previous = 0;
    for (int i = 0; i < 2; i++) {
        redlock_lock *f = NULL;
        CHECK(redlock_client_lock_fenced(client, "c:sh-fenced", 10000, &f, NULL) == REDLOCK_OK);
        uint64_t fence = 0;
        CHECK(redlock_lock_fence(f, &fence, NULL) == REDLOCK_OK && fence > previous);
        previous = fence;
        check_error(redlock_client_try_lock(client, "c:sh-fenced", 10000, &plain, &err),
                    REDLOCK_NOT_ACQUIRED, &err);
        CHECK(redlock_lock_release(f, NULL) == REDLOCK_OK);
        redlock_lock_free(f);
    }
    CHECK(plain == NULL);

    /* Bad arguments, as for redlock_client_lock. */
    redlock_lock *none = NULL;
    check_error(redlock_client_read_lock(NULL, "x", 1000, &none, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_client_write_lock(client, NULL, 1000, &none, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    check_error(redlock_client_semaphore(client, "x", 2, 0, &none, &err), REDLOCK_INVALID_ARGUMENT,
                &err);
    check_error(redlock_client_lock_fenced(client, "x", 1000, NULL, &err),
                REDLOCK_INVALID_ARGUMENT, &err);
    CHECK(none == NULL);
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

    /* min_replicas: off by default, 0 turns it off again. */
    CHECK(redlock_options_min_replicas(opts) == 0 && redlock_options_min_replicas(NULL) == 0);
    CHECK(redlock_options_set_min_replicas(opts, 2, &err) == REDLOCK_OK);
    CHECK(redlock_options_min_replicas(opts) == 2);
    CHECK(redlock_options_set_min_replicas(opts, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_options_min_replicas(opts) == 0);
    check_error(redlock_options_set_min_replicas(NULL, 1, &err), REDLOCK_INVALID_ARGUMENT, &err);
    redlock_options_free(opts);
}

static void test_min_replicas(void) {
    /* The test nodes have no replica: the vote fails at once, saying why. */
    redlock_options *opts = test_options();
    CHECK(redlock_options_set_retry_count(opts, 0, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_min_replicas(opts, 1, NULL) == REDLOCK_OK);
    redlock_client *client = client_with(opts);
    redlock_lock *lock = NULL;
    redlock_error *err = NULL;
    CHECK(redlock_client_try_lock(client, "c:min-replicas", 10000, &lock, &err) ==
          REDLOCK_NO_QUORUM);
    CHECK(lock == NULL);
    CHECK(err != NULL && strstr(redlock_error_message(err), "fewer than min_replicas 1") != NULL);
    redlock_error_free(err);
    redlock_client_free(client);

    /* With a Redis Cluster node: accepted (each master's WAIT; tests/cluster.rs). */
    opts = NULL;
    err = NULL;
    client = NULL;
    CHECK(redlock_options_new(&opts, NULL) == REDLOCK_OK);
    CHECK(redlock_options_set_min_replicas(opts, 1, NULL) == REDLOCK_OK);
    const char *cluster[] = {"redis+cluster://127.0.0.1:1"};
    CHECK(redlock_client_new(cluster, 1, opts, &client, &err) == REDLOCK_OK);
    CHECK(err == NULL && client != NULL);
    redlock_client_free(client);
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

static void all(void) {
    test_round_trip();
    test_not_acquired();
    test_lock_outlives_client();
    test_threads_exclude_each_other();
    test_invalid_arguments();
    test_no_secret_shows();
    test_size_caps();
    test_options_setters();
    test_restart_grace_and_node_status();
    test_fenced();
    test_reentrant();
    test_many();
    test_auto_extend_outlives_ttl();
    test_lost_callback_when_keys_vanish();
    test_max_hold_ends_in_lost();
    test_waiters_get_the_lock_after_release();
    test_auto_extend_and_wait_bad_arguments();
    test_inspect_plain_fenced_and_free();
    test_inspect_reentrant_owners();
    test_force_release();
    test_inspect_bad_input();
    test_read_write();
    test_caller();
    test_semaphore();
    test_read_write_semaphore_bad_arguments();
    test_kind_shorthands();
    test_error_texts();
    test_guard_settings();
    test_guard_node_status();
    test_min_replicas();
}

static void no_quorum(void) {
    test_no_quorum();
    test_inspect_with_dead_nodes();
}

int main(int argc, char **argv) { return suite_main(argc, argv, all, no_quorum); }
