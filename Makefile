# coexec — the two commands a fresh Debian machine needs:
#   make demo    install missing Debian packages, build (release), run the offload-server demo
#   make test    the same set-up, then the whole test suite
# and, for CI:
#   make check   make test, then the suite under ASan/UBSan and TSan, and an optimized clang build (-O2, assertions on)
#   make bench   the benchmarks (release build)
#   make bench-scaling  W1, W2 and W4 by worker count (BENCH_WORKERS, default "1 2 4 8 16")
# and, for reliability (docs/reliability.md):
#   make fuzz    the libFuzzer targets, FUZZ_SECONDS each (default 60)
#   make soak    the model-based stress driver for SOAK_SECONDS (default 600)
#   make soak-server  the offload server under mixed load for SOAK_SECONDS (default 600)
# and, to install the library (README, "Using coexec in a project"):
#   make install        the library alone (Release) into PREFIX (default /usr/local); needs only
#                       INSTALL_PACKAGES; BUILD_SHARED_LIBS=ON installs libcoexec.so instead of .a
#   make install-tsan   the same built with -fsanitize=thread, into PREFIX (default /opt/coexec-tsan),
#                       for programs built with -fsanitize=thread (= make install SANITIZE=thread;
#                       SANITIZE=address: -fsanitize=address,undefined into /opt/coexec-asan)
#   make package        the Debian package libcoexec-dev_<version>_<arch>.deb and the source tarball
#                       coexec-<version>.tar.gz (the tracked files) with CPack, into build/package
# and, for the API reference:
#   make docs    the HTML reference of include/coexec/ with Doxygen into build/docs/html, failing on
#                any warning (an undocumented public entity, a broken link); then checks that
#                headless Chromium renders it (scripts/check-docs.sh). Not part of make check.

SHELL := /bin/bash
# curl is the client of the servers' integration tests; lld links the
# tests and examples (CMakeLists.txt, COEXEC_USE_LLD); python3-prometheus-client
# parses the Prometheus exposition in a test (tests/prometheus/);
# libboost1.81-dev: the Boost.Asio bridge's tests and the Beast example;
# ccache keeps the objects of earlier builds (CMakeLists.txt, COEXEC_CCACHE).
DEBIAN_PACKAGES := cmake ninja-build g++ clang lld make pkg-config libasio-dev libboost1.81-dev catch2 libfmt-dev \
  curl python3-prometheus-client ccache
# What `make install` needs, and no more: a compiler, CMake and Ninja, fmt (a
# public dependency), Asio's headers for the installed Asio bridge, and
# pkg-config for consumers of the .pc files. (With libboost1.81-dev present
# the package also has coexec::boost_asio.)
INSTALL_PACKAGES := cmake ninja-build g++ make pkg-config libasio-dev libfmt-dev
# make package: what make install needs, and git (the source tarball holds
# the files git tracks). CPack writes the .deb itself; dpkg, which names the
# architecture, is on every Debian system; dpkg-dev is not needed.
PACKAGE_PACKAGES := $(INSTALL_PACKAGES) git dpkg
# default-jdk-headless: the JDK's ThreadPoolExecutor and ForkJoinPool as peers (bench/java/).
BENCH_PACKAGES := libtbb-dev valgrind default-jdk-headless
# libFuzzer and its sanitizers ship with clang's runtime.
FUZZ_PACKAGES := clang libclang-rt-14-dev
# doxygen builds the API reference (python3 runs its Markdown filter,
# scripts/doxygen-md-filter.py); chromium (headless) checks that it renders.
DOCS_PACKAGES := doxygen python3 chromium
FUZZ_SECONDS ?= 60
# The fuzz smoke make check runs: each target over its corpus, then this long.
FUZZ_SMOKE_SECONDS ?= 20
SOAK_SECONDS ?= 600
# JOBS bounds the compiler jobs of `cmake --build` (`make test JOBS=2` on a
# small machine); ctest runs one test more than that at once (TEST_JOBS):
# many tests wait (latches, timeouts, sleeps) more than they compute, and
# the extra test uses the time they leave idle (CONTRIBUTING.md).
JOBS ?= $(shell nproc)
TEST_JOBS ?= $(shell echo $$(($(JOBS) + 1)))
BUILD_FLAGS ?= -j $(JOBS)
# The test targets run ctest through scripts/ctest-verdict.sh, which keeps its
# output in build/<preset>/ctest.log and prints its verdict ("N% tests passed,
# M tests failed out of K", and the failed tests) last; the test presets turn
# off ctest's per-label time summary.
CTEST_FLAGS ?= -j$(TEST_JOBS) --timeout 300
# make install: BUILD_SHARED_LIBS=ON builds a shared library; SANITIZE=thread
# or address builds it instrumented (its own preset, build directory and
# default prefix, so that it never replaces the plain library).
BUILD_SHARED_LIBS ?= OFF
SANITIZE ?=
INSTALL_PRESET_ := install
INSTALL_PRESET_thread := install-tsan
INSTALL_PRESET_address := install-asan
INSTALL_PREFIX_thread := /opt/coexec-tsan
INSTALL_PREFIX_address := /opt/coexec-asan
INSTALL_PRESET = $(INSTALL_PRESET_$(SANITIZE))
INSTALL_PREFIX = $(or $(PREFIX),$(INSTALL_PREFIX_$(SANITIZE)))

