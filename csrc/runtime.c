/* runtime.c - running a compiled plan on the CPU.
 *
 * A call allocates the plan's arena once, points every buffer slot at its
 * argument, output or arena offset, and runs the kernels in order.  An
 * output the plan placed in a donated argument is bound to the argument's
 * bytes (its entry in `outputs` is not read).  The
 * counters see every byte the runtime allocates (arenas here, outputs in
 * py_exec.c), so memory_stats() can be held against the plan.
 *
 * Large kernels run on several cores: a persistent pool of pthreads
 * (created on first use; one thread per core, CJIT_NUM_THREADS overrides)
 * splits the outermost loop's range [0, dims[0]) into chunks, when that
 * loop does not accumulate (kernel->reduced bit 0 clear), since every
 * index of it then writes elements of its own.  The pool runs one kernel
 * at a time; a call that finds it busy (another Python thread running an
 * executable) runs its kernel on its own thread instead, so any number of
 * threads may run executables at once.
 *
 * Large blocks (outputs and arenas of 1 MiB or more) are kept in a small
 * cache when freed, so that a function called in a loop reuses memory
 * whose pages are already mapped instead of faulting fresh pages in on
 * every call (as glibc's mmap'd blocks would).
 *
 * The counters (stats.c) see every byte it allocates. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blockmem.h"
#include "executable.h"
#include "rt.h"
#include "stats.h"

/* ---- the block cache ------------------------------------------------------ */

#define BLOCK_MIN ((size_t)1 << 20)       /* smaller blocks go straight to malloc */
#define BLOCK_CACHE_BYTES ((size_t)1 << 29) /* at most this much kept */
#define BLOCK_SLOTS 16

static struct {
    pthread_mutex_t lock;
    void *ptr[BLOCK_SLOTS];
    size_t size[BLOCK_SLOTS];
    size_t bytes;
} blocks = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t round_block(size_t n) { return (n + 63) / 64 * 64; }

/* See pipeline.h. */
void *cj_runtime_block_alloc(size_t nbytes) {
    size_t n = round_block(nbytes ? nbytes : 1);
    if (n >= BLOCK_MIN) {
        void *p = NULL;
        pthread_mutex_lock(&blocks.lock);
        for (int i = 0; i < BLOCK_SLOTS; i++) {
            if (blocks.ptr[i] && blocks.size[i] == n) {
                p = blocks.ptr[i];
                blocks.ptr[i] = NULL;
                blocks.bytes -= n;
                break;
            }
        }
        pthread_mutex_unlock(&blocks.lock);
        if (p) return p;
    }
    return aligned_alloc(64, n);
}

/* See pipeline.h. */
void cj_runtime_block_free(void *p, size_t nbytes) {
    if (!p) return;
    size_t n = round_block(nbytes ? nbytes : 1);
    if (n >= BLOCK_MIN && n <= BLOCK_CACHE_BYTES / 4) {
        void *evict[BLOCK_SLOTS];
        int nevict = 0;
        pthread_mutex_lock(&blocks.lock);
        /* make room: drop the cached blocks from the first slot on */
        for (int i = 0; i < BLOCK_SLOTS && blocks.bytes + n > BLOCK_CACHE_BYTES; i++) {
            if (blocks.ptr[i]) {
                evict[nevict++] = blocks.ptr[i];
                blocks.bytes -= blocks.size[i];
                blocks.ptr[i] = NULL;
            }
        }
        int slot = -1;
        for (int i = 0; i < BLOCK_SLOTS && slot < 0; i++)
            if (!blocks.ptr[i]) slot = i;
        if (slot < 0) { /* all full: replace slot 0 */
            evict[nevict++] = blocks.ptr[0];
            blocks.bytes -= blocks.size[0];
            slot = 0;
        }
        blocks.ptr[slot] = p;
        blocks.size[slot] = n;
        blocks.bytes += n;
        pthread_mutex_unlock(&blocks.lock);
        for (int i = 0; i < nevict; i++) free(evict[i]);
        return;
    }
    free(p);
}

