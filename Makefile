# lipi — build, test and benchmark.
#
#   make            build/lipi and build/liblipi.a
#   make deps       check (and, as root, install) the Debian packages lipi needs
#   make test       build and run every cmocka test binary
#   make check      the same tests under ASan + UBSan
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

.PHONY: all deps test check bench demo fuzz clean
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

deps:
	@sh tests/deps.sh $(DEPS)

# Each test binary runs from the repository root so fixture paths are stable.
# LIPI_BIN lets tests drive the CLI built into the same BUILD. The shell tests
# run the bad-input catalogue and the SIGKILL crash-safety test against it.
TEST_SCRIPTS := tests/bad_inputs/run.sh tests/crash_safety.sh
test: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN)
	@LIPI_BIN=$(BUILD)/lipi sh tests/run_tests.sh $(TEST_BIN) $(TEST_SCRIPTS)

check: deps
	@$(MAKE) --no-print-directory BUILD=build-san \
	  OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
	  LDFLAGS="-fsanitize=address,undefined" test

bench: all
	@sh bench/run.sh $(BUILD)

demo: all
	@sh cli/demo.sh $(BUILD)/lipi

clean:
	rm -rf build build-san build-*

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_BIN:=.d) $(TEST_HELPER_OBJ:.o=.d)