.PHONY: check-start all deps install-deps package-deps bench-deps fuzz-deps docs-deps docs demo test check asan tsan clang bench \
  bench-scaling install install-tsan package clean fuzz fuzz-smoke soak soak-server

all: test

# Installs the Debian packages that are missing (as root, or through sudo).
deps:
	@./scripts/install-deps.sh $(DEBIAN_PACKAGES)

install-deps:
	@./scripts/install-deps.sh $(INSTALL_PACKAGES)

package-deps:
	@./scripts/install-deps.sh $(PACKAGE_PACKAGES)

bench-deps: deps
	@./scripts/install-deps.sh $(BENCH_PACKAGES)

fuzz-deps: deps
	@./scripts/install-deps.sh $(FUZZ_PACKAGES)

# Only what the reference needs: no compiler, no build of the library.
docs-deps:
	@./scripts/install-deps.sh $(DOCS_PACKAGES)

# The offload server against its own load generator, bounded pool queue versus
# unbounded (docs/offload-server.md); under a minute.
demo: deps
	cmake --preset release
	cmake --build --preset release --target offload_server $(BUILD_FLAGS)
	./build/release/examples/offload_server demo

test: deps
	cmake --preset dev
	./scripts/timed.sh "dev build" cmake --build --preset dev $(BUILD_FLAGS)
	./scripts/timed.sh "dev tests" ./scripts/ctest-verdict.sh run build/dev/ctest.log --preset dev $(CTEST_FLAGS)

asan: deps
	cmake --preset asan
	./scripts/timed.sh "asan build" cmake --build --preset asan $(BUILD_FLAGS)
	./scripts/timed.sh "asan tests" ./scripts/ctest-verdict.sh run build/asan/ctest.log --preset asan $(CTEST_FLAGS)

tsan: deps
	cmake --preset tsan
	./scripts/timed.sh "tsan build" cmake --build --preset tsan $(BUILD_FLAGS)
	./scripts/timed.sh "tsan tests" ./scripts/ctest-verdict.sh run build/tsan/ctest.log --preset tsan $(CTEST_FLAGS)

clang: deps
	cmake --preset clang
	./scripts/timed.sh "clang build" cmake --build --preset clang $(BUILD_FLAGS)
	./scripts/timed.sh "clang tests" ./scripts/ctest-verdict.sh run build/clang/ctest.log --preset clang $(CTEST_FLAGS)

# Each stage's build and test times (scripts/timed.sh) are listed after the
# four verdicts; the list starts anew with each make check. scripts/check.sh
# runs the stages of test, asan, tsan, clang and fuzz-smoke, each build beside
# the test run before it at the lowest priority (it takes the cores the tests
# leave idle).
check: check-start deps fuzz-deps
	BUILD_FLAGS="$(BUILD_FLAGS)" CTEST_FLAGS="$(CTEST_FLAGS)" FUZZ_SMOKE_SECONDS="$(FUZZ_SMOKE_SECONDS)" \
	  ./scripts/check.sh
	@./scripts/ctest-verdict.sh show build/dev/ctest.log build/asan/ctest.log build/tsan/ctest.log build/clang/ctest.log
	@echo "==== stage times"; cat build/stage-times.txt

check-start:
	@mkdir -p build && rm -f build/stage-times.txt

