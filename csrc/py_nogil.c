/* py_nogil.c - compiling and running with the GIL released while Ctrl-C
 * is still heard: the compile thread, its cancellation, the poll of a
 * run, and freeing code off the GIL. */
#include "py_exec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- long work with the GIL released, Ctrl-C still heard ----------------
 *
 * A compile spends up to seconds in LLVM and a run in kernels; neither
 * touches a Python object, so both release the GIL and other Python threads
 * go on meanwhile.  But Python runs signal handlers (KeyboardInterrupt) only
 * on the main thread, and only with the GIL: so the waiting side takes the
 * GIL back now and then, just long enough for PyErr_CheckSignals, and when
 * that raises, the work stops at its next check, frees what it made, and
 * the exception propagates.  A compile runs on a thread of its own while
 * the calling thread waits and checks every COMPILE_CHECK_NS, setting the
 * compile's cancel flag; a run checks between kernel groups (runtime.c,
 * cj_run_poll), at most every CJ_RUN_POLL_NS. */

#define COMPILE_CHECK_NS 5000000 /* 5 ms */
/* The compile thread's stack: the passes recurse over deep graphs as they
 * did on the main thread, whose stack is usually 8 MiB. */
#define COMPILE_STACK_BYTES ((size_t)64 << 20)

/* Shared by the waiting thread and the compile thread; the last of the two
 * to let go frees it.  (A daemon thread that waits can end inside
 * PyEval_RestoreThread when the interpreter exits: then the compile thread
 * is the last.) */
typedef struct compile_job_s {
    const cj_graph *graph;
    cj_compile_options options; /* the caller's, its cancel flag pointed at `cancel` */
    cj_cancel cancel;
    cj_executable *result;      /* taken by the waiting thread */
    cj_error err;
    pthread_mutex_t lock;
    pthread_cond_t done_cv;     /* signalled when done is set */
    bool done;
    int holders;                /* under lock */
    struct compile_job_s *next_running;   /* in running_jobs */
} compile_job;

/* The compiles running on threads of their own.  When the interpreter
 * exits, the last thing it does (Py_AtExit) is to cancel them and wait:
 * else the process's exit would run LLVM's static destructors under a
 * compile still using LLVM (a daemon thread's compile crashed the exit). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t none_cv;     /* signalled when the list empties */
    compile_job *first;
    bool wait_registered;
} running_jobs = {.lock = PTHREAD_MUTEX_INITIALIZER, .none_cv = PTHREAD_COND_INITIALIZER};

static void wait_for_running_compiles(void)
{
    pthread_mutex_lock(&running_jobs.lock);
    for (compile_job *j = running_jobs.first; j != NULL; j = j->next_running)
        j->cancel = true;
    while (running_jobs.first != NULL)
        pthread_cond_wait(&running_jobs.none_cv, &running_jobs.lock);
    pthread_mutex_unlock(&running_jobs.lock);
}

static void running_add(compile_job *j)
{
    pthread_mutex_lock(&running_jobs.lock);
    j->next_running = running_jobs.first;
    running_jobs.first = j;
    pthread_mutex_unlock(&running_jobs.lock);
}

static void running_remove(compile_job *j)
{
    pthread_mutex_lock(&running_jobs.lock);
    compile_job **p = &running_jobs.first;
    while (*p != NULL && *p != j)
        p = &(*p)->next_running;
    if (*p == j)
        *p = j->next_running;
    if (running_jobs.first == NULL)
        pthread_cond_broadcast(&running_jobs.none_cv);
    pthread_mutex_unlock(&running_jobs.lock);
}

