/*
 * pauseshift: an LD_PRELOAD shim for tests that makes a process believe less time has passed
 * than really did, the way a guest sees a hypervisor's pause of its VM: its monotonic clocks
 * (CLOCK_MONOTONIC and its _RAW and _COARSE variants, CLOCK_BOOTTIME) stand still while the
 * rest of the world, Redis nodes included, moves on. The suspend counter (BOOTTIME − MONOTONIC)
 * does not grow, as on a real VM pause, so the kernel cannot tell the process it was paused.
 *
 * The monotonic clocks return the real ones minus an offset in nanoseconds, read (decimal) from
 * the file named by $PAUSESHIFT_FILE at most every 10 ms of real monotonic time. A test stops
 * the process with SIGSTOP, waits, adds the time it waited to the file, and resumes it with
 * SIGCONT: to the process, no time passed. The wall clock is left alone (NTP would have put it
 * right by the time anything reads it).
 *
 * Absolute futex timeouts on CLOCK_MONOTONIC (Rust's std parks threads with FUTEX_WAIT_BITSET
 * and a deadline computed from the shifted clock) are moved back to the real clock; otherwise
 * every timed wait would end at once and spin until the shifted deadline.
 *
 * For test processes only (it finds the real functions with dlsym). Built by tests/pause.rs with
 * `cc -shared -fPIC -O2 ... -ldl`.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef long (*syscall_fn)(long, ...);

static long long offset_ns;    /* last value read */
static long long next_read_ns; /* real monotonic time of the next read; 0: never read */

static clock_gettime_fn real_clock_gettime(void) {
    static clock_gettime_fn real;
    if (real == NULL) {
        real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    }
    return real;
}

static syscall_fn real_syscall(void) {
    static syscall_fn real;
    if (real == NULL) {
        real = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
    }
    return real;
}

static long long ns_of(const struct timespec *ts) {
    return (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static void set_ns(struct timespec *ts, long long ns) {
    ts->tv_sec = (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
}

/* The current offset; re-read from the file once 10 ms have passed since the last read. The
 * offset is stored before the time of the next read, so a thread that sees the new time of the
 * next read also sees the new offset. */
static long long current_offset_ns(void) {
    struct timespec now;
    if (real_clock_gettime()(CLOCK_MONOTONIC, &now) != 0) {
        return __atomic_load_n(&offset_ns, __ATOMIC_ACQUIRE);
    }
    long long now_ns = ns_of(&now);
    if (now_ns < __atomic_load_n(&next_read_ns, __ATOMIC_ACQUIRE)) {
        return __atomic_load_n(&offset_ns, __ATOMIC_ACQUIRE);
    }
    const char *path = getenv("PAUSESHIFT_FILE");
    if (path != NULL) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char buf[32];
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n > 0) {
                buf[n] = '\0';
                __atomic_store_n(&offset_ns, strtoll(buf, NULL, 10), __ATOMIC_RELEASE);
            }
        }
    }
    __atomic_store_n(&next_read_ns, now_ns + 10000000LL, __ATOMIC_RELEASE);
    return __atomic_load_n(&offset_ns, __ATOMIC_ACQUIRE);
}

static int shifted(clockid_t clk) {
    return clk == CLOCK_MONOTONIC || clk == CLOCK_MONOTONIC_RAW ||
           clk == CLOCK_MONOTONIC_COARSE || clk == CLOCK_BOOTTIME;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
    int rc = real_clock_gettime()(clk, ts);
    if (rc == 0 && shifted(clk)) {
        set_ns(ts, ns_of(ts) - current_offset_ns());
    }
    return rc;
}

long syscall(long number, ...) {
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (int i = 0; i < 6; i++) {
        a[i] = va_arg(ap, long);
    }
    va_end(ap);
    struct timespec real_deadline;
    if (number == SYS_futex) {
        int op = (int)a[1];
        if ((op & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET && !(op & FUTEX_CLOCK_REALTIME) &&
            a[3] != 0) {
            const struct timespec *deadline = (const struct timespec *)a[3];
            set_ns(&real_deadline, ns_of(deadline) + current_offset_ns());
            a[3] = (long)&real_deadline;
        }
    }
    return real_syscall()(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
