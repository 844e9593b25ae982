/* ovsnap fsck — check and repair a volume (not built yet: see the issue tracker). */
#include "cmd.h"

static struct poptOption fsck_options[] = {
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

int cmd_fsck(int argc, const char **argv)
{
	poptContext pc;
	int status;

	pc = ovs_popt_parse("fsck", argc, argv, fsck_options, "SRC", &status);
	if (!pc)
		return status;
	poptFreeContext(pc);
	return ovs_not_built("fsck");
}