/* See pipeline.h. */
void cj_runtime_block_trim(void) {
    void *evict[BLOCK_SLOTS];
    int n = 0;
    pthread_mutex_lock(&blocks.lock);
    for (int i = 0; i < BLOCK_SLOTS; i++) {
        if (blocks.ptr[i]) evict[n++] = blocks.ptr[i];
        blocks.ptr[i] = NULL;
    }
    blocks.bytes = 0;
    pthread_mutex_unlock(&blocks.lock);
    for (int i = 0; i < n; i++) free(evict[i]);
}

/* ---- small copies, done without compiled code ------------------------------ */

/* Runs a small copy kernel: every point's element of the loaded buffer to
 * the output's, the innermost loop by memmove where both are contiguous
 * (source and destination may be one storage, an in-place copy). */
static void run_small_copy(const cj_plan *p, const cj_kernel *k, void *const *slots) {
    const cj_expr *ld = &k->exprs[0];
    size_t elem = (size_t)cj_dtype_size(p->buffers[k->out_buffer].dtype);
    char *dst = slots[k->out_buffer];
    const char *src = slots[ld->buffer];
    int r = k->rank > 0 ? k->rank : 1;
    for (int d = 0; d < k->rank; d++)
        if (k->dims[d] == 0) return;
    int64_t inner = k->rank > 0 ? k->dims[r - 1] : 1;
    int64_t so = k->out_index.stride[r - 1], si = ld->index.stride[r - 1];
    int64_t idx[CJ_MAX_RANK] = {0};
    for (;;) {
        int64_t o = k->out_index.offset, i = ld->index.offset;
        for (int d = 0; d < r - 1; d++) {
            o += idx[d] * k->out_index.stride[d];
            i += idx[d] * ld->index.stride[d];
        }
        if (so == 1 && si == 1) memmove(dst + o * (int64_t)elem, src + i * (int64_t)elem, (size_t)inner * elem);
        else
            for (int64_t j = 0; j < inner; j++)
                memmove(dst + (o + j * so) * (int64_t)elem, src + (i + j * si) * (int64_t)elem, elem);
        int d = r - 2; /* the next point of the outer loops, the last fastest */
        while (d >= 0 && ++idx[d] == k->dims[d]) idx[d--] = 0;
        if (d < 0) break;
    }
}

/* ---- the thread pool -------------------------------------------------------- */

#define MAX_THREADS 256

typedef struct {
    cj_kernel_fn fn;
    void *const *slots;
    int64_t n, chunk, nchunks;
    _Atomic int64_t next;   /* the next chunk to take */
} pool_job;

static struct {
    pthread_once_t once;
    pthread_mutex_t busy;   /* held by the caller whose job the pool runs */
    pthread_mutex_t m;      /* guards job, and gen and active's changes */
    pthread_cond_t wake, idle;
    int nthreads;           /* workers + the calling thread */
    _Atomic uint64_t gen;   /* bumped for each job; read without m while spinning */
    pool_job *job;          /* NULL between jobs */
    _Atomic int active;     /* workers inside the current job */
} pool = {.once = PTHREAD_ONCE_INIT,
          .busy = PTHREAD_MUTEX_INITIALIZER,
          .m = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .idle = PTHREAD_COND_INITIALIZER,
          .nthreads = 1};

static void run_chunks(pool_job *j) {
    for (;;) {
        int64_t c = atomic_fetch_add(&j->next, 1);
        if (c >= j->nchunks) return;
        int64_t lo = c * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
        j->fn(lo, hi, j->slots);
    }
}

/* The kernels of one call follow each other within microseconds, and a
 * sleeping thread takes tens of microseconds to wake: so a worker, and the
 * caller waiting for workers, spin this long before they sleep. */
#define POOL_SPIN_NS 100000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spins until *gen != old (when gen is given) or *active == 0, or until
 * the spin time is over; the caller then checks again under the mutex. */
static void spin_until(const _Atomic uint64_t *gen, uint64_t old, const _Atomic int *active) {
    int64_t until = cj_clock_ns() + POOL_SPIN_NS;
    for (int i = 1;; i++) {
        if (gen ? atomic_load(gen) != old : atomic_load(active) == 0) return;
        cpu_relax();
        if (i % 64 == 0 && cj_clock_ns() > until) return;
    }
}

