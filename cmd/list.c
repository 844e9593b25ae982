#include "cmd.h"
int cmd_list(int argc, const char **argv) { return ovs_not_built("list"); }
