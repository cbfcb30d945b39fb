# Thin wrapper over CMake. `make` builds everything into build/; `make test` runs every test
# (units, integration with real eBPF: run as root).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure test test-soak test-sanitize demo package install test-pc-mock-graph format clean

all: configure
	cmake --build $(BUILD) -j$(JOBS)

deps:
	scripts/install-deps.sh

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

# Every test but the slow soaks: first the few that need the machine to themselves (ctest label
# `alone`, RUN_SERIAL: tests/CMakeLists.txt says why for each), one at a time, then the rest side
# by side (ctest -j). Each integration test has its own copy of the library, PC lock directory and
# mock GPU (tests/integration/harness.py); most of their time is the mock app's timed runs, not
# CPU, so three tests per CPU run at once. Then what killed tests left running is ended
# (harness.py reap). The soaks (label `soak`: the attach/detach storm and the 2-minute soak):
# `make test-soak`.
TEST_JOBS ?= $(shell echo $$(( 3 * $(JOBS) )))
REAP = PARCAGPU_BUILD_DIR=$(abspath $(BUILD)) python3 tests/integration/harness.py reap
test: all
	cd $(BUILD) && ctest --output-on-failure -L alone; a=$$?; \
	  ctest --output-on-failure -j$(TEST_JOBS) -LE 'soak|alone'; b=$$?; \
	  cd $(CURDIR) && $(REAP); [ $$a -eq 0 ] && [ $$b -eq 0 ]

# The attach/detach storm (under each personality) and the 2-minute soak, one after the other
# (about 14 minutes on a 2-CPU machine under load).
test-soak: all
	cd $(BUILD) && ctest --output-on-failure -L soak; a=$$?; cd $(CURDIR) && $(REAP); [ $$a -eq 0 ]

# The library and the mock under ASan+UBSan and under TSan (build-asan/, build-tsan/): unit tests
# and the hardest integration files; any sanitizer report fails (scripts/test-sanitize.sh).
test-sanitize: all
	JOBS=$(JOBS) scripts/test-sanitize.sh

# The mock application under the library, with our consumer attached, printing what it sees.
demo: all
	scripts/demo.sh

# The Debian package (build/parcagpu_VERSION_ARCH.deb) and its check: unpacked into an empty
# prefix, contents checked, the demo run from the unpacked files.
package: all
	cd $(BUILD) && cpack -G DEB
	scripts/check-package.sh

# Into CMAKE_INSTALL_PREFIX (default /usr/local; DESTDIR works).
install: all
	cmake --install $(BUILD)

test-pc-mock-graph: all
	PARCAGPU_BUILD_DIR=$(abspath $(BUILD)) python3 scripts/test-pc-mock-graph.py

format:
	clang-format -i $$(git ls-files '*.cc' '*.h' '*.c' '*.cu')

clean:
	rm -rf $(BUILD) build-asan build-tsan
