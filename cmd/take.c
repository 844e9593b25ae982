#include "cmd.h"
int cmd_take(int argc, const char **argv) { return ovs_not_built("take"); }
