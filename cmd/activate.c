#include "cmd.h"
int cmd_activate(int argc, const char **argv) { return ovs_not_built("activate"); }
int cmd_deactivate(int argc, const char **argv) { return ovs_not_built("deactivate"); }
