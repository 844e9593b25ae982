/*
 * The assertion of the C unit tests: count a failure and say where, then
 * go on, so one run reports every broken check.  main() ends with
 * "return failures ? 1 : 0;".
 */
#ifndef OVSNAP_TEST_CHECK_H
#define OVSNAP_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);	\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
		failures++;						\
	}								\
} while (0)

#endif
