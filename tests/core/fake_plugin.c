/* Broken transport plugins for the loader's tests: built twice, once
 * without the ops symbol and once with a wrong ABI version. */
#include "rv_transport.h"

#ifdef FAKE_WRONG_ABI
const rv_transport_ops_t rv_transport_ops = {
    .name = "wrongabi",
    .abi_version = RV_TRANSPORT_ABI_VERSION + 100,
};
#else
int rv_fake_plugin_marker;
int rv_fake_plugin_marker = 1;
#endif
