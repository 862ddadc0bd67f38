# ftrace-harness. `make deps` once, then `make test`, or `make test-arch=<arch>`.
GO      ?= go
FTH     := bin/fth
# Passed through to `fth run` by `make test-arch=<arch>` and `make run`.
FTH_RUN_FLAGS ?=

.PHONY: default deps fth test test-unit test-e2e test-all test-scale run vet clean

# `make test-arch=x86_64` sets a variable and runs the default goal, so the
# default goal is where an arch run starts. fth runs directly, not through
# `$(MAKE) run ARCH=...`: a command-line variable travels in MAKEFLAGS to
# every sub-make, the kernel's included, where ARCH=riscv64 overrode the
# ARCH=riscv fth sets (fth also hands kbuild a cleaned environment).
default: fth
ifdef test-arch
	$(FTH) run --arch $(test-arch) $(FTH_RUN_FLAGS)
endif

deps:
	bash scripts/deps.sh

fth:
	$(GO) build -o $(FTH) ./harness/cmd/fth

vet:
	$(GO) vet ./...

# The whole suite: unit tests and end-to-end boots of real kernels. -count=1:
# Go's test cache cannot see what the e2e tests depend on (the fth binary they
# build, the kernels, QEMU), so a cached "ok" would be a pass with no boot.
# -timeout 85m: the e2e package took 4,617 s warm on 2026-11-28's slow
# machine; CI's 90 minutes leave about 5 for make deps, vet and the build.
test: vet
	$(GO) test -count=1 -timeout 85m ./...

# Unit tests only (-short skips every test that builds or boots a kernel).
test-unit:
	$(GO) test -short ./...

# Every arch end to end, arm64 and ppc64le included (too slow for CI), and
# every finding's standalone reproducer verified (TestVerifyFindings, about
# 45 minutes of it).
test-all: vet
	FTH_E2E_ALL=1 $(GO) test -count=1 -timeout 300m ./...

test-e2e:
	$(GO) test -count=1 -timeout 85m -v -run . ./tests/...

# The scale cells too slow even for test-all under TCG: 40,000 trampolines
# under the campaign's hammer and churn (about 2.7 hours on 2 cores), 38,000
# held by tracing_multi under it, per-link cost beside 10,000-40,000 of them.
test-scale:
	FTH_E2E_SCALE=1 $(GO) test -count=1 -timeout 480m -v -run 'FortyThousand|TwentyThousandChurn|MultiLiveCost' ./tests/e2e

# Every finding's standalone reproducer (results/known/repro), 5 runs each
# without the fix, with it, and its control: one line per finding,
# `<finding> <arch> unfixed k/n fixed k/n control k/n <report>`.
FTH_VERIFY_FLAGS ?=
.PHONY: verify-findings
verify-findings: fth
	$(FTH) verify $(FTH_VERIFY_FLAGS)

ARCH ?= x86_64
run: fth
	$(FTH) run --arch $(ARCH) $(FTH_RUN_FLAGS)

clean:
	rm -rf bin out

# Every arch × every variant; cells an arch cannot build are skipped with the
# reason. Builds are serialised, so expect hours on 2 cores (kernels are cached).
FTH_MATRIX_FLAGS ?=
.PHONY: matrix
matrix: fth
	$(FTH) matrix --arches all --variants all $(FTH_MATRIX_FLAGS)

# The harness's own bug-finding power: every default mutant (mutants/*.patch)
# on each arch, with the unmutated kernel in the same run, and a table of
# mutant, arch, detected, time to detect and title (mutation.json, report.html).
MUTATION_ARCHES ?= x86_64,arm64,riscv64
FTH_MUTATE_FLAGS ?=
.PHONY: mutation
mutation: fth
	$(FTH) mutate --arches $(MUTATION_ARCHES) $(FTH_MUTATE_FLAGS)

# A soak on a real board over SSH: `make soak BOARD=user@host[:port]`. The
# board's host key must be in ~/.ssh/known_hosts (ssh-keyscan), and a key in
# ssh-agent or ~/.ssh/id_* must log in. FTH_SOAK_FLAGS adds e.g. --resume.
BOARD ?=
DURATION ?= 8h
FTH_SOAK_FLAGS ?=
.PHONY: soak boardvm
soak: fth
	@test -n "$(BOARD)" || { echo "usage: make soak BOARD=user@host[:port] [DURATION=8h]"; exit 3; }
	$(FTH) soak --target ssh://$(BOARD) --duration $(DURATION) $(FTH_SOAK_FLAGS)

# A local VM that stands in for a board (sshd on 127.0.0.1:2222); then
# `make soak BOARD=root@127.0.0.1:2222 FTH_SOAK_FLAGS="--known-hosts out/boardvm/known_hosts -i out/boardvm/id_ed25519"`.
boardvm: fth
	$(FTH) boardvm --arch $(ARCH)