static void *worker_main(void *arg) {
    cj_rt_set_thread_index((int32_t)(intptr_t)arg); /* which block of block storage it uses (rt.c) */
    uint64_t seen = 0;
    for (;;) {
        spin_until(&pool.gen, seen, NULL);
        pthread_mutex_lock(&pool.m);
        while (atomic_load(&pool.gen) == seen) pthread_cond_wait(&pool.wake, &pool.m);
        seen = atomic_load(&pool.gen);
        pool_job *j = pool.job;
        if (j) atomic_fetch_add(&pool.active, 1);
        pthread_mutex_unlock(&pool.m);
        if (!j) continue;   /* woke after that job ended */
        run_chunks(j);
        pthread_mutex_lock(&pool.m);
        if (atomic_fetch_sub(&pool.active, 1) == 1) pthread_cond_signal(&pool.idle);
        pthread_mutex_unlock(&pool.m);
    }
    return NULL;
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

/* See pipeline.h.  Accepted: a whole number from 1 to MAX_THREADS, with
 * blanks around it; anything else (garbage, "-2", "2.5", "1000") is reported
 * in `why` and the default is used, so a typo never ends a program. */
int cj_runtime_threads_setting(char *why, size_t n) {
    const char *s = getenv("CJIT_NUM_THREADS");
    if (why && n) why[0] = 0;
    if (s == NULL || *s == 0) return 0;
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    long v = 0;
    bool digits = false, big = false;
    for (; *p >= '0' && *p <= '9'; p++) {
        digits = true;
        v = v * 10 + (*p - '0');
        if (v > MAX_THREADS) big = true, v = MAX_THREADS + 1;
    }
    while (*p == ' ' || *p == '\t') p++;
    if (digits && *p == 0 && !big && v >= 1) return (int)v;
    if (why && n)
        snprintf(why, n, "cjit: CJIT_NUM_THREADS=%.40s%s is not a whole number from 1 to %d; using "
                 "the default, %d (the number of cores)", s, strlen(s) > 40 ? "..." : "",
                 MAX_THREADS, default_threads());
    return 0;
}

static int threads_wanted(void) {
    int n = cj_runtime_threads_setting(NULL, 0);
    return n > 0 ? n : default_threads();
}

static void pool_start(void) {
    int want = threads_wanted();
    int started = 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 1; i < want; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker_main, (void *)(intptr_t)started) != 0) break;
        started++;
    }
    pthread_attr_destroy(&attr);
    pool.nthreads = started;
}

/* See pipeline.h. */
int cj_runtime_num_threads(void) {
    pthread_once(&pool.once, pool_start);
    return pool.nthreads;
}

/* Runs fn over [0, n): split across the pool when `split` and the pool is
 * free, else on this thread.  `coarse`: one chunk per thread, for calls
 * with a fixed cost each (a gemm repacks its B operand per call). */
static void parallel_for(cj_kernel_fn fn, int64_t n, bool split, bool coarse, void *const *slots) {
    if (!split || n < 2 || cj_runtime_num_threads() < 2 || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(0, n, slots);
        return;
    }
    pool_job j = {.fn = fn, .slots = slots, .n = n};
    int64_t want = (int64_t)pool.nthreads * (coarse ? 1 : 4);
    j.nchunks = n < want ? n : want;
    j.chunk = (n + j.nchunks - 1) / j.nchunks;
    if (j.chunk >= 64) j.chunk = (j.chunk + 15) / 16 * 16; /* whole vectors per chunk */
    j.nchunks = (n + j.chunk - 1) / j.chunk;
    atomic_init(&j.next, 0);
    pthread_mutex_lock(&pool.m);
    pool.job = &j;
    atomic_fetch_add(&pool.gen, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.m);
    run_chunks(&j);
    /* every chunk is taken; wait for workers still running theirs.  A worker
     * that has not joined yet finds the job gone, under m, and skips it. */
    spin_until(NULL, 0, &pool.active);
    pthread_mutex_lock(&pool.m);
    while (atomic_load(&pool.active) > 0) pthread_cond_wait(&pool.idle, &pool.m);
    pool.job = NULL;   /* late wakers see no job */
    pthread_mutex_unlock(&pool.m);
    pthread_mutex_unlock(&pool.busy);
}

/* Runs of less work than this (flops and bytes, as cost_analysis counts
 * them: well under a millisecond) are never asked to stop, so that calls of
 * small functions never read the clock. */
#define POLL_MIN_WORK ((int64_t)1 << 20)

