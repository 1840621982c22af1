# Thin driver over CMake (README.md lists the targets). Binaries land in build/.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps test-deps configure test test-asan run bench install soak fuzz fuzz-run clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

# What the build needs (Debian packages); test-deps adds what only the tests
# and benches use (clang, node, Chromium, npm packages). `make run` needs
# the first only.
deps:
	@sh scripts/install-deps.sh

test-deps: deps
	@sh scripts/install-test-deps.sh $(BUILD) $(ASAN_BUILD)

configure: deps
	@[ -f $(BUILD)/CMakeCache.txt ] || cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

# Skipped tests (exit 77) are listed by ctest at the end; ctest-skips.sh adds why.
test: test-deps all
	@status=0; ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) || status=$$?; \
		sh scripts/ctest-skips.sh $(BUILD); exit $$status

test-asan: test-deps
	@[ -f $(ASAN_BUILD)/CMakeCache.txt ] || cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLMLIMIT_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	@status=0; ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) || status=$$?; \
		sh scripts/ctest-skips.sh $(ASAN_BUILD); exit $$status

# Builds llmlimitd and the llmlimit command only, then starts the server.
run: configure
	cmake --build $(BUILD) -j $(JOBS) --target llmlimitd llmlimit_cli
	./$(BUILD)/llmlimitd $(ARGS)

bench: test-deps all
	sh bench/run.sh $(BUILD)

# Hardening (docs/hardening.md): soak under mixed load, libFuzzer harnesses.
DURATION ?= 600
BACKEND ?= memory
FUZZ_BUILD ?= build-fuzz
SECONDS ?= 60

soak: all
	python3 tests/soak/soak.py --binary $(BUILD)/llmlimitd --backend $(BACKEND) --seconds $(DURATION)

fuzz: test-deps
	@[ -f $(FUZZ_BUILD)/CMakeCache.txt ] || CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLMLIMIT_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) --target fuzz -j $(JOBS)

fuzz-run: fuzz
	sh tests/fuzz/run.sh $(FUZZ_BUILD) $(SECONDS)

# Installs under CMAKE_INSTALL_PREFIX (default /usr/local; PREFIX=DIR overrides).
install: all
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
