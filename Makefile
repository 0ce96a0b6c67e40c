# Muster — build, test, generate, verify.
SHELL := /usr/bin/env bash -o errexit -o pipefail -o nounset
.DEFAULT_GOAL := build

ROOT := $(abspath .)
BIN := $(ROOT)/bin
export GOBIN := $(BIN)

# Pinned tool versions; each is installed into ./bin with `go install`.
CONTROLLER_GEN_VERSION := v0.19.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
HELM_VERSION := v3.19.0
HELM := $(BIN)/helm-$(HELM_VERSION)
# Kubeflow's training-operator, run by the deploy suite in volcano mode. It
# is a module of its own (Kubernetes 0.31): installed, never in go.mod.
TRAINING_OPERATOR_VERSION := v1.9.3
TRAINING_OPERATOR := $(BIN)/training-operator-$(TRAINING_OPERATOR_VERSION)
# Volcano's vc-controller-manager (its Job, PodGroup and Queue controllers),
# run by the deploy suite beside the volcano profile: a module of its own
# (Kubernetes 0.30), built from its source, never in go.mod.
VOLCANO_VERSION := v1.10.0
VOLCANO_CONTROLLERS := $(BIN)/volcano-controller-manager-$(VOLCANO_VERSION)

# The binaries report the Kubernetes release they are built on as their
# version (muster-scheduler --version), as kube-scheduler does: component-base
# derives the emulated Kubernetes version and feature gates from it, so it
# must be that release, not Muster's. The commit says which Muster it is.
KUBE_VERSION := $(shell go list -m -f '{{.Version}}' k8s.io/kubernetes)
VERSION_PKG := k8s.io/component-base/version
VERSION_LDFLAGS := -X $(VERSION_PKG).gitVersion=$(KUBE_VERSION) \
	-X $(VERSION_PKG).gitMajor=$(patsubst v%,%,$(word 1,$(subst ., ,$(KUBE_VERSION)))) \
	-X $(VERSION_PKG).gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) \
	-X $(VERSION_PKG).gitCommit=$(shell git rev-parse HEAD 2>/dev/null) \
	-X $(VERSION_PKG).gitTreeState=$(shell git diff --quiet HEAD 2>/dev/null && echo clean || echo dirty) \
	-X $(VERSION_PKG).buildDate=$(shell git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)

GO_TEST_FLAGS ?=
# Integration suites start one in-process control plane per test binary.
INTEGRATION_TIMEOUT ?= 20m

.PHONY: build
build: ## Build muster-scheduler, the muster CLI and the bench's comparator into ./bin.
	go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/muster-scheduler ./cmd/muster-scheduler
	go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/muster ./cmd/muster
	cd comparators && go build -o $(BIN)/muster-comparator .

.PHONY: test
test: test-unit test-integration ## Unit and integration tests.

.PHONY: test-unit
test-unit:
	go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v /test/)

.PHONY: test-integration
test-integration: $(HELM) $(TRAINING_OPERATOR) $(VOLCANO_CONTROLLERS)
	HELM=$(HELM) TRAINING_OPERATOR=$(TRAINING_OPERATOR) VOLCANO_CONTROLLERS=$(VOLCANO_CONTROLLERS) go test $(GO_TEST_FLAGS) -timeout $(INTEGRATION_TIMEOUT) ./test/...

# Under the race detector the integration suite takes about 10 minutes on
# 2 cores; its timeout leaves room for a slower machine.
RACE_TIMEOUT ?= 30m

.PHONY: test-race
test-race: $(HELM) $(TRAINING_OPERATOR) $(VOLCANO_CONTROLLERS) ## Unit and integration tests under the race detector.
	go test $(GO_TEST_FLAGS) -race $$(go list ./... | grep -v /test/)
	HELM=$(HELM) TRAINING_OPERATOR=$(TRAINING_OPERATOR) VOLCANO_CONTROLLERS=$(VOLCANO_CONTROLLERS) go test $(GO_TEST_FLAGS) -race -timeout $(RACE_TIMEOUT) ./test/...

# Go fuzz targets, FUZZ_TIME each: go fuzzes one target of one package per
# run. Their seed corpora (f.Add, testdata/fuzz) run with the unit tests; a
# failing input is written to the package's testdata/fuzz/<target>.
FUZZ_TIME ?= 20s

.PHONY: fuzz
fuzz: ## Run each Go fuzz target for FUZZ_TIME (20s).
	go test -run '^$$' -fuzz '^FuzzResolveSpec$$' -fuzztime $(FUZZ_TIME) ./pkg/gang
	go test -run '^$$' -fuzz '^FuzzVector$$' -fuzztime $(FUZZ_TIME) ./pkg/queue
	go test -run '^$$' -fuzz '^FuzzCompute$$' -fuzztime $(FUZZ_TIME) ./pkg/queue
	go test -run '^$$' -fuzz '^FuzzChooseVictims$$' -fuzztime $(FUZZ_TIME) ./pkg/plugins/queuepolicy

