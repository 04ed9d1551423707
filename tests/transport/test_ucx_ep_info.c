/*
 * What the UCX plugin reads in UCX's own description of an endpoint
 * (ucp_ep_print_info; transports/ucx/ucx_ep_info.c), on text captured
 * from UCX 1.13.1: the transports of the lanes, shown to the user by
 * class of processes, and whether RMA would run over TCP or not at all,
 * in which case rivet emulates it over active messages. UCX 1.13 has no
 * query for either, so the plugin parses the text; these are the texts it
 * must read right.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "ucx_internal.h"

/* Two processes of one host (configs/test-ucx-shm.yaml: tls sm,self). */
static const char shm_info[] =
    "#\n"
    "# UCP endpoint\n"
    "#\n"
    "#               peer: <no debug data>\n"
    "#                 lane[0]:  1:sysv/memory.0 md[1]           -> "
    "md[1]/sysv/sysdev[255] amo#0 am am_bw#0\n"
    "#                 lane[1]:  2:posix/memory.0 md[2]          -> "
    "md[2]/posix/sysdev[255] amo#1\n"
    "#                 lane[2]:  3:cma/memory.0 md[3]            -> "
    "md[3]/cma/sysdev[255] rma_bw#0\n"
    "#\n"
    "#                 am_send: "
    "0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)\n"
    "#\n"
    "#                  rma_bw: mds rndv_rkey_size 9\n";

/* Over TCP (configs/test-ucx-tcp.yaml: tls tcp,self): an RMA lane, but
 * TCP's, which UCX runs with the target's progress. */
static const char tcp_info[] =
    "#\n"
    "# UCP endpoint\n"
    "#\n"
    "#               peer: <no debug data>\n"
    "#                 lane[0]:  1:tcp/lo.0 md[1]                -> "
    "md[1]/tcp/sysdev[255] rma_bw#0 am am_bw#0 wireup\n"
    "#\n"
    "#                 am_send: "
    "0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)\n";

/* The other host of a two-host job (scripts/multinode.sh). */
static const char host_info[] =
    "#                 lane[0]:  1:tcp/rvmn4242a.0 md[1]         -> "
    "md[1]/tcp/sysdev[255] rma_bw#0 am am_bw#0 wireup\n";

/* rc_verbs on a Soft-RoCE device (configs/test-ucx-rc.yaml). */
static const char rc_info[] =
    "#                 lane[0]:  8:rc_verbs/rxe0:1.0 md[4]       -> "
    "md[4]/ib/sysdev[255] rma_bw#0 amo#0 am am_bw#0\n"
    "#                 lane[1]:  3:posix/memory.0 md[2]          -> "
    "md[2]/posix/sysdev[255] rma#0\n";

/* No RMA lane at all (UCX would emulate RMA itself). */
static const char am_only_info[] =
    "#                 lane[0]:  0:self/memory0.0 md[0]          -> "
    "md[0]/self/sysdev[255] am am_bw#0\n";

static rv_transport_t *tp_new(void)
{
    static rv_transport_t tp;
    memset(&tp, 0, sizeof(tp));
    tp.described_upto = -1;
    return &tp;
}

static void test_rma_emulation(void **state)
{
    (void)state;
    assert_false(rv_ucx_rma_needs_emulation(shm_info));
    assert_true(rv_ucx_rma_needs_emulation(tcp_info));
    assert_true(rv_ucx_rma_needs_emulation(host_info));
    assert_false(rv_ucx_rma_needs_emulation(rc_info));
    assert_true(rv_ucx_rma_needs_emulation(am_only_info));
    /* Nothing UCX said, or text that is no lane: no native RMA known. */
    assert_true(rv_ucx_rma_needs_emulation(""));
    assert_true(rv_ucx_rma_needs_emulation(NULL));
    assert_true(
        rv_ucx_rma_needs_emulation("#   rma_bw: mds rndv_rkey_size 9\n"));
}

/* Where UCX's atomics run, as ucp_worker_print_info says, captured from
 * UCX 1.13.1 (ucx_info -w -u ra): on the CPU (sm), in software (tcp: only
 * self; Soft-RoCE's rc_verbs: none), or on a NIC (a made-up line in the
 * same format: rc_mlx5), and an unknown transport counted as a NIC. */
static void test_atomics_on_device(void **state)
{
    (void)state;
    assert_false(rv_ucx_atomics_on_device(
        "#\n#                 atomics: 0:self/memory0, 1:sysv/memory, "
        "2:posix/memory\n#\n"));
    assert_false(
        rv_ucx_atomics_on_device("#                 atomics: 0:self/memory0\n"));
    assert_false(rv_ucx_atomics_on_device("#                 atomics: \n"));
    assert_true(rv_ucx_atomics_on_device(
        "#                 atomics: 3:rc_mlx5/mlx5_0:1, 4:dc_mlx5/mlx5_0:1\n"));
    assert_true(rv_ucx_atomics_on_device(
        "#                 atomics: 0:self/memory0, 5:gga_mlx5/mlx5_0:1\n"));
    /* Nothing said: as UCX 1.13 with no atomics at all. */
    assert_false(rv_ucx_atomics_on_device(""));
    assert_false(rv_ucx_atomics_on_device(NULL));
    assert_false(rv_ucx_atomics_on_device("#   address: 190 bytes\n"));
    /* Another line's text is not read as the list. */
    assert_false(rv_ucx_atomics_on_device(
        "#                 atomics: 1:sysv/memory\n#   lane[0]: 8:rc_verbs/rxe0\n"));
}

/* One host's process and two of another: two classes, in words as the
 * job's transport line prints them. */
static void test_classes(void **state)
{
    (void)state;
    rv_transport_t *tp = tp_new();
    char out[512];
    assert_true(rv_ucx_record_lanes(tp, 1, shm_info, false));
    assert_true(rv_ucx_record_lanes(tp, 2, host_info, true));
    assert_false(rv_ucx_record_lanes(tp, 3, host_info, true));
    assert_false(rv_ucx_record_lanes(tp, 3, host_info, true)); /* again */
    assert_int_equal(tp->nclasses, 2);
    rv_ucx_describe_classes(tp, out, sizeof(out));
    assert_string_equal(out,
                        "sysv/memory.0, posix/memory.0, cma/memory.0 (rank 1); "
                        "tcp/rvmn4242a.0 (2 ranks, 2..3; RMA over active "
                        "messages)");
}

/* Text with no lane is no class; past RV_UCX_MAX_CLASSES classes the
 * line says "others". */
static void test_classes_odd(void **state)
{
    (void)state;
    rv_transport_t *tp = tp_new();
    char out[512];
    assert_false(rv_ucx_record_lanes(tp, 1, "no lanes here\n", false));
    assert_int_equal(tp->nclasses, 0);
    const char *infos[] = {shm_info, tcp_info, host_info, rc_info,
                           am_only_info};
    for (int i = 0; i < 5; i++)
        rv_ucx_record_lanes(tp, 2 + i, infos[i], false);
    assert_int_equal(tp->nclasses, RV_UCX_MAX_CLASSES);
    assert_true(tp->classes_full);
    rv_ucx_describe_classes(tp, out, sizeof(out));
    assert_non_null(strstr(out, "rc_verbs/rxe0:1.0, posix/memory.0 (rank 5)"));
    assert_non_null(strstr(out, "; others"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rma_emulation),
        cmocka_unit_test(test_atomics_on_device),
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_classes_odd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
