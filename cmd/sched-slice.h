#ifndef OVSNAP_SCHED_SLICE_H
#define OVSNAP_SCHED_SLICE_H

/* Ask for a 0.1 ms EEVDF slice for the calling thread (Linux 6.12+; a
 * no-op elsewhere), keeping its nice value and its policy (none under a
 * real-time, idle or deadline one).  Threads it creates later
 * inherit it: ovsnap-viewd asks before libfuse starts its workers. */
void sched_short_slice(void);

#endif
