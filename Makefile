# Thin wrapper around CMake: `make demo` and `make check` work from a fresh
# clone (they install missing Debian packages first).
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
PREFIX     ?= /usr/local
CMAKE_ARGS ?=

.PHONY: all deps build demo check check-full check-stress check-asan check-tsan check-verbs check-multinode docs bench install readme clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/rivetrun -c configs/pingpong-shm.yaml $(BUILD)/bin/rv-pingpong

# Every layer's functional tests over every transport configuration here
# (ucx-shm and ucx-tcp; the RDMA ones where a device is present), a few
# minutes on two cores. The long stress runs (label stress: the 10 M-call
# reply matrix and the like) wait for check-full, the jobs across two
# hosts for check-multinode.
check: build
	cd $(BUILD) && ctest --output-on-failure --timeout 300 -LE 'stress|multinode'

# The whole suite: make check, then the long stress runs.
check-full: check check-stress

# Jobs across two hosts made on this machine (scripts/multinode.sh: two
# sets of namespaces joined by a veth pair, under mpirun; needs root, else
# the tests report themselves skipped): label multinode.
check-multinode: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -L multinode

# The long stress runs alone (label stress), what check-full adds to check.
check-stress: build
	cd $(BUILD) && ctest --output-on-failure --timeout 300 -L stress

# The suite under AddressSanitizer and UBSan, in build-asan/; but
# fuzz-smoke, whose fuzzers are a clang ASan+UBSan build of their own, the
# same one make check runs (the replay programs of the fuzz inputs run).
check-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DRIVET_SANITIZE=address,undefined $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure --timeout 600 \
	  -LE 'stress|multinode' -E '^fuzz-smoke$$'

# ThreadSanitizer over the lockless parts (ctest label tsan: the local
# bypass, service threads, the progress engine's executors and completers,
# epochs, the store's concurrent fetch, MCTS's virtual loss), build in
# build-tsan/. tests/tsan/tsan.supp names only liburcu's queue, which TSan
# cannot see into (rivet annotates its handoffs instead: RV_TSAN_RELEASE).
# UCX's memory hooks, which patch mmap and malloc underneath TSan's own
# interceptors and crash or stall the job, are turned off.
TSAN_BUILD ?= build-tsan
check-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DRIVET_SANITIZE=thread $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && \
	  TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan/tsan.supp halt_on_error=1 report_signal_unsafe=0" \
	  UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no \
	  ctest --output-on-failure --timeout 600 -L tsan

# This build's tests that need an RDMA device (ctest labels verbs and
# ucx-rc: rivet's verbs transport and UCX's InfiniBand transports), run on a
# Soft-RoCE device in a qemu guest (scripts/rdma-vm.sh, scripts/check-verbs.sh).
check-verbs: build
	scripts/check-verbs.sh $(BUILD)

# The API reference from the public headers (Doxygen), in $(BUILD)/docs/html;
# an undocumented public symbol, parameter or return value fails it.
docs: build
	cmake --build $(BUILD) --target docs

bench: build
	bench/compare-ucx.sh

# Seriema's Table 2 (call throughput): rv-call-bw beside ucp_am_bw.
.PHONY: bench-table2
bench-table2: build
	bench/seriema-table2.sh -b $(BUILD)

# The documentation's generated parts: the configuration reference of the
# user guide and the tables of measured figures (from bench/results/*.csv)
# in the README, docs/benchmarks.md, docs/testing.md and the guide.
readme: build
	scripts/readme-reference.sh $(BUILD)/bin/rivet-config docs/guide/configuration.md --update
	scripts/readme-figures.py --update README.md docs/benchmarks.md docs/testing.md docs/guide/*.md

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

.PHONY: bench-amlong
bench-amlong: build
	bench/amlong.sh -b $(BUILD)

# The epoch manager (Dewan et al. Figs. 2-5) beside liburcu.
.PHONY: bench-epoch
bench-epoch: build
	bench/epoch.sh -b $(BUILD)

# Seriema Fig. 2 (RDMA messages/s: every WR signaled, manual and rivet's
# automatic selective signaling, perftest) on Soft-RoCE in the qemu guest.
.PHONY: bench-verbs
bench-verbs: build
	bench/verbs-bw.sh -b $(BUILD)

# Large AMs on Soft-RoCE: RDMA-read against write-with-immediate
# rendezvous, and rivet's.
.PHONY: bench-verbs-rndv
bench-verbs-rndv: build
	bench/verbs-rndv.sh -b $(BUILD)

# The fuzz targets (tests/fuzz: one per decoder of bytes from outside the
# process) with libFuzzer, ASan and UBSan in a clang build of their own
# (FUZZ_BUILD): each for 10 M executions or 30 minutes, whichever comes
# first, into bench/results/fuzz.csv. FUZZ_ARGS goes to bench/fuzz.sh
# (-n RUNS, -t SECONDS, target names).
FUZZ_BUILD ?= build-fuzz
.PHONY: fuzz
fuzz: deps
	bench/fuzz.sh -b $(FUZZ_BUILD) $(FUZZ_ARGS)
