# ftrace-harness. `make deps` once, then `make test`, or `make test-arch=<arch>`.
GO      ?= go
FTH     := bin/fth
# Passed through to `fth run` by `make test-arch=<arch>` and `make run`.
FTH_RUN_FLAGS ?=

.PHONY: default deps fth test test-unit test-e2e test-all run vet clean

# `make test-arch=x86_64` sets a variable and runs the default goal, so the
# default goal is where an arch run starts.
default:
ifdef test-arch
	$(MAKE) --no-print-directory run ARCH=$(test-arch)
else
	$(MAKE) --no-print-directory fth
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
test: vet
	$(GO) test -count=1 -timeout 80m ./...

# Unit tests only (-short skips every test that builds or boots a kernel).
test-unit:
	$(GO) test -short ./...

# Every arch end to end, arm64 and ppc64le included (too slow for CI).
test-all: vet
	FTH_E2E_ALL=1 $(GO) test -count=1 -timeout 240m ./...

test-e2e:
	$(GO) test -count=1 -timeout 80m -v -run . ./tests/...

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
