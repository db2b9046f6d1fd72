/* Callgrind client requests for bench/workloads.py, loaded with ctypes.
 *
 * torch._C._valgrind_toggle() only switches collection, so a worker run
 * with --instr-atstart=no (which imports torch about five times faster
 * under callgrind) needs these to switch instrumentation on around the
 * one trace it measures. Outside valgrind every request is a no-op. */
#include <valgrind/callgrind.h>

void measure_begin(void)
{
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
    CALLGRIND_TOGGLE_COLLECT;
}

void measure_end(void)
{
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS;
    CALLGRIND_STOP_INSTRUMENTATION;
}

int running_on_valgrind(void)
{
    return RUNNING_ON_VALGRIND;
}
