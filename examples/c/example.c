/* A first use of libredlock from C (C99). Install the library, then build from anywhere:
 *
 *   scripts/install "$HOME/.local"           # or sudo scripts/install /usr/local
 *   export PKG_CONFIG_PATH=$HOME/.local/lib/pkgconfig LD_LIBRARY_PATH=$HOME/.local/lib
 *   cc example.c $(pkg-config --cflags --libs redlock) -o example
 *   ./example redis://127.0.0.1:6379
 *
 * Or, inside the repository after `cargo build --release`:
 *   cc -Iinclude examples/c/example.c -Ltarget/release -lredlock \
 *      -Wl,-rpath,$PWD/target/release -o example
 */
#include <stdio.h>

#include "redlock.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s redis://host:port...\n", argv[0]);
        return 2;
    }
    redlock_client *client = NULL;
    redlock_error *err = NULL;
    if (redlock_client_new((const char *const *)&argv[1], (size_t)(argc - 1), NULL, &client,
                           &err) != REDLOCK_OK) {
        fprintf(stderr, "client: %s\n", redlock_error_message(err));
        redlock_error_free(err);
        return 1;
    }
    redlock_lock *lock = NULL;
    if (redlock_client_lock(client, "orders:42", 10000, &lock, &err) != REDLOCK_OK) {
        fprintf(stderr, "lock: %s\n", redlock_error_message(err));
        redlock_error_free(err);
        redlock_client_free(client);
        return 1;
    }
    printf("holding %s for %llu ms\n", redlock_lock_resource(lock),
           (unsigned long long)redlock_lock_validity_ms(lock));
    /* ... the work that must not overlap another holder's ... */
    if (redlock_lock_release(lock, &err) != REDLOCK_OK) {
        fprintf(stderr, "release: %s\n", redlock_error_message(err));
        redlock_error_free(err);
    }
    redlock_lock_free(lock);
    redlock_client_free(client);
    return 0;
}
