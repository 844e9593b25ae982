/* ovsnap mount — mount a read-only view of a snapshot (not built yet: see the issue tracker). */
#include "cmd.h"

static struct poptOption mount_options[] = {
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

int cmd_mount(int argc, const char **argv)
{
	poptContext pc;
	int status;

	pc = ovs_popt_parse("mount", argc, argv, mount_options, "SRC SNAP TARGET", &status);
	if (!pc)
		return status;
	poptFreeContext(pc);
	return ovs_not_built("mount");
}
