/* Callgrind client requests for tools/bench/workloads.py, loaded with ctypes:
 * torch._C._valgrind_toggle() switches collection, not instrumentation. */
#include <valgrind/callgrind.h>

void measure_begin(void) {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
    CALLGRIND_TOGGLE_COLLECT;
}

void measure_end(void) {
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS;
    CALLGRIND_STOP_INSTRUMENTATION;
}
