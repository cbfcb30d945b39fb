# Thin wrapper over CMake. `make` builds everything into build/; `make test` runs every test
# (units, integration with real eBPF: run as root).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure test test-sanitize demo package install test-pc-mock-graph format clean

all: configure
	cmake --build $(BUILD) -j$(JOBS)

deps:
	scripts/install-deps.sh

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

test: all
	cd $(BUILD) && ctest --output-on-failure

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
