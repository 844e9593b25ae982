/*
 * ns_lock (daemon-ops.c, "Locking"): a phase-fair reader-writer lock.
 *
 * Changes that move no directory hold it shared, renames of directories
 * and restores exclusive.  glibc's readers-preferred rwlock let a steady
 * stream of unlinks and creates keep a rename of a directory out for as
 * long as the stream lasted; its writer-preferring kind lets a stream of
 * renames keep the other changes out instead.  Here the two take turns:
 *
 *  - once an exclusive holder waits, no new shared holder gets in (but
 *    an urgent one, below): the waiter gets in as soon as the shared
 *    holders it found are done;
 *  - when an exclusive holder leaves, every shared holder that waited
 *    meanwhile gets in before the next exclusive one.
 *
 * So each side waits for at most one turn of the other.
 *
 * Page-cache writeback is urgent: a take forces it out before it raises
 * its barrier (rule 10) and waits for it, so it waits only for an
 * exclusive holder, never for the shared holders a waiting rename waits
 * for (one of them may be preserving for a long time: rule 13).  There is
 * only as much of it as the kernel held dirty.
 *
 * No thread takes it twice (daemon-ops.c keeps ns_held): a shared holder
 * that took it again behind a waiting exclusive one would wait for itself.
 */
#include "daemon.h"

void ns_lock_shared(struct ns_lock *l, bool urgent)
{
	uint64_t turn;
	bool waited = false;

	pthread_mutex_lock(&l->mutex);
	turn = l->exclusive_turns;
	while (l->exclusive ||
	       (!urgent && l->exclusive_waiting && l->exclusive_turns == turn)) {
		if (!waited)
			l->shared_waiting++;
		waited = true;
		pthread_cond_wait(&l->shared_cond, &l->mutex);
	}
	if (waited) {
		l->shared_waiting--;
		/* One of those the last exclusive holder let in first. */
		if (l->shared_admitted)
			l->shared_admitted--;
	}
	l->shared++;
	pthread_mutex_unlock(&l->mutex);
}

void ns_lock_exclusive(struct ns_lock *l)
{
	pthread_mutex_lock(&l->mutex);
	l->exclusive_waiting++;
	while (l->exclusive || l->shared || l->shared_admitted)
		pthread_cond_wait(&l->exclusive_cond, &l->mutex);
	l->exclusive_waiting--;
	l->exclusive = true;
	pthread_mutex_unlock(&l->mutex);
}

void ns_unlock(struct ns_lock *l)
{
	pthread_mutex_lock(&l->mutex);
	if (l->exclusive) {
		l->exclusive = false;
		l->exclusive_turns++;
		/* The shared holders that waited through this turn go
		 * before the next exclusive holder. */
		l->shared_admitted = l->shared_waiting;
		pthread_cond_broadcast(&l->shared_cond);
		pthread_cond_broadcast(&l->exclusive_cond);
	} else if (--l->shared == 0 && l->exclusive_waiting) {
		pthread_cond_broadcast(&l->exclusive_cond);
	}
	pthread_mutex_unlock(&l->mutex);
}

void ns_lock_waiting(struct ns_lock *l, unsigned *exclusive, unsigned *shared)
{
	pthread_mutex_lock(&l->mutex);
	*exclusive = l->exclusive_waiting;
	*shared = l->shared_waiting;
	pthread_mutex_unlock(&l->mutex);
}