# The fuzz targets (clang, libFuzzer, ASan/UBSan) in build/fuzz.
fuzz: fuzz-deps
	cmake --preset fuzz
	cmake --build --preset fuzz $(BUILD_FLAGS)
	./scripts/fuzz.sh build/fuzz $(FUZZ_SECONDS)

fuzz-smoke: fuzz-deps
	cmake --preset fuzz
	./scripts/timed.sh "fuzz build" cmake --build --preset fuzz $(BUILD_FLAGS)
	./scripts/timed.sh "fuzz smoke" ./scripts/fuzz.sh build/fuzz $(FUZZ_SMOKE_SECONDS)

# The model-based stress driver (tests/stress/ModelStress.cpp) for
# SOAK_SECONDS, in the dev build: a new seed per program, every program
# checked; a failure prints its seed (replay: stress_ModelStress --seed N).
# SOAK_PRESET=asan or tsan runs it under a sanitizer.
SOAK_PRESET ?= dev
soak: deps
	cmake --preset $(SOAK_PRESET)
	cmake --build --preset $(SOAK_PRESET) --target stress_ModelStress $(BUILD_FLAGS)
	./build/$(SOAK_PRESET)/tests/stress_ModelStress --seconds $(SOAK_SECONDS)

# The offload server (release build) under mixed load for SOAK_SECONDS.
soak-server: deps
	cmake --preset release
	cmake --build --preset release --target offload_server $(BUILD_FLAGS)
	./scripts/soak-server.sh build/release/examples/offload_server $(SOAK_SECONDS)

bench: bench-deps
	cmake --preset release -DCOEXEC_BUILD_BENCH=ON
	cmake --build --preset release $(BUILD_FLAGS)
	./bench/run.sh build/release

# W1, W2 and W4 on each implementation with 1, 2, 4, 8 and 16 workers (set
# BENCH_WORKERS="1 2" on a small machine) into docs/perf/scaling.md.
bench-scaling: bench-deps
	cmake --preset release -DCOEXEC_BUILD_BENCH=ON
	cmake --build --preset release $(BUILD_FLAGS)
	BENCH_MODE=scaling ./bench/run.sh build/release

# Builds the library alone (the `install` preset: Release, no tests, no
# examples, in build/install) and installs it, by default into /usr/local.
# SANITIZE=thread: the `install-tsan` preset (build/install-tsan), by default
# into /opt/coexec-tsan; SANITIZE=address: `install-asan`, /opt/coexec-asan.
install: install-deps
	@if [ -z "$(INSTALL_PRESET)" ]; then \
	  echo "make install: SANITIZE must be thread or address (or unset), not '$(SANITIZE)'" >&2; exit 2; fi
	cmake --preset $(INSTALL_PRESET) -DBUILD_SHARED_LIBS=$(BUILD_SHARED_LIBS)
	cmake --build --preset $(INSTALL_PRESET) $(BUILD_FLAGS)
	cmake --install build/$(INSTALL_PRESET) $(if $(INSTALL_PREFIX),--prefix $(INSTALL_PREFIX),)

install-tsan:
	$(MAKE) install SANITIZE=thread

# The packages (cmake/Packaging.cmake) from the `package` preset (Release, the
# library alone, in build/package): build/package/libcoexec-dev_<version>_<arch>.deb
# (install it with `apt install ./build/package/libcoexec-dev_*.deb`) and
# build/package/coexec-<version>.tar.gz. The test install.debianPackageBuildsAndIsConsumed
# (make test) builds and consumes the same packages from the dev build.
package: package-deps
	cmake --preset package
	cmake --build --preset package $(BUILD_FLAGS)
	cd build/package && cpack --config CPackConfig.cmake && cpack --config CPackSourceConfig.cmake

# The API reference (docs/Doxyfile: the public headers, the guides in docs/ as
# pages, README.md as the main page) into build/docs/html; any Doxygen warning
# fails it, an undocumented public entity included. Then scripts/check-docs.sh
# screenshots the main page and the ThreadPoolExecutor page in headless Chromium
# and checks what they show. Not part of make check (CI time).
docs: docs-deps
	rm -rf build/docs/html && mkdir -p build/docs
	doxygen docs/Doxyfile
	./scripts/check-docs.sh build/docs/html

clean:
	rm -rf build
