# The transport test matrix. Every multi-process test is registered by
# rivet_job_test(), once per cell of the matrix and job shape it asks for,
# so that this file alone says which configurations exist, how a test runs
# over each, and which cells are not run and why. The matrix has two axes:
# the transport configurations below and the progress engine's modes
# (inline, thread, dynamic, direct). A test says what it needs of a
# transport (NEEDS: ucx, verbs, rdma, one-host, hosts, emulated; or ON,
# a list) and which modes (MODES), and runs on every cell that has them,
# less the exceptions (RIVET_TEST_EXCEPTIONS: the cells cut, each with its
# reason); RIVET_TEST_FULL moves cells from make check to check-full.
# The build writes every cell asked for, run or not and why, to
# test-matrix.csv.
#
# Transport configurations (job file in configs/; ctest label):
#   ucx-shm       UCX over shared memory          test-ucx-shm.yaml  ucx-shm
#   ucx-tcp       UCX over TCP on loopback        test-ucx-tcp.yaml  ucx-tcp
#   ucx-hosts     UCX across two hosts: shared    test-ucx-hosts.yaml multinode
#                 memory within a host, TCP
#                 between them (scripts/
#                 multinode.sh: two sets of
#                 namespaces, under mpirun)
#   ucx-hosts-srun  the same two hosts under       test-ucx-hosts.yaml multinode
#                 Slurm's srun and its PMIx
#                 plugin (a cluster of the two
#                 made for each job)
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
# (same options): half the processes on each host; ucx-hosts-srun through
# the same script with RIVET_TEST_MN_LAUNCHER=srun. They need root and
# mpirun (Slurm's daemons and munge), else their tests report themselves
# skipped; `make check-multinode`
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
set(RIVET_TEST_BASES ucx-shm ucx-tcp ucx-hosts ucx-hosts-srun ucx-rc verbs
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
foreach(what file label rdma timeout launcher)
  set(rivet_tp_ucx-hosts-srun_${what} ${rivet_tp_ucx-hosts_${what}})
endforeach()
set(rivet_tp_ucx-hosts-srun_env RIVET_TEST_MN_LAUNCHER=srun)
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
  list(APPEND RIVET_TEST_BASES ${tp})
  foreach(what file env rdma timeout)
    set(rivet_tp_${tp}_${what} ${rivet_tp_${base}_${what}})
  endforeach()
  set(rivet_tp_${tp}_label rdma-hosts)
  set(rivet_tp_${tp}_launcher ${PROJECT_SOURCE_DIR}/scripts/rdma-hosts.sh)
endforeach()

# The matrix's second axis, the progress engine's modes (progress.mode):
# every configuration above in each, named <transport>-<mode> (inline, the
# default, keeps the transport's name), with the worker threads'
# operations offloaded to an executor thread per process (thread,
# dynamic) or posted under a lock to one shared transport worker
# (direct).
set(RIVET_TEST_MODES inline thread dynamic direct)
foreach(base IN LISTS RIVET_TEST_BASES)
  foreach(mode thread dynamic direct)
    set(tp ${base}-${mode})
    foreach(what file label rdma timeout launcher)
      set(rivet_tp_${tp}_${what} ${rivet_tp_${base}_${what}})
    endforeach()
    set(rivet_tp_${tp}_env ${rivet_tp_${base}_env} RIVET_PROGRESS_MODE=${mode})
  endforeach()
endforeach()

# What each configuration is, for a test to say what it needs (NEEDS):
#   ucx, verbs  the plugin
#   rdma        an RDMA device (a Soft-RoCE guest under make check-verbs)
#   one-host    rivetrun's jobs on this machine
#   hosts       a job across two hosts
#   emulated    UCX's one-sided operations emulated over its AMs where
#               the transport has none (shm, tcp)
set(rivet_tp_ucx-shm_caps ucx one-host emulated)
set(rivet_tp_ucx-tcp_caps ucx one-host emulated)
set(rivet_tp_ucx-hosts_caps ucx hosts emulated)
set(rivet_tp_ucx-hosts-srun_caps ucx hosts emulated)
set(rivet_tp_ucx-rc_caps ucx rdma one-host)
set(rivet_tp_verbs_caps verbs rdma one-host)
set(rivet_tp_verbs-shared_caps verbs rdma one-host)
set(rivet_tp_verbs-hosts_caps verbs rdma hosts)
set(rivet_tp_ucx-rc-hosts_caps ucx rdma hosts)

# The exceptions: cells of the matrix a test that asks for them does not
# run, and why, in this one table. A row is
#   "TEST CONFIGURATION WHY"
# two regular expressions without spaces, over the test's name as
# registered (with @TRANSPORT@ and @SHAPE@ in it) and over the
# configuration, then the reason. Every cell a test asked for, run or not, is listed with its
# reason in the build's test-matrix.csv.
set(RIVET_TEST_EXCEPTIONS
  # make check-verbs runs every RDMA test in a 2-vCPU guest whose RDMA
  # device is emulated in software, inside CI's hour: the progress modes
  # run over one RDMA configuration, verbs with a queue pair per thread.
  "^(am|rma|epoch|conformance|mcts|store)- ^(ucx-rc|verbs-shared)-(thread|dynamic|direct)$ RDMA guest time: verbs carries the progress modes"
  "^(am|rma|epoch|conformance)- ^verbs-direct$ RDMA guest time: direct differs from thread only in who posts, checked over UCX"
  "^(mcts|store)- ^verbs-(thread|dynamic|direct)$ RDMA guest time: am, rma, epoch and conformance carry the modes over verbs"
  # The search's and the store's variants (aggregation, owners,
  # thresholds, eviction) differ above the transport; over RDMA the guest
  # runs each layer's plain test (a search plays 50 times slower there).
  "^(mcts-ttt-|mcts-@TRANSPORT@-@SHAPE@-|store-@TRANSPORT@-@SHAPE@-|store-evict-) ^(ucx-rc|verbs|verbs-shared)$ RDMA guest time: the variants differ above the transport, checked over UCX shm and tcp"
  "^(mcts|store)-@TRANSPORT@-@SHAPE@$ ^(ucx-rc|verbs-shared)$ RDMA guest time: the layer runs over verbs there (mcts-verbs-2x1, store-verbs-2x1)"
  "-(completers|trad)- ^verbs-thread$ RDMA guest time: completer threads are above the transport, run over verbs under dynamic"
  "^(am|rma)-@TRANSPORT@-(completers|trad)- ^verbs RDMA guest time: completer threads and trad under dynamic are above the transport, checked over UCX shm and tcp, and conformance over verbs"
  "-k2- ^(ucx-rc|verbs) RDMA guest time: two executors per process are above the transport, checked over UCX shm and tcp"
  # Two hosts are whole-machine jobs run one at a time (make
  # check-multinode, ~2 min): dynamic, the mode with the most threads,
  # stands for the others there.
  "^(am|rma|epoch|conformance)- ^ucx-hosts-(thread|direct)$ two-host jobs run alone: dynamic stands for the modes"
  "^(am|conformance)- ^ucx-hosts-srun-(thread|dynamic|direct)$ the launcher is below the progress engine: its modes run under mpirun"
  "^(am|rma|epoch|conformance)- ^(verbs|ucx-rc)-hosts- two emulated RDMA hosts: the modes run over one host's verbs"
  # Two emulated RDMA hosts (two guests joined by a socket) take about 2
  # minutes a job: the layers run over verbs between them, and over UCX
  # rc the conformance and rma suites. am over UCX rc between them hung
  # once in test_buffer_put_get until its 900 s limit (docs/testing.md).
  "^(am|epoch|mcts)- ^ucx-rc-hosts$ two emulated RDMA hosts: am over UCX rc hung once there (900 s), epoch runs over verbs"
)

# Cells that make check leaves to make check-full (label stress), so that
# it stays a few minutes on two cores, in rows as the exceptions'.
set(RIVET_TEST_FULL
  # A search over tcp takes 5 to 17 s; make check runs its plain one
  # (mcts-ucx-tcp-2x2), check-full the variants and the progress modes.
  "^mcts-(ttt-@TRANSPORT@|@TRANSPORT@-@SHAPE@-) ^ucx-tcp$ a search over tcp takes 5 to 17 s"
  "^mcts- ^ucx-(shm|tcp)-(thread|dynamic|direct)$ a search under each progress mode takes 4 to 17 s"
)

# rivet_matrix_match(OUT NAME CELL TABLE): the reason of the first row of
# TABLE (RIVET_TEST_EXCEPTIONS or RIVET_TEST_FULL) that matches test NAME
# over configuration CELL, else empty; the row is marked used.
function(rivet_matrix_match out name cell table)
  set(${out} "" PARENT_SCOPE)
  foreach(row IN LISTS ${table})
    string(REGEX MATCH "^([^ ]+) ([^ ]+) (.+)$" row_ok "${row}")
    if(NOT row_ok)
      message(FATAL_ERROR "${table}: '${row}' is not "
        "\"TEST-REGEX CONFIGURATION-REGEX WHY\" (no ';' in WHY)")
    endif()
    set(test_re "${CMAKE_MATCH_1}")
    set(cell_re "${CMAKE_MATCH_2}")
    set(reason "${CMAKE_MATCH_3}")
    if(name MATCHES "${test_re}" AND cell MATCHES "${cell_re}")
      set_property(GLOBAL APPEND PROPERTY RIVET_TEST_ROWS_USED "${row}")
      set(${out} "${reason}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

# rivet_matrix_cells(OUT NAME NEEDS ON MODES SHAPES): the configurations
# test NAME runs over (see rivet_job_test); every cell asked for goes to
# the global property RIVET_TEST_MATRIX, with the exception's reason when
# it is not run.
function(rivet_matrix_cells out name needs only modes shapes)
  set(bases ${RIVET_TEST_BASES})
  if(only)
    set(bases ${only})
  endif()
  if(NOT modes)
    set(modes inline)
  elseif(modes STREQUAL "all")
    set(modes ${RIVET_TEST_MODES})
  endif()
  string(REPLACE ";" " " shapes "${shapes}")
  set(cells "")
  set(long "")
  foreach(base IN LISTS bases)
    if(NOT base IN_LIST RIVET_TEST_BASES)
      message(FATAL_ERROR "rivet_job_test(${name}): no transport '${base}' "
        "(there are: ${RIVET_TEST_BASES})")
    endif()
    set(has TRUE)
    foreach(cap IN LISTS needs)
      if(NOT cap IN_LIST rivet_tp_${base}_caps)
        set(has FALSE)
      endif()
    endforeach()
    if(NOT has)
      continue()
    endif()
    foreach(mode IN LISTS modes)
      if(NOT mode IN_LIST RIVET_TEST_MODES)
        message(FATAL_ERROR "rivet_job_test(${name}): no progress mode "
          "'${mode}' (there are: ${RIVET_TEST_MODES})")
      endif()
      set(cell ${base}-${mode})
      if(mode STREQUAL "inline")
        set(cell ${base})
      endif()
      set(why run)
      rivet_matrix_match(except "${name}" "${cell}" RIVET_TEST_EXCEPTIONS)
      if(except)
        set(why "${except}")
      endif()
      if(why STREQUAL "run")
        list(APPEND cells ${cell})
        rivet_matrix_match(full "${name}" "${cell}" RIVET_TEST_FULL)
        if(full)
          list(APPEND long ${cell})
          set(why "check-full: ${full}")
        endif()
      endif()
      set_property(GLOBAL APPEND PROPERTY RIVET_TEST_MATRIX
        "${name},${cell},${shapes},\"${why}\"")
    endforeach()
  endforeach()
  set(${out} ${cells} PARENT_SCOPE)
  set(${out}_long ${long} PARENT_SCOPE)
endfunction()

# rivet_write_test_matrix(): writes every cell the job tests asked for, run
# or not and why, to the build's test-matrix.csv
# (test,configuration,shapes,run), once every test is registered; an
# exception that matched no cell stops the configuration.
function(rivet_write_test_matrix)
  # An exception that no test asks for hides nothing: a stale row.
  get_property(used GLOBAL PROPERTY RIVET_TEST_ROWS_USED)
  foreach(row IN LISTS RIVET_TEST_EXCEPTIONS RIVET_TEST_FULL)
    if(NOT row IN_LIST used)
      message(FATAL_ERROR "RIVET_TEST_EXCEPTIONS or RIVET_TEST_FULL: no "
        "test asks for the cells of '${row}'; remove the row")
    endif()
  endforeach()
  get_property(rows GLOBAL PROPERTY RIVET_TEST_MATRIX)
  set(text "test,configuration,shapes,run\n")
  foreach(row IN LISTS rows)
    string(REPLACE "@TRANSPORT@" "*" row "${row}")
    string(REPLACE "@SHAPE@" "*" row "${row}")
    string(APPEND text "${row}\n")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/test-matrix.csv "${text}")
endfunction()

# rivet_job_test(NAME PROGRAM target LAYER layer
#                [NEEDS capability...] [ON transport...] [MODES mode...]
#                SHAPES PxT...
#                [ENV VAR=value...] [ARGS arg...] [WRAP command...]
#                [TIMEOUT seconds] [LABELS label...])
#
# Registers one ctest per cell of the matrix the test asks for and shape:
# PROGRAM (a target) run through rivetrun as P processes of T worker
# threads with the configuration's job file. The cells are every
# transport (of RIVET_TEST_BASES, or of ON) that has every capability of
# NEEDS, in each of MODES (default inline; all: every mode), less the
# table of exceptions above. NAME is the test's name, in
# which @TRANSPORT@ and @SHAPE@ stand for the configuration and the shape
# (conformance-@TRANSPORT@-@SHAPE@ gives conformance-ucx-shm-2x1); names
# must come out unique. ARGS are the program's arguments (default: the
# test's name, which the CMocka job tests print as their group name). ENV
# adds to, or overrides, the configuration's environment. WRAP is a
# command the job command is appended to, such as tests/expect.sh with its
# checks and "--" (a regular expression there keeps its square brackets
# balanced: CMake does not split a list inside brackets). TIMEOUT is the
# launcher's (rivetrun --timeout), by default the configuration's. The
# test's labels are the configuration's, LAYER, and LABELS.
function(rivet_job_test name)
  cmake_parse_arguments(PARSE_ARGV 1 J "" "PROGRAM;LAYER;TIMEOUT"
    "NEEDS;ON;MODES;SHAPES;ENV;ARGS;WRAP;LABELS")
  if(J_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "rivet_job_test(${name}): unknown arguments "
      "${J_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required PROGRAM LAYER SHAPES)
    if(NOT J_${required})
      message(FATAL_ERROR "rivet_job_test(${name}): ${required} is required")
    endif()
  endforeach()
  rivet_matrix_cells(cells "${name}" "${J_NEEDS}" "${J_ON}" "${J_MODES}"
    "${J_SHAPES}")

  # Variables the test's ENV sets replace the configuration's.
  set(overridden "")
  foreach(kv IN LISTS J_ENV)
    string(REGEX REPLACE "=.*" "" var "${kv}")
    list(APPEND overridden ${var})
  endforeach()

  foreach(tp IN LISTS cells)
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
      if(tp IN_LIST cells_long)
        list(APPEND labels stress)
      endif()
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
