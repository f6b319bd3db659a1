/* The cases that break preloaded profilers, one per mode (argv[1]). Each prints a
 * deterministic line; the tests compare output and exit status with and without
 * memlens. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <malloc.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "memlens.h"

static void *volatile sink;

/* ---- threads: create/exit, cross-thread free, allocation in TLS destructors */
static pthread_key_t key;
static void *shared_blocks[64];

static void tls_destructor(void *p) {
    free(p);
    void *q = malloc(100000); /* allocation during thread exit */
    sink = q;
    memset(q, 1, 100000);
    free(q);
}

static void *worker(void *arg) {
    long id = (long)arg;
    pthread_setspecific(key, malloc(64));
    long sum = 0;
    for (int i = 0; i < 20000; i++) {
        char *p = malloc(16 + (i % 200));
        sink = p;
        p[0] = (char)i;
        sum += p[0];
        free(p);
    }
    shared_blocks[id] = malloc(200000); /* freed by the main thread */
    return (void *)sum;
}

static int threads(void) {
    pthread_key_create(&key, tls_destructor);
    pthread_t t[16];
    long total = 0;
    for (long round = 0; round < 4; round++) {
        for (long i = 0; i < 16; i++) pthread_create(&t[i], NULL, worker, (void *)i);
        for (long i = 0; i < 16; i++) {
            void *r;
            pthread_join(t[i], &r);
            total += (long)r;
            free(shared_blocks[i]);
        }
    }
    printf("threads total=%ld\n", total);
    return 0;
}

/* ---- fork without exec, and fork + exec */
static int forks(const char *self) {
    void *before = malloc(300000);
    pid_t c = fork();
    if (c == 0) {
        void *p = malloc(500000); /* the child's own object */
        sink = p;
        memset(p, 2, 500000);
        free(before);
        _exit(3);
    }
    int st;
    waitpid(c, &st, 0);
    pid_t e = fork();
    if (e == 0) {
        execl(self, self, "exit", "7", (char *)NULL);
        _exit(127);
    }
    int st2;
    waitpid(e, &st2, 0);
    free(before);
    printf("fork child=%d exec child=%d\n", WEXITSTATUS(st), WEXITSTATUS(st2));
    return 0;
}

/* ---- dlopen/dlclose of a library that allocates */
static int dl(const char *lib) {
    long total = 0;
    for (int i = 0; i < 3; i++) {
        void *h = dlopen(lib, RTLD_NOW);
        if (!h) {
            printf("dlopen failed: %s\n", dlerror());
            return 1;
        }
        long (*f)(long) = (long (*)(long))dlsym(h, "plugin_work");
        total += f(1000);
        dlclose(h);
    }
    printf("dl total=%ld\n", total);
    return 0;
}

/* ---- longjmp out of nested calls that allocated */
static jmp_buf env;
static void deep(int n) {
    sink = malloc(70000 + n);
    if (n == 0) longjmp(env, 42);
    deep(n - 1);
}

static int jump(void) {
    int r = setjmp(env);
    if (r == 0) deep(10);
    printf("longjmp returned %d\n", r);
    return 0;
}

/* ---- signals arriving during malloc */
static volatile sig_atomic_t ticks;
static void on_alarm(int sig) {
    (void)sig;
    ticks++;
}

static int signals(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    long sum = 0;
    for (int i = 0; i < 2000000; i++) {
        char *p = malloc(1 + i % 5000);
        sink = p;
        p[0] = 1;
        sum += p[0];
        free(p);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("signals sum=%ld got_signals=%d\n", sum, ticks > 0);
    return 0;
}

/* ---- a huge static object, partly touched */
static char huge[256 << 20];
static int bigstatic(void) {
    long sum = 0;
    for (size_t i = 0; i < sizeof huge; i += 4096 * 16) huge[i] = 1;
    for (size_t i = 0; i < sizeof huge; i += 4096 * 16) sum += huge[i];
    printf("huge touched %ld\n", sum);
    fprintf(stderr, "huge at %p\n", (void *)huge);
    return 0;
}

/* ---- a custom allocator built on mmap: bump arena, released in pieces */
static int arena(void) {
    size_t len = 16 << 20;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    size_t used = 0;
    for (int i = 0; i < 1000; i++) {
        char *obj = base + used;
        used += 4096;
        obj[0] = (char)i;
    }
    munmap(base, len / 2);             /* first half */
    munmap(base + len / 2, len / 2);   /* second half */
    char *grow = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    grow = mremap(grow, 1 << 20, 4 << 20, MREMAP_MAYMOVE);
    grow[(4 << 20) - 1] = 1;
    munmap(grow, 4 << 20);
    printf("arena ok\n");
    return 0;
}

/* ---- a target that crashes, or is killed, after allocating */
static void allocate_some(void) {
    for (int i = 0; i < 10; i++) {
        char *p = malloc(1 << 20);
        memset(p, 3, 1 << 20);
        shared_blocks[i] = p;
    }
    memlens_region_begin("before death");
    fflush(stdout);
}

/* ---- exec of the program in the same process: one pid, several images */
static int reexec(const char *self, int times) {
    char *p = malloc(1 << 20); /* one recorded block per image, same call stack */
    memset(p, 4, 1 << 20);
    sink = p;
    printf("image %d\n", times);
    fflush(stdout);
    if (times == 0) return 0;
    char left[16];
    snprintf(left, sizeof left, "%d", times - 1);
    execl(self, self, "reexec", left, (char *)NULL);
    return 1;
}

/* ---- a thread whose first allocating call is pthread_getattr_np, which
 * reallocs while it holds the thread's lock (Rust's std, JVMs and GCs do it) */
static void *ask_stack(void *arg) {
    pthread_attr_t attr;
    void *addr;
    size_t size = 0;
    (void)arg;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &addr, &size);
        pthread_attr_destroy(&attr);
    }
    return (void *)(long)(size > 0);
}

