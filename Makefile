# lipi — build, test and benchmark.
#
#   make            build/lipi, build/liblipi.a and build/liblipi.so (in parallel,
#                   one job per core unless -j is given)
#   make deps       check (and, as root, install) the Debian packages lipi needs;
#                   every build target runs it before compiling anything
#   make test       build and run every test (cmocka binaries, the bad-input
#                   catalogue, crash safety, install, fuzz replays); the last
#                   line counts cases: "tests: N passed, N failed, N skipped"
#   make install    PREFIX=/usr/local DESTDIR= : the command, the C library
#                   (.so + .a, headers in include/lipi/, lipi.pc), man pages
#                   and the bundled data in share/lipi; `make uninstall`
#   make check      the same tests under ASan + UBSan
#   make fuzz       each libFuzzer harness for FUZZ_SECONDS (default 60) seconds
#   make bench      benchmarks against the anchor tools (never part of test)
#   make demo       the README's first command
#
# BUILD=dir puts objects elsewhere (parallel builds from several work trees).

BUILD    ?= build
CC       ?= cc
VERSION  := 0.2.0
SOVERSION := 0
# Parallel by default: the first build on a fresh machine should not wait.
ifeq ($(MAKELEVEL)$(filter -j%,$(MAKEFLAGS)),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif
PKGS     := icu-uc icu-i18n libpcre2-8 cmocka jansson openblas zlib liblzma libzstd libcurl libcrypto
# What `make deps` checks: pkg-config name (or header/FILE, bin/CMD) : Debian package.
DEPS     := bin/pkg-config:pkg-config bin/cc:build-essential \
            icu-uc:libicu-dev libpcre2-8:libpcre2-dev header/uthash.h:uthash-dev \
            cmocka:libcmocka-dev jansson:libjansson-dev openblas:libopenblas-dev \
            zlib:zlib1g-dev liblzma:liblzma-dev libzstd:libzstd-dev \
            header/oneapi/dnnl/dnnl.h:libdnnl-dev header/faiss/Index.h:libfaiss-dev \
            libcurl:libcurl4-openssl-dev libcrypto:libssl-dev bin/help2man:help2man bin/man:man-db \
            file/usr/include/python3*/Python.h:python3-dev \
            file/usr/lib/python3/dist-packages/numpy/__init__.py:python3-numpy \
            file/usr/lib/python3/dist-packages/pytest/__init__.py:python3-pytest \
            file/usr/lib/python3/dist-packages/dask/__init__.py:python3-dask \
            file/usr/lib/python3/dist-packages/distributed/__init__.py:python3-distributed \
            libmicrohttpd:libmicrohttpd-dev
# What `make fuzz` needs on top: clang and its libFuzzer + sanitizer runtimes.
FUZZ_DEPS := bin/clang:clang \
            file/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a:libclang-rt-14-dev

OPT      ?= -O2 -g
# The library's objects go into liblipi.a and liblipi.so alike, so they are
# position-independent; -fno-semantic-interposition keeps calls within the
# library as direct (and inlinable) as in the executable.
PIC      ?= -fPIC -fno-semantic-interposition
WERROR   ?= $(if $(CI),-Werror,)
CFLAGS   ?= $(OPT)
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter $(WERROR) $(PIC) \
            -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -DLIPI_VERSION='"$(VERSION)"'
# FAISS is optional: its one C++ binding file is compiled, and the static
# libfaiss.a (which needs libgomp, and BLAS/LAPACK: OpenBLAS, opened at run
# time by retrieval/blas_lazy.c) linked, only
# when the headers are installed; otherwise lipi reports "built without FAISS".
HAVE_FAISS := $(wildcard /usr/include/faiss/Index.h)
FAISS_LIBS := $(if $(HAVE_FAISS),-lfaiss,)
CFLAGS   += $(if $(HAVE_FAISS),-DLIPI_HAVE_FAISS,)
CXXFLAGS ?= $(OPT)
CXXFLAGS += -std=c++17 -Wall -Wextra -Wno-unused-parameter $(WERROR) $(PIC) -I.
# libcurl is not linked: model/hub.c opens it on the first download (its
# header is all the build needs; the tests that serve HTTP link it).
# OpenBLAS and libcrypto are not linked either: retrieval/blas_lazy.c opens
# OpenBLAS for FAISS, tokenizer/sha256.c libcrypto for long messages.
LINK_PKGS := $(filter-out cmocka libcurl openblas libcrypto,$(PKGS))
LDLIBS   += $(FAISS_LIBS) $(shell pkg-config --libs $(LINK_PKGS) 2>/dev/null) \
            -lpthread -lm $(if $(HAVE_FAISS),-lgomp -lstdc++,)
TEST_LIBS = $(shell pkg-config --libs cmocka libcurl 2>/dev/null)
DEPFLAGS  = -MMD -MP

MODULES  := tokenizer trainer encoder model retrieval report pipeline serve
LIB_SRC  := $(foreach m,$(MODULES),$(wildcard $(m)/*.c))
CLI_SRC  := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_HELPER_SRC := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(if $(HAVE_FAISS),$(BUILD)/retrieval/faiss_bind.o,)
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

.PHONY: print-libs all build deps test check bench demo fuzz fuzz-bins clean install uninstall man python FORCE
# `make deps` first, then the build in a new make: what the Makefile found
# when it was read (FAISS's headers, pkg-config's flags) may have changed
# when deps installed packages.
all: deps
	@$(MAKE) --no-print-directory build
build: $(BUILD)/lipi $(BUILD)/liblipi.a $(BUILD)/liblipi.so

# Every compile also waits for `make deps` (order-only: it never forces a
# rebuild), so a missing package is reported as one, not as a compiler error;
# and depends on the flags it was compiled with (FLAGS_STAMP), so objects
# built before FAISS was installed, or with other OPT, are rebuilt.
FLAGS_STAMP := $(BUILD)/flags.stamp
$(FLAGS_STAMP): FORCE
	$(shell mkdir -p $(BUILD))
	$(file >$@.new,$(CC) $(CFLAGS) | $(CXX) $(CXXFLAGS) | $(LDFLAGS) | $(HAVE_FAISS))
	@if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; fi

$(BUILD)/%.o: %.c $(FLAGS_STAMP) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cpp $(FLAGS_STAMP) | deps
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/liblipi.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library exports exactly the functions of the public headers
# (packaging/exports.sh); everything else stays local to it.
PUBLIC_HEADERS := tokenizer/tokenizer.h encoder/encoder.h trainer/trainer.h model/model.h \
                  retrieval/retrieval.h report/report.h pipeline/pipeline.h
SONAME := liblipi.so.$(SOVERSION)
$(BUILD)/lipi.map: $(PUBLIC_HEADERS) packaging/exports.sh | deps
	@mkdir -p $(dir $@)
	sh packaging/exports.sh "$(CC)" $(PUBLIC_HEADERS) > $@.tmp && mv $@.tmp $@

$(BUILD)/liblipi.so.$(VERSION): $(LIB_OBJ) $(BUILD)/lipi.map
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,--version-script,$(BUILD)/lipi.map \
	  -o $@ $(LIB_OBJ) $(LDLIBS)

$(BUILD)/liblipi.so: $(BUILD)/liblipi.so.$(VERSION)
	ln -sf liblipi.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

# Where `make install` puts things. The installed program and library find
# the data in share/lipi beside themselves wherever PREFIX was; DATADIR is
# also compiled in (as it was when tokenizer/datadir.o was built) for
# programs that link liblipi.a elsewhere.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
DATADIR    ?= $(PREFIX)/share/lipi
$(BUILD)/tokenizer/datadir.o: CFLAGS += -DLIPI_DATADIR='"$(DATADIR)"'

# `lipi serve` is the one user of GNU libmicrohttpd: the command opens it
# when it starts (cli/cmd_serve.c says why it is not linked); the library
# does not use it (serve/ holds the HTTP-free half).
$(BUILD)/cli/cmd_serve.o: CFLAGS += $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
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

# The Python package (python/): `make python` builds the extension in place
# in $(BUILD)/python/lipi, linked with liblipi.a, beside copies of the .py
# and .pyi files and a link to data/ (the bundled tokenizers), so
# PYTHONPATH=$(BUILD)/python imports it without installing anything;
# `pip install ./python` builds the same with setuptools. Debian's
# /usr/bin/python3, never the first python3 on PATH.
PYTHON     ?= /usr/bin/python3
PY_INCLUDE  = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_SUFFIX   = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_FILES   := $(wildcard python/lipi/*.py python/lipi/*.pyi python/lipi/py.typed)
PY_EXT      = $(BUILD)/python/lipi/_lipi$(PY_SUFFIX)
python: deps
	@$(MAKE) --no-print-directory $(BUILD)/python/lipi/.stamp

$(BUILD)/python/lipi/.stamp: $(BUILD)/python/_lipi.built $(PY_FILES)
	@mkdir -p $(dir $@)
	cp $(PY_FILES) $(BUILD)/python/lipi/
	ln -sfn $(abspath data) $(BUILD)/python/lipi/data
	touch $@

$(BUILD)/python/_lipi.built: $(BUILD)/python/_lipi.o $(BUILD)/liblipi.a
	@mkdir -p $(dir $@)
	@mkdir -p $(BUILD)/python/lipi
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -o $(PY_EXT) $< $(BUILD)/liblipi.a $(LDLIBS)
	touch $@

$(BUILD)/python/_lipi.o: python/lipi/_lipi.c $(FLAGS_STAMP) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(PY_INCLUDE) -fvisibility=hidden -Wno-cast-function-type $(DEPFLAGS) -c $< -o $@

# What a program linking liblipi.a needs after it (the bench/ scripts use it).
print-libs:
	@echo $(LDLIBS)

# Each test binary runs from the repository root so fixture paths are stable.
# LIPI_BIN lets tests drive the CLI built into the same BUILD. The shell tests
# run the bad-input catalogue, the SIGKILL crash-safety test, the signal
# cleanup test and `make install` (LIPI_SAN_FLAGS: a sanitizer build's flags,
# for its C program).
TEST_SCRIPTS := tests/bad_inputs/run.sh tests/crash_safety.sh tests/signal_cleanup.sh \
                tests/install.sh tests/python.sh
# The Python extension is built for the tests except in sanitizer builds
# (tests/python.sh skips there: python3 cannot load ASan code).
TEST_PYTHON = $(if $(findstring sanitize,$(LDFLAGS)),,$(BUILD)/python/lipi/.stamp)
# The sub-make reads the Makefile after deps has run, as `all` does; it
# names `build`, not `all`, so one make builds liblipi.a (`all` would start
# a second make that writes it at the same time as the test binaries' rules).
test: deps
	@$(MAKE) --no-print-directory build $(TEST_BIN) $(FUZZ_REPLAY) $(TEST_PYTHON)
	@LIPI_BIN=$(BUILD)/lipi LIPI_SAN_FLAGS="$(LDFLAGS)" REPLAY_BUILD=$(BUILD) \
	  REPLAY_HARNESSES="$(FUZZ_HARNESSES)" \
	  sh tests/run_tests.sh $(TEST_BIN) $(TEST_SCRIPTS) tests/fuzz/replay.sh

# tests/lsan.supp says why TLS is not scanned for leaks.
check: deps
	@LSAN_OPTIONS="use_tls=0:print_suppressions=0:suppressions=$(CURDIR)/tests/lsan.supp$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}" \
	  $(MAKE) --no-print-directory BUILD=build-san \
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

# Man pages, made from the commands' own --help (never committed, never stale).
man: $(BUILD)/man/lipi.1
$(BUILD)/man/lipi.1: $(BUILD)/lipi packaging/manpages.sh
	sh packaging/manpages.sh $(BUILD)/lipi $(BUILD)/man $(VERSION)

# pkg-config: static linking needs the libraries liblipi.a calls into.
PC_REQUIRES := $(LINK_PKGS)
PC_LIBS_PRIVATE := $(FAISS_LIBS) -lpthread -lm $(if $(HAVE_FAISS),-lgomp -lstdc++,)
$(BUILD)/lipi.pc: packaging/lipi.pc.in FORCE
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES@|$(PC_REQUIRES)|' \
	    -e 's|@LIBS_PRIVATE@|$(PC_LIBS_PRIVATE)|' $< > $@

# Bundled data: the tokenizer files `-t NAME` finds and the demo sample.
DATA_FILES := $(wildcard data/README.md data/vocab/tiktoken/*.tiktoken data/vocab/*/vocab.txt \
  data/vocab/*/tokenizer.json data/vocab/*/README.md data/flores200/*.txt)

install: all man $(BUILD)/lipi.pc
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/lipi \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DATADIR)
	install -m 755 $(BUILD)/lipi $(DESTDIR)$(BINDIR)/lipi
	install -m 644 $(BUILD)/liblipi.a $(DESTDIR)$(LIBDIR)/liblipi.a
	install -m 755 $(BUILD)/liblipi.so.$(VERSION) $(DESTDIR)$(LIBDIR)/liblipi.so.$(VERSION)
	ln -sf liblipi.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/liblipi.so
	install -m 644 $(BUILD)/lipi.pc $(DESTDIR)$(LIBDIR)/pkgconfig/lipi.pc
	@# In the tree the headers include each other as "module/name.h"; installed, as <lipi/name.h>.
	for h in $(PUBLIC_HEADERS); do \
	  sed -E 's|^#include "[a-z]+/([a-z_]+\.h)"|#include <lipi/\1>|' $$h > $(DESTDIR)$(INCLUDEDIR)/lipi/$$(basename $$h) || exit 1; \
	done
	install -m 644 $(BUILD)/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	for f in $(DATA_FILES:data/%=%); do \
	  install -D -m 644 data/$$f $(DESTDIR)$(DATADIR)/$$f || exit 1; \
	done

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/lipi $(DESTDIR)$(LIBDIR)/liblipi.a $(DESTDIR)$(LIBDIR)/liblipi.so \
	  $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/liblipi.so.$(VERSION) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/lipi.pc $(DESTDIR)$(MANDIR)/man1/lipi.1 \
	  $(DESTDIR)$(MANDIR)/man1/lipi-*.1
	rm -rf $(DESTDIR)$(INCLUDEDIR)/lipi $(DESTDIR)$(DATADIR)

clean:
	rm -rf build build-san build-*

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_BIN:=.d) $(TEST_HELPER_OBJ:.o=.d) \
         $(FUZZ_HARNESSES:%=$(BUILD)/tests/fuzz/fuzz_%.d) $(BUILD)/tests/fuzz/replay.d \
         $(BUILD)/python/_lipi.d