/* Points every buffer slot of plan p at its argument, output, arena offset
 * or host (in-place updates, temporaries and outputs in donated arguments
 * reuse a host's bytes; a host may itself live in another: a value
 * computed straight into an output that lives in a donated argument). */
static void bind_slots(const cj_plan *p, void **slots, void *const *params, void *const *arrays,
                       void *const *outputs, char *arena) {
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        switch (buf->kind) {
        case CJ_BUF_PARAM: slots[b] = params[buf->slot]; break;
        case CJ_BUF_ARRAY: slots[b] = arrays[buf->slot]; break;
        case CJ_BUF_OUTPUT: slots[b] = outputs[buf->slot]; break;
        case CJ_BUF_TEMP: slots[b] = arena + buf->offset; break;
        }
    }
    for (int b = 0; b < p->nbuffers; b++) {
        int64_t offset = 0;
        int host = b;
        while (p->buffers[host].alias_of >= 0) {
            offset += p->buffers[host].offset;
            host = p->buffers[host].alias_of;
        }
        if (host != b) slots[b] = (char *)slots[host] + offset;
    }
}

/* How group g of x runs: its compiled function (a group's driver or a
 * kernel) over loop 0's [0, n), split across the pool or not, after the
 * output is filled with the identity or not; or, fn NULL, a loop or a
 * small copy the runtime does itself. */
struct cj_run_step {
    cj_kernel_fn fn;
    int64_t n;
    bool split, coarse, fill;
};

static cj_run_step step_of(const cj_executable *x, int g) {
    const cj_plan *p = &x->plan;
    const cj_group *grp = &p->groups[g];
    const cj_kernel *kern = &p->kernels[grp->first];
    cj_run_step s = {0};
    if (x->groups[g]) { /* stages sharing their rows: the driver runs them block by block */
        bool split = cj_group_points(p, grp) >= CJ_PARALLEL_MIN_POINTS;
        /* block storage has a block for each of local_copies threads: split
         * only when the pool has no more (thread_index < local_copies) */
        if (grp->local_block > 0) split = grp->local_copies > 1 && cj_runtime_num_threads() <= grp->local_copies;
        return (cj_run_step){x->groups[g], grp->rows, split, kern->gemm.on, false};
    }
    if (kern->loop || !x->kernels[grp->first]) return s;
    int64_t points = 1;
    for (int d = 0; d < kern->rank; d++) points *= kern->dims[d];
    s.fn = x->kernels[grp->first];
    s.n = kern->rank > 0 ? kern->dims[0] : 1;
    s.split = points >= CJ_PARALLEL_MIN_POINTS && !(kern->reduced & 1u) && !kern->scatter.on; /* racing stores */
    s.coarse = kern->gemm.on;
    s.fill = cj_kernel_cpu_needs_identity(p, kern);
    return s;
}

/* Runs x's groups in order on bound slots. */
static cj_status run_groups(cj_executable *x, void *const *slots, const cj_run_poll *poll, cj_error *err) {
    const cj_plan *p = &x->plan;
    int64_t next_poll_ns = 0;
    if (x->flops + x->bytes_accessed < POLL_MIN_WORK && !x->has_loops) poll = NULL;
    for (int g = 0; g < p->ngroups; g++) {
        if (g > 0 && cj_runtime_poll(poll, &next_poll_ns)) {
            cj_stats_cancelled();
            return cj_error_set(err, CJ_ERR_CANCELLED, "run: stopped between kernels");
        }
        cj_run_step step = x->steps ? x->steps[g] : step_of(x, g);
        const cj_kernel *kern = &p->kernels[p->groups[g].first];
        if (step.fn) {
            if (step.fill)
                cj_rt_fill_identity(slots[kern->out_buffer], 0, cj_shape_numel(&p->buffers[kern->out_buffer].shape),
                                    p->buffers[kern->out_buffer].dtype, kern->reduce_op);
            parallel_for(step.fn, step.n, step.split, step.coarse, slots);
        } else if (kern->loop) { /* a scan, while or cond: its bodies run (loops_rt.c) */
            cj_status st = cj_loop_run(p, kern, slots, poll, cj_runtime_run_in, err);
            if (st != CJ_OK) return st;
        } else { /* a small copy, not compiled (jit_cpu.c, cj_kernel_is_small_copy) */
            run_small_copy(p, kern, slots);
        }
    }
    return CJ_OK;
}

