/* ovsnap drop — delete snapshots (not built yet: see the issue tracker). */
#include "cmd.h"

static struct poptOption drop_options[] = {
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

int cmd_drop(int argc, const char **argv)
{
	poptContext pc;
	int status;

	pc = ovs_popt_parse("drop", argc, argv, drop_options, "SRC SNAP...", &status);
	if (!pc)
		return status;
	poptFreeContext(pc);
	return ovs_not_built("drop");
}
