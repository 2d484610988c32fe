/*
 * clockshift: an LD_PRELOAD shim for tests that moves a process's wall clock at run time.
 *
 * CLOCK_REALTIME (and its _COARSE variant), gettimeofday() and time() return the real time plus
 * an offset in milliseconds, read (signed decimal) from the file named by $CLOCKSHIFT_FILE; the
 * file is read again at most every 10 ms of monotonic time, so a test moves the clock by
 * rewriting it. Every other clock passes through unchanged.
 *
 * The real clocks are read with the clock_gettime system call directly, not through dlsym:
 * libfaketime's dlsym-based approach makes redis-server hang at start (jemalloc calls
 * clock_gettime during the shim's own initialisation).
 *
 * Built by tests/guards.rs with `cc -shared -fPIC`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ms;      /* last value read */
static long long next_read_ns;   /* monotonic time of the next read; 0: never read */

static int raw_clock(clockid_t clk, struct timespec *ts) {
    return (int)syscall(SYS_clock_gettime, clk, ts);
}

static long long current_offset_ms(void) {
    struct timespec now;
    if (raw_clock(CLOCK_MONOTONIC, &now) != 0) {
        return __atomic_load_n(&offset_ms, __ATOMIC_RELAXED);
    }
    long long now_ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    if (now_ns < __atomic_load_n(&next_read_ns, __ATOMIC_RELAXED)) {
        return __atomic_load_n(&offset_ms, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&next_read_ns, now_ns + 10000000LL, __ATOMIC_RELAXED);
    const char *path = getenv("CLOCKSHIFT_FILE");
    if (path == NULL) {
        return 0;
    }
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return __atomic_load_n(&offset_ms, __ATOMIC_RELAXED);
    }
    char buf[32];
    long n = (long)syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    if (n > 0) {
        buf[n] = '\0';
        __atomic_store_n(&offset_ms, strtoll(buf, NULL, 10), __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&offset_ms, __ATOMIC_RELAXED);
}

static void shift(struct timespec *ts) {
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec +
                   current_offset_ms() * 1000000LL;
    ts->tv_sec = (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
    int rc = raw_clock(clk, ts);
    if (rc == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) {
        shift(ts);
    }
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    if (raw_clock(CLOCK_REALTIME, &ts) != 0) {
        return -1;
    }
    shift(&ts);
    /* glibc declares tv non-null. */
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (raw_clock(CLOCK_REALTIME, &ts) != 0) {
        return (time_t)-1;
    }
    shift(&ts);
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
