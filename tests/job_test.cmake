# The transport test matrix. Every multi-process test is registered by
# rivet_job_test(), once per transport configuration and job shape it
# names, so that this file alone says which configurations exist and how a
# test runs over each.
#
# Transport configurations (job file in configs/; ctest label):
#   ucx-shm       UCX over shared memory          test-ucx-shm.yaml  ucx-shm
#   ucx-tcp       UCX over TCP on loopback        test-ucx-tcp.yaml  ucx-tcp
#   ucx-hosts     UCX across two hosts: shared    test-ucx-hosts.yaml multinode
#                 memory within a host, TCP
#                 between them (scripts/
#                 multinode.sh: two sets of
#                 namespaces, under mpirun)
#   ucx-rc        UCX over RC queue pairs         test-ucx-rc.yaml   ucx-rc
#   verbs         rivet's libibverbs transport,   test-verbs.yaml    verbs
#                 queue pairs per thread
#                 (transport.verbs.qp_sharing: thread)
#   verbs-shared  the same, queue pairs shared    test-verbs.yaml    verbs
#                 by a process's threads
#                 (transport.verbs.qp_sharing: process)
#   verbs-hosts,  verbs and ucx-rc across two     as verbs, ucx-rc   rdma-hosts
#   ucx-rc-hosts  Soft-RoCE hosts (scripts/
#                 rdma-hosts.sh: two guests)
#
# ucx-hosts runs its jobs through scripts/multinode.sh instead of rivetrun
# (same options): half the processes on each host. It needs root and
# mpirun, else its tests report themselves skipped; `make check-multinode`
# runs them (label multinode), `make check` leaves them out.
#
# The RDMA configurations need an RDMA device. They are registered in every build
# and run through tests/rdma_device.sh, which reports them skipped to ctest
# where the device is absent. A build made on a machine without a device
# thus holds them too, and `make check-verbs` runs that very build's
# `ctest -L '^(verbs|ucx-rc)$'` inside a Soft-RoCE guest, while a machine
# with a device runs them in `make check`.
#
# Every test also carries the label of its layer (core, transport, am,
# rma, ...), so `ctest -L am` runs one layer's tests.

# The exit status ctest counts as "skipped" (SKIP_RETURN_CODE): a job
# whose checks were all skipped, or a test whose device is absent.
set(RIVET_TEST_SKIP_CODE 77)
# Seconds ctest gives a job beyond the launcher's own --timeout, so that a
# hung job ends through rivetrun, which names the rank that hung.
set(RIVET_TEST_TIMEOUT_MARGIN 60)