static void compile_job_let_go(compile_job *j)
{
    pthread_mutex_lock(&j->lock);
    bool last = --j->holders == 0;
    pthread_mutex_unlock(&j->lock);
    if (!last)
        return;
    cj_executable_free(j->result);
    pthread_cond_destroy(&j->done_cv);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

static void *compile_job_main(void *arg)
{
    compile_job *j = arg;
    cj_executable *x = cj_compile(j->graph, &j->options, &j->err);
    pthread_mutex_lock(&j->lock);
    j->result = x;
    j->done = true;
    pthread_cond_signal(&j->done_cv);
    pthread_mutex_unlock(&j->lock);
    running_remove(j);
    compile_job_let_go(j);
    return NULL;
}

/* Waits (without the GIL) until the job is done or COMPILE_CHECK_NS passed;
 * returns whether it is done. */
static bool wait_a_while(compile_job *j)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += COMPILE_CHECK_NS;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&j->lock);
    while (!j->done && pthread_cond_timedwait(&j->done_cv, &j->lock, &until) == 0) {
    }
    bool done = j->done;
    pthread_mutex_unlock(&j->lock);
    return done;
}

/* cj_compile with options o (whose cancel flag it sets) with the GIL
 * released and signals heard: the new executable, or NULL with an
 * exception (the compile's error, or what a signal handler raised: then
 * nothing compiled is kept). */
cj_executable *compile_with_gil_released(const cj_graph *g, const cj_compile_options *o)
{
    compile_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    *j = (compile_job){.graph = g, .options = *o, .holders = 2};
    j->options.cancel = &j->cancel;
    pthread_condattr_t cattr;
    pthread_attr_t tattr;
    pthread_t thread;
    bool interrupted = false;
    pthread_mutex_init(&j->lock, NULL);
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&j->done_cv, &cattr);
    pthread_condattr_destroy(&cattr);
    pthread_attr_init(&tattr);
    pthread_attr_setstacksize(&tattr, COMPILE_STACK_BYTES);
    pthread_attr_setdetachstate(&tattr, PTHREAD_CREATE_DETACHED);
    if (!running_jobs.wait_registered)   /* under the GIL: once */
        running_jobs.wait_registered = Py_AtExit(wait_for_running_compiles) == 0;
    running_add(j);
    PyThreadState *ts = PyEval_SaveThread();
    if (pthread_create(&thread, &tattr, compile_job_main, j) != 0) {
        compile_job_main(j);    /* no thread to be had: compile here, deaf to signals */
    } else {
        while (!wait_a_while(j)) {
            if (interrupted)
                continue;       /* stopping: the compile sees the flag at its next check */
            PyEval_RestoreThread(ts);
            if (PyErr_CheckSignals() < 0) {
                interrupted = true;
                j->cancel = true;
            }
            ts = PyEval_SaveThread();
        }
    }
    pthread_attr_destroy(&tattr);
    cj_executable *x = NULL;
    if (!interrupted) {         /* else it is freed with the job, even if it finished */
        x = j->result;
        j->result = NULL;
    }
    cj_error err = j->err;
    compile_job_let_go(j);      /* the compile thread is done with it, or about to be */
    PyEval_RestoreThread(ts);
    if (interrupted) {
        cj_stats_cancelled();
        return NULL;            /* with the signal handler's exception */
    }
    if (x == NULL)
        cj_py_raise(&err);
    return x;
}

/* cj_run_poll's question, asked between kernel groups with the GIL
 * released: take it back, run the signal handlers, release it again. */
bool run_interrupted(void *ctx)
{
    PyThreadState **ts = ctx;
    PyEval_RestoreThread(*ts);
    int r = PyErr_CheckSignals();
    *ts = PyEval_SaveThread();
    return r < 0;
}

/* Executables whose machine code is still held (memory_stats()'s
 * live_executables); changed under the GIL only. */
Py_ssize_t live_executables;

/* Frees an Executable's code without the GIL: removing it from the JIT
 * waits for a compile that another thread may be running. */
void free_executable_gil_released(cj_executable *x)
{
    if (x == NULL)
        return;
    live_executables--;
    Py_BEGIN_ALLOW_THREADS
    cj_executable_free(x);
    Py_END_ALLOW_THREADS
}
