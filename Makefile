# lipi — build, test and benchmark.
#
#   make            build/lipi and build/liblipi.a
#   make deps       check (and, as root, install) the Debian packages lipi needs
#   make test       build and run every cmocka test binary
#   make check      the same tests under ASan + UBSan
#   make fuzz       each libFuzzer harness for FUZZ_SECONDS (default 60) seconds
#   make bench      benchmarks against the anchor tools (never part of test)
#   make demo       the README's first command
#
# BUILD=dir puts objects elsewhere (parallel builds from several work trees).

BUILD    ?= build
CC       ?= cc
PKGS     := icu-uc icu-i18n libpcre2-8 cmocka jansson openblas zlib liblzma libzstd libcurl
# What `make deps` checks: pkg-config name (or header/FILE, bin/CMD) : Debian package.
DEPS     := bin/pkg-config:pkg-config bin/cc:build-essential \
            icu-uc:libicu-dev libpcre2-8:libpcre2-dev header/uthash.h:uthash-dev \
            cmocka:libcmocka-dev jansson:libjansson-dev openblas:libopenblas-dev \
            zlib:zlib1g-dev liblzma:liblzma-dev libzstd:libzstd-dev \
            header/oneapi/dnnl/dnnl.h:libdnnl-dev header/faiss/Index.h:libfaiss-dev \
            libcurl:libcurl4-openssl-dev
# What `make fuzz` needs on top: clang and its libFuzzer + sanitizer runtimes.
FUZZ_DEPS := bin/clang:clang \
            file/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a:libclang-rt-14-dev

OPT      ?= -O2 -g
WERROR   ?= $(if $(CI),-Werror,)
CFLAGS   ?= $(OPT)
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter $(WERROR) \
            -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# FAISS is optional: its one C++ binding file is compiled, and the static
# libfaiss.a (which needs BLAS/LAPACK from OpenBLAS and libgomp) linked, only
# when the headers are installed; otherwise lipi reports "built without FAISS".
HAVE_FAISS := $(wildcard /usr/include/faiss/Index.h)
FAISS_LIBS := $(if $(HAVE_FAISS),-lfaiss,)
CFLAGS   += $(if $(HAVE_FAISS),-DLIPI_HAVE_FAISS,)
CXXFLAGS ?= $(OPT)
CXXFLAGS += -std=c++17 -Wall -Wextra -Wno-unused-parameter $(WERROR) -I.
LDLIBS   += $(FAISS_LIBS) $(shell pkg-config --libs $(filter-out cmocka,$(PKGS)) 2>/dev/null) \
            -lpthread -lm $(if $(HAVE_FAISS),-lgomp -lstdc++,)
TEST_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null)
DEPFLAGS  = -MMD -MP

MODULES  := tokenizer trainer encoder pipeline
LIB_SRC  := $(foreach m,$(MODULES),$(wildcard $(m)/*.c))
CLI_SRC  := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_HELPER_SRC := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(if $(HAVE_FAISS),$(BUILD)/pipeline/faiss_bind.o,)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_HELPER_OBJ := $(TEST_HELPER_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# Fuzz harnesses: tests/fuzz/fuzz_<h>.c. `make test` builds each with the
# normal compiler and tests/fuzz/replay.c as $(BUILD)/fuzz_replay_<h> and
# replays the committed corpus and regressions; `make fuzz` builds them with
# clang and libFuzzer in $(FUZZ_BUILD).
FUZZ_HARNESSES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(FUZZ_HARNESSES:%=$(BUILD)/fuzz_replay_%)
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

.PHONY: all deps test check bench demo fuzz fuzz-bins clean
all: $(BUILD)/lipi $(BUILD)/liblipi.a

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/liblipi.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/lipi: $(CLI_OBJ) $(BUILD)/liblipi.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_HELPER_OBJ) $(BUILD)/liblipi.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(TEST_LIBS) $(LDLIBS)

$(BUILD)/fuzz_replay_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/replay.o $(BUILD)/liblipi.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# libFuzzer binaries (only inside the `make fuzz` sub-make, CC=clang).
$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/liblipi.a
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $^ $(LDLIBS)

fuzz-bins: $(FUZZ_HARNESSES:%=$(BUILD)/fuzz_%)

deps:
	@sh tests/deps.sh $(DEPS)

# Each test binary runs from the repository root so fixture paths are stable.
# LIPI_BIN lets tests drive the CLI built into the same BUILD. The shell tests
# run the bad-input catalogue and the SIGKILL crash-safety test against it.
TEST_SCRIPTS := tests/bad_inputs/run.sh tests/crash_safety.sh tests/signal_cleanup.sh
test: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN) $(FUZZ_REPLAY)
	@LIPI_BIN=$(BUILD)/lipi sh tests/run_tests.sh $(TEST_BIN) $(TEST_SCRIPTS)
	@sh tests/fuzz/replay.sh $(BUILD) $(FUZZ_HARNESSES)

check: deps
	@$(MAKE) --no-print-directory BUILD=build-san \
	  OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
	  LDFLAGS="-fsanitize=address,undefined" test

# FAISS stays out of the fuzz build: faiss.index is FAISS's own reader.
fuzz:
	@sh tests/deps.sh $(FUZZ_DEPS)
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang CXX=clang++ HAVE_FAISS= \
	  OPT="-O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link" LDFLAGS="$(FUZZ_SAN)" fuzz-bins
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

bench: all
	@sh bench/run.sh $(BUILD)

demo: all
	@sh cli/demo.sh $(BUILD)/lipi

clean:
	rm -rf build build-san build-*

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_BIN:=.d) $(TEST_HELPER_OBJ:.o=.d) \
         $(FUZZ_HARNESSES:%=$(BUILD)/tests/fuzz/fuzz_%.d) $(BUILD)/tests/fuzz/replay.d
