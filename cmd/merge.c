/* ovsnap merge — merge adjacent snapshots (not built yet: see the issue tracker). */
#include "cmd.h"

static struct poptOption merge_options[] = {
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

int cmd_merge(int argc, const char **argv)
{
	poptContext pc;
	int status;

	pc = ovs_popt_parse("merge", argc, argv, merge_options, "SRC A B", &status);
	if (!pc)
		return status;
	poptFreeContext(pc);
	return ovs_not_built("merge");
}