# The soak test (TestSoak): random steps against a real apiserver, with the
# queue accounting audited and idle room checked after each. `make test`
# runs 500 steps; this runs SOAK_STEPS under the race detector, about an
# hour on 2 cores. Each run prints its seed; MUSTER_SOAK_SEED=<seed>
# replays one.
SOAK_STEPS ?= 5000
SOAK_TIMEOUT ?= 3h

.PHONY: soak
soak: ## Soak the scheduler: SOAK_STEPS (5,000) random steps under -race.
	MUSTER_SOAK_STEPS=$(SOAK_STEPS) go test $(GO_TEST_FLAGS) -race -count=1 -v \
		-timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' ./test/integration

# The muster-scheduler image, built without a container engine or registry
# (hack/image): a static binary on a distroless-like non-root base, written
# to $(IMAGE_DIR) as a `docker load` tarball and an OCI layout. The
# Dockerfile builds the same on gcr.io/distroless/static:nonroot.
IMAGE ?= ghcr.io/muster-sched/muster-scheduler:dev
IMAGE_PLATFORM ?= linux/amd64
IMAGE_DIR := _output/image

.PHONY: image
image: ## Build the container image into _output/image (no Docker needed).
	CGO_ENABLED=0 GOOS=$(word 1,$(subst /, ,$(IMAGE_PLATFORM))) GOARCH=$(word 2,$(subst /, ,$(IMAGE_PLATFORM))) \
		go build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" -o $(IMAGE_DIR)/muster-scheduler ./cmd/muster-scheduler
	cd hack/image && go vet . && go run . --binary $(ROOT)/$(IMAGE_DIR)/muster-scheduler \
		--out $(ROOT)/$(IMAGE_DIR) --tag $(IMAGE) --platform $(IMAGE_PLATFORM)
	if [ "$(IMAGE_PLATFORM)" = "$$(go env GOOS)/$$(go env GOARCH)" ]; then $(IMAGE_DIR)/muster-scheduler --version; fi

.PHONY: bench
bench: ## Go benchmarks of the plugins, then the standard scenario suite side by side (tables; pictures and JSON in _output/bench).
	go test -run '^$$' -bench . -benchmem ./pkg/...
	go run ./cmd/muster bench --out _output/bench test/scenarios

.PHONY: sandbox
sandbox: ## Run the examples on an embedded control plane and print the report.
	go run ./cmd/muster sandbox examples

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy, clients, listers, informers and CRDs.
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/update-codegen.sh

.PHONY: verify
verify: $(CONTROLLER_GEN) ## Fail if generated code is stale, code is unformatted or go vet complains.
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/verify.sh

$(CONTROLLER_GEN):
	go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

# helm is installed outside the module (go.mod is not touched); bin/helm
# points at the pinned version. The flags are those of helm's release build:
# its version, and the Kubernetes release Muster is built on as the default
# for `helm template` and `helm lint` (a plain `go install` says 1.20).
HELM_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(word 2,$(subst ., ,$(KUBE_VERSION)))
$(HELM):
	rm -f $(BIN)/helm
	go install -ldflags "$(HELM_LDFLAGS)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/helm $@
	ln -sf $(notdir $@) $(BIN)/helm

.PHONY: helm
helm: $(HELM) ## Install the pinned helm into ./bin.

# The training-operator is installed outside the module, as helm is;
# bin/training-operator points at the pinned version. The deploy suite reads
# the module and version from the binary and finds its CRDs and ClusterRole
# in the module cache, where `go install` put its source.
$(TRAINING_OPERATOR):
	rm -f $(BIN)/training-operator
	go install github.com/kubeflow/training-operator/cmd/training-operator.v1@$(TRAINING_OPERATOR_VERSION)
	mv $(BIN)/training-operator.v1 $@
	ln -sf $(notdir $@) $(BIN)/training-operator

.PHONY: training-operator
training-operator: $(TRAINING_OPERATOR) ## Install the pinned Kubeflow training-operator into ./bin.

# vc-controller-manager cannot be installed with `go install ...@version`:
# Volcano's go.mod has replace directives, which go install refuses. It is
# built inside its module's source, downloaded into the module cache, with
# Volcano's go.mod and go.sum; its version is stamped where --version reads
# it, and the deploy suite finds the CRDs and ClusterRole of that version.
VOLCANO_SRC = $(shell go env GOMODCACHE)/volcano.sh/volcano@$(VOLCANO_VERSION)
$(VOLCANO_CONTROLLERS):
	rm -f $(BIN)/volcano-controller-manager
	cd / && go mod download volcano.sh/volcano@$(VOLCANO_VERSION)
	GOWORK=off GOFLAGS=-mod=readonly go build -C $(VOLCANO_SRC) -buildvcs=false \
		-ldflags "-X volcano.sh/volcano/pkg/version.Version=$(VOLCANO_VERSION)" -o $@ ./cmd/controller-manager
	ln -sf $(notdir $@) $(BIN)/volcano-controller-manager

.PHONY: volcano-controllers
volcano-controllers: $(VOLCANO_CONTROLLERS) ## Build the pinned Volcano vc-controller-manager into ./bin.

.PHONY: clean
clean:
	rm -rf $(BIN)

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