static int getattr(void) {
    pthread_t t;
    void *ok;
    pthread_create(&t, NULL, ask_stack, NULL);
    pthread_join(t, &ok);
    printf("stack known %d\n", (int)(long)ok);
    return 0;
}

/* ---- a daemon-like program: closes every descriptor, opens its own file,
 * puts it under many high numbers too, then allocates; its file must hold
 * exactly what it wrote */
static int closefds(const char *path) {
    /* Small blocks in a group are each recorded: freeing them later writes
     * events from inside free, across several log blocks. */
    static void *grouped[5000];
    memlens_group_begin("kept");
    for (int i = 0; i < 5000; i++) grouped[i] = malloc(16);
    memlens_group_end();
    /* Every number up to the limit will be taken: the log reopened stays low. */
    struct rlimit limit = {1024, 1024};
    setrlimit(RLIMIT_NOFILE, &limit);
    for (int fd = 3; fd < 1024; fd++) close(fd);
    int own = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (write(own, "hello\n", 6) != 6) return 1;
    for (int fd = 900; fd < 1024; fd++) dup2(own, fd);
    int errno_changed = 0; /* malloc and free keep errno when they succeed */
    for (int i = 0; i < 5000; i++) {
        errno = 77;
        free(grouped[i]);
        errno_changed += errno != 77;
    }
    for (int i = 0; i < 2000; i++) {
        errno = 77;
        char *p = malloc(100000);
        p[0] = 1;
        sink = p;
        free(p);
        errno_changed += errno != 77;
    }
    for (int fd = 900; fd < 1024; fd++) close(fd);
    close(own);
    struct stat st;
    stat(path, &st);
    printf("own file %ld bytes, fd %d, errno changed %d times\n", (long)st.st_size, own,
           errno_changed);
    return 0;
}

/* ---- a known live heap: 100 blocks of 100000 bytes held for 200 ms */
static int hold(void) {
    char *blocks[100];
    for (int i = 0; i < 100; i++) {
        blocks[i] = malloc(100000);
        memset(blocks[i], i, 100000);
    }
    usleep(200000);
    for (int i = 0; i < 100; i++) free(blocks[i]);
    usleep(50000);
    printf("held 10000000 bytes\n");
    return 0;
}

/* ---- failing allocations: the errno each leaves, as the C library sets it */
static int failures(void) {
    static volatile size_t too_large = (size_t)-1 - 10; /* volatile: no compile-time warning */
    const size_t huge = too_large;
    void *p = NULL;
    errno = 0;
    int code = posix_memalign(&p, 64, huge);
    printf("posix_memalign %d errno %d\n", code, errno);
    errno = 0;
    sink = malloc(huge);
    printf("malloc %p errno %d\n", sink, errno);
    errno = 0;
    sink = calloc(huge / 2, 4);
    printf("calloc %p errno %d\n", sink, errno);
    char *q = malloc(16);
    errno = 0;
    sink = realloc(q, huge);
    printf("realloc %p errno %d\n", sink, errno);
    errno = 0;
    sink = aligned_alloc(64, huge);
    printf("aligned_alloc %p errno %d\n", sink, errno);
    errno = 0;
    sink = memalign(64, huge);
    printf("memalign %p errno %d\n", sink, errno);
    errno = 0;
    sink = valloc(huge);
    printf("valloc %p errno %d\n", sink, errno);
    errno = 0;
    sink = reallocarray(q, huge / 2, 4);
    printf("reallocarray %p errno %d\n", sink, errno);
    free(q);
    return 0;
}

/* ---- a program that removes its working directory (and the default profile
 * directory in it): 30 MB held before, 50 MB more after */
static int removes_cwd(void) {
    char cwd[4096], cmd[4200];
    if (!getcwd(cwd, sizeof cwd) || chdir("/") != 0) return 3;
    char *before = malloc(30000000);
    memset(before, 1, 30000000);
    sink = before;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cwd);
    if (system(cmd) != 0) return 4;
    char *after = malloc(50000000);
    memset(after, 2, 50000000);
    sink = after;
    usleep(50000);
    struct stat st;
    printf("removed %d\n", stat(cwd, &st) != 0 && errno == ENOENT);
    free(after);
    free(before);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *m = argv[1];
    if (!strcmp(m, "threads")) return threads();
    if (!strcmp(m, "forks")) return forks(argv[0]);
    if (!strcmp(m, "dlopen")) return dl(argv[2]);
    if (!strcmp(m, "longjmp")) return jump();
    if (!strcmp(m, "signals")) return signals();
    if (!strcmp(m, "bigstatic")) return bigstatic();
    if (!strcmp(m, "arena")) return arena();
    if (!strcmp(m, "getattr")) return getattr();
    if (!strcmp(m, "closefds")) return closefds(argv[2]);
    if (!strcmp(m, "hold")) return hold();
    if (!strcmp(m, "failures")) return failures();
    if (!strcmp(m, "removes_cwd")) return removes_cwd();
    if (!strcmp(m, "reexec")) return reexec(argv[0], atoi(argv[2]));
    if (!strcmp(m, "exit")) exit(atoi(argv[2]));
    if (!strcmp(m, "_exit")) _exit(atoi(argv[2]));
    if (!strcmp(m, "abort")) abort();
    if (!strcmp(m, "crash")) {
        allocate_some();
        volatile int *null_pointer = NULL;
        *null_pointer = 1; /* SIGSEGV */
    }
    if (!strcmp(m, "sigkill")) {
        allocate_some();
        raise(SIGKILL);
    }
    return 2;
}