/* The host of buffer b (b itself when it aliases none) and b's offset in it. */
static int host_of(const cj_plan *p, int b, int64_t *offset) {
    *offset = 0;
    while (p->buffers[b].alias_of >= 0) {
        *offset += p->buffers[b].offset;
        b = p->buffers[b].alias_of;
    }
    return b;
}

/* A slot bound at every iteration: buffer b at `offset` bytes into
 * parameter or output `slot`. */
struct cj_rebind {
    int buffer, slot;
    bool param;
    int64_t offset;
};

/* See executable.h. */
void cj_runtime_prepare_body(cj_executable *x) {
    const cj_plan *p = &x->plan;
    x->one_function = p->one_function ? x->groups[p->ngroups] : NULL; /* its kernels have no code of their own */
    x->rebind = malloc(sizeof(cj_rebind) * ((size_t)p->nbuffers + 1));
    x->steps = malloc(sizeof(cj_run_step) * ((size_t)p->ngroups + 1));
    x->nrebind = 0;
    bool ok = x->rebind && x->steps;
    for (int b = 0; ok && b < p->nbuffers; b++) {
        int64_t offset;
        const cj_buffer *host = &p->buffers[host_of(p, b, &offset)];
        /* a body has no ARRAY buffers (the loop passes every value in as a parameter) */
        ok = host->kind != CJ_BUF_ARRAY;
        if (host->kind == CJ_BUF_PARAM || host->kind == CJ_BUF_OUTPUT)
            x->rebind[x->nrebind++] = (cj_rebind){b, host->slot, host->kind == CJ_BUF_PARAM, offset};
    }
    if (!ok) { /* every iteration works everything out again */
        free(x->rebind);
        free(x->steps);
        x->rebind = NULL;
        x->steps = NULL;
        return;
    }
    for (int g = 0; g < p->ngroups; g++) x->steps[g] = step_of(x, g);
}

/* See executable.h. */
cj_status cj_runtime_run_in(cj_executable *x, void **slots, bool bound, void *const *params, void *const *outputs,
                            char *arena, const cj_run_poll *poll, cj_error *err) {
    const cj_plan *p = &x->plan;
    if (!bound || !x->rebind) {
        bind_slots(p, slots, params, NULL, outputs, arena);
    } else {
        for (int i = 0; i < x->nrebind; i++) {
            const cj_rebind *r = &x->rebind[i];
            slots[r->buffer] = (char *)(r->param ? params : outputs)[r->slot] + r->offset;
        }
    }
    if (x->one_function) { /* every group, in one call (body_fn.c) */
        x->one_function(0, 1, slots);
        return CJ_OK;
    }
    return run_groups(x, slots, poll, err);
}

/* See pipeline.h. */
cj_status cj_executable_run(cj_executable *x, void *const *params, void *const *arrays,
                            void *const *outputs, const cj_run_poll *poll, cj_error *err) {
    const cj_plan *p = &x->plan;
    void *stack_slots[32];
    void **slots = p->nbuffers <= 32 ? stack_slots : malloc(sizeof(void *) * (size_t)p->nbuffers);
    if (!slots) return cj_error_set(err, CJ_ERR_MEMORY, "run: out of memory");
    /* arguments count as in use while a call holds them, so that the peak
     * measured around a call is the plan's peak (memory_analysis) */
    cj_stats_alloc(p->argument_bytes);
    char *arena = NULL;
    if (p->arena_bytes > 0) {
        arena = cj_runtime_block_alloc((size_t)p->arena_bytes);
        if (!arena) {
            if (slots != stack_slots) free(slots);
            cj_stats_alloc(-p->argument_bytes);
            return cj_error_set(err, CJ_ERR_MEMORY, "run: cannot allocate %lld bytes of temporaries",
                                (long long)p->arena_bytes);
        }
        cj_stats_alloc(p->arena_bytes);
    }
    bind_slots(p, slots, params, arrays, outputs, arena);
    cj_status st = run_groups(x, slots, poll, err);
    if (arena) {
        cj_runtime_block_free(arena, (size_t)p->arena_bytes);
        cj_stats_alloc(-p->arena_bytes);
    }
    cj_stats_alloc(-p->argument_bytes);
    if (slots != stack_slots) free(slots);
    return st;
}
