/* ovsnap umount — unmount a snapshot view (not built yet: see the issue tracker). */
#include "cmd.h"

static struct poptOption umount_options[] = {
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

int cmd_umount(int argc, const char **argv)
{
	poptContext pc;
	int status;

	pc = ovs_popt_parse("umount", argc, argv, umount_options, "TARGET", &status);
	if (!pc)
		return status;
	poptFreeContext(pc);
	return ovs_not_built("umount");
}
