/* Counts the allocations a process makes (malloc, calloc, realloc, posix_memalign, aligned_alloc,
 * memalign), for bench/relay-allocations.sh: LD_PRELOAD it, then read the count from the file
 * named by MALLOC_COUNT_FILE, which is rewritten on SIGUSR2. glibc's own entry points do the
 * work (__libc_malloc and friends): nothing is allocated here. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_ulong count;

void *malloc(size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_realloc(p, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    void *p = __libc_memalign(alignment, size);
    if (!p) return 12;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_memalign(alignment, size);
}

static void dump(int signal) {
    const char *path = getenv("MALLOC_COUNT_FILE");
    if (!path) return;
    char text[32];
    int length = snprintf(text, sizeof text, "%lu\n", atomic_load(&count));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    (void)!write(fd, text, (size_t)length);
    close(fd);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = dump;
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &action, NULL);
}