# The device of the RDMA configurations: the first one this machine has,
# else rxe0, the Soft-RoCE device of the `make check-verbs` guest.
file(GLOB rivet_ib_devices /sys/class/infiniband/*)
set(rivet_default_device rxe0)
if(rivet_ib_devices)
  list(GET rivet_ib_devices 0 rivet_default_device)
  get_filename_component(rivet_default_device ${rivet_default_device} NAME)
endif()
set(RIVET_TEST_RDMA_DEVICE ${rivet_default_device} CACHE STRING
  "RDMA device of the verbs and ucx-rc tests (rxe0 for make check-verbs)")
set(RIVET_TEST_RDMA_PORT 1 CACHE STRING
  "Port of RIVET_TEST_RDMA_DEVICE used by the verbs and ucx-rc tests")
set(RDMA_DEVICE_SH ${PROJECT_SOURCE_DIR}/tests/rdma_device.sh)
set(rivet_rdma_dev ${RIVET_TEST_RDMA_DEVICE})
set(rivet_rdma_port ${RIVET_TEST_RDMA_PORT})

# Seconds the launcher gives a job by default. RDMA jobs get more: under
# make check-verbs they run in a 2-vCPU guest emulated in software.
set(rivet_job_timeout 280)
set(rivet_rdma_job_timeout 900)

# The configurations: job file, environment, label, whether they need the
# RDMA device, and the launcher timeout of their jobs.
set(RIVET_TEST_TRANSPORTS ucx-shm ucx-tcp ucx-hosts ucx-rc verbs
  verbs-shared)
set(rivet_tp_ucx-shm_file test-ucx-shm.yaml)
set(rivet_tp_ucx-shm_env "")
set(rivet_tp_ucx-shm_label ucx-shm)
set(rivet_tp_ucx-shm_rdma FALSE)
set(rivet_tp_ucx-shm_timeout ${rivet_job_timeout})
set(rivet_tp_ucx-tcp_file test-ucx-tcp.yaml)
set(rivet_tp_ucx-tcp_env "")
set(rivet_tp_ucx-tcp_label ucx-tcp)
set(rivet_tp_ucx-tcp_rdma FALSE)
set(rivet_tp_ucx-tcp_timeout ${rivet_job_timeout})
set(rivet_tp_ucx-hosts_file test-ucx-hosts.yaml)
set(rivet_tp_ucx-hosts_env "")
set(rivet_tp_ucx-hosts_label multinode)
set(rivet_tp_ucx-hosts_rdma FALSE)
set(rivet_tp_ucx-hosts_timeout ${rivet_job_timeout})
set(rivet_tp_ucx-hosts_launcher ${PROJECT_SOURCE_DIR}/scripts/multinode.sh)
set(rivet_tp_ucx-rc_file test-ucx-rc.yaml)
set(rivet_tp_ucx-rc_env
  RIVET_TRANSPORT_UCX_NET_DEVICES=${rivet_rdma_dev}:${rivet_rdma_port})
set(rivet_tp_ucx-rc_label ucx-rc)
set(rivet_tp_ucx-rc_rdma TRUE)
set(rivet_tp_ucx-rc_timeout ${rivet_rdma_job_timeout})
foreach(tp verbs verbs-shared)
  set(rivet_tp_${tp}_file test-verbs.yaml)
  set(rivet_tp_${tp}_env RIVET_TRANSPORT_VERBS_DEVICE=${rivet_rdma_dev}
      RIVET_TRANSPORT_VERBS_PORT=${rivet_rdma_port})
  set(rivet_tp_${tp}_label verbs)
  set(rivet_tp_${tp}_rdma TRUE)
  set(rivet_tp_${tp}_timeout ${rivet_rdma_job_timeout})
endforeach()
list(APPEND rivet_tp_verbs_env RIVET_TRANSPORT_VERBS_QP_SHARING=thread)
list(APPEND rivet_tp_verbs-shared_env RIVET_TRANSPORT_VERBS_QP_SHARING=process)
# Two RDMA hosts: the same job files across the two Soft-RoCE guests of
# scripts/rdma-hosts.sh (its launcher, under mpirun, half the processes
# on each), which make check-verbs boots after its one-guest tests; label
# rdma-hosts. Anywhere else the launcher reports them skipped.
foreach(base verbs ucx-rc)
  set(tp ${base}-hosts)
  list(APPEND RIVET_TEST_TRANSPORTS ${tp})
  foreach(what file env rdma timeout)
    set(rivet_tp_${tp}_${what} ${rivet_tp_${base}_${what}})
  endforeach()
  set(rivet_tp_${tp}_label rdma-hosts)
  set(rivet_tp_${tp}_launcher ${PROJECT_SOURCE_DIR}/scripts/rdma-hosts.sh)
endforeach()

# The progress engine's modes (progress.mode) over a transport: the same
# configuration, named <transport>-<mode>, with the worker threads'
# operations offloaded to an executor thread per process (thread, dynamic)
# or posted under a lock to one shared transport worker (direct).
#   ucx-shm-thread ucx-shm-dynamic ucx-shm-direct
#   ucx-tcp-thread ucx-tcp-dynamic
#   ucx-hosts-dynamic
#   verbs-thread   verbs-dynamic
foreach(derived ucx-shm:thread ucx-shm:dynamic ucx-shm:direct ucx-tcp:thread
    ucx-tcp:dynamic ucx-hosts:dynamic verbs:thread verbs:dynamic)
  string(REPLACE ":" ";" parts ${derived})
  list(GET parts 0 base)
  list(GET parts 1 mode)
  set(tp ${base}-${mode})
  list(APPEND RIVET_TEST_TRANSPORTS ${tp})
  foreach(what file label rdma timeout launcher)
    set(rivet_tp_${tp}_${what} ${rivet_tp_${base}_${what}})
  endforeach()
  set(rivet_tp_${tp}_env ${rivet_tp_${base}_env} RIVET_PROGRESS_MODE=${mode})
endforeach()

# rivet_job_test(NAME PROGRAM target LAYER layer
#                TRANSPORTS config... SHAPES PxT...
#                [ENV VAR=value...] [ARGS arg...] [WRAP command...]
#                [TIMEOUT seconds] [LABELS label...])
#
# Registers one ctest per transport configuration and shape: PROGRAM (a
# target) run through rivetrun as P processes of T worker threads with the
# configuration's job file. NAME is the test's name, in which @TRANSPORT@
# and @SHAPE@ stand for the configuration and the shape (conformance-
# @TRANSPORT@-@SHAPE@ gives conformance-ucx-shm-2x1); names must come out
# unique. ARGS are the program's arguments (default: the test's name, which
# the CMocka job tests print as their group name). ENV adds to, or
# overrides, the configuration's environment. WRAP is a command the job
# command is appended to, such as tests/expect.sh with its checks and
# "--" (a regular expression there keeps its square brackets balanced:
# CMake does not split a list inside brackets). TIMEOUT is the launcher's
# (rivetrun --timeout), by default the configuration's. The test's labels
# are the configuration's, LAYER, and LABELS.
function(rivet_job_test name)
  cmake_parse_arguments(PARSE_ARGV 1 J "" "PROGRAM;LAYER;TIMEOUT"
    "TRANSPORTS;SHAPES;ENV;ARGS;WRAP;LABELS")
  if(J_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "rivet_job_test(${name}): unknown arguments "
      "${J_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required PROGRAM LAYER TRANSPORTS SHAPES)
    if(NOT J_${required})
      message(FATAL_ERROR "rivet_job_test(${name}): ${required} is required")
    endif()
  endforeach()

  # Variables the test's ENV sets replace the configuration's.
  set(overridden "")
  foreach(kv IN LISTS J_ENV)
    string(REGEX REPLACE "=.*" "" var "${kv}")
    list(APPEND overridden ${var})
  endforeach()

  foreach(tp IN LISTS J_TRANSPORTS)
    if(NOT tp IN_LIST RIVET_TEST_TRANSPORTS)
      message(FATAL_ERROR "rivet_job_test(${name}): no transport "
        "configuration '${tp}' (there are: ${RIVET_TEST_TRANSPORTS})")
    endif()
    set(timeout ${rivet_tp_${tp}_timeout})
    if(J_TIMEOUT)
      set(timeout ${J_TIMEOUT})
    endif()
    foreach(shape IN LISTS J_SHAPES)
      if(NOT shape MATCHES "^([0-9]+)x([0-9]+)$")
        message(FATAL_ERROR "rivet_job_test(${name}): shape '${shape}' is "
          "not PROCESSESxTHREADS")
      endif()
      set(np ${CMAKE_MATCH_1})
      set(nt ${CMAKE_MATCH_2})
      string(REPLACE "@TRANSPORT@" "${tp}" test "${name}")
      string(REPLACE "@SHAPE@" "${shape}" test "${test}")
      get_property(known GLOBAL PROPERTY RIVET_JOB_TESTS)
      if(test IN_LIST known)
        message(FATAL_ERROR "rivet_job_test(${name}): test '${test}' is "
          "registered twice; put @TRANSPORT@ and @SHAPE@ in its name")
      endif()
      set_property(GLOBAL APPEND PROPERTY RIVET_JOB_TESTS ${test})

      set(args ${test})
      if(DEFINED J_ARGS)
        set(args ${J_ARGS})
      endif()
      set(launcher ${RIVETRUN})
      if(rivet_tp_${tp}_launcher)
        set(launcher ${rivet_tp_${tp}_launcher})
      endif()
      set(cmd ${launcher} --timeout ${timeout} -n ${np}
          -c ${RIVET_CONFIGS}/${rivet_tp_${tp}_file}
          $<TARGET_FILE:${J_PROGRAM}> ${args})
      if(J_WRAP)
        set(cmd ${J_WRAP} ${cmd})
      endif()
      if(rivet_tp_${tp}_rdma)
        set(cmd ${RDMA_DEVICE_SH} ${rivet_rdma_dev} -- ${cmd})
      endif()

      set(env "")
      foreach(kv RIVET_JOB_THREADS=${nt} ${rivet_tp_${tp}_env})
        string(REGEX REPLACE "=.*" "" var "${kv}")
        if(NOT var IN_LIST overridden)
          list(APPEND env "${kv}")
        endif()
      endforeach()
      list(APPEND env ${J_ENV})

      set(labels ${rivet_tp_${tp}_label} ${J_LAYER} ${J_LABELS})
      math(EXPR ctest_timeout "${timeout} + ${RIVET_TEST_TIMEOUT_MARGIN}")
      add_test(NAME ${test} COMMAND ${cmd})
      set_tests_properties(${test} PROPERTIES
        ENVIRONMENT "${env}"
        TIMEOUT ${ctest_timeout}
        SKIP_RETURN_CODE ${RIVET_TEST_SKIP_CODE}
        LABELS "${labels}")
      if(rivet_tp_${tp}_launcher)
        # Two hosts of the whole machine: alone, or their daemons' and
        # UCX's timeouts trip on a machine shared with other jobs.
        set_tests_properties(${test} PROPERTIES RUN_SERIAL TRUE)
      endif()
    endforeach()
  endforeach()
endfunction()

# rivet_skipped_test(NAME WHY reason [LABELS label...])
#
# Registers a test that this build cannot run, because a tool it needs
# (mpirun, a compiler's ThreadSanitizer) was not found at configure time,
# as one that says why and exits with RIVET_TEST_SKIP_CODE: ctest shows it
# skipped in every build, instead of the build showing nothing.
function(rivet_skipped_test name)
  cmake_parse_arguments(PARSE_ARGV 1 S "" "WHY" "LABELS")
  add_test(NAME ${name} COMMAND sh -c
    "echo '${name}: ${S_WHY}: skipped'; exit ${RIVET_TEST_SKIP_CODE}")
  set_tests_properties(${name} PROPERTIES
    SKIP_RETURN_CODE ${RIVET_TEST_SKIP_CODE} LABELS "${S_LABELS}")
endfunction()
