/* compile_hold.c - the hold tests put on compiles (cj_jit_hold_compiles).
 *
 * A test of Ctrl-C during a compile needs the signal to land while LLVM
 * works, on any machine and under any load.  A thread that sends SIGINT
 * once "LLVM has started" races the compile, and on busy cores it can lose
 * (the compile ends first).  So while a test holds compiles, each of a
 * compile's module jobs (jit_cpu.c) waits before its first piece until the
 * compile is cancelled or the hold is lifted, and counts itself as held
 * meanwhile: the test sends its signal once something is held.  A hold
 * lasts at most two minutes, so a test that forgets to lift it fails slowly
 * instead of hanging. */
#include <stdatomic.h>
#include <time.h>

#include "codegen.h"
#include "stats.h"

#define CJ_HOLD_MAX_NS (120LL * 1000 * 1000 * 1000)

static _Atomic bool hold_compiles;
static _Atomic int compiles_held;

bool cj_jit_hold_compiles(bool on) { return atomic_exchange(&hold_compiles, on); }

int cj_jit_compiles_held(void) { return atomic_load(&compiles_held); }

void cj_jit_wait_while_held(const cj_cancel *cancel) {
    if (!atomic_load(&hold_compiles)) return;
    atomic_fetch_add(&compiles_held, 1);
    int64_t t0 = cj_clock_ns();
    while (atomic_load(&hold_compiles) && !cj_cancelled(cancel) && cj_clock_ns() - t0 < CJ_HOLD_MAX_NS)
        nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
    atomic_fetch_sub(&compiles_held, 1);
}
