# Symphony developer targets. CI runs .ci/run, which runs `make test`.
GO      ?= go
BIN     := bin/symphony
PKGS    := ./...

.PHONY: build test lint bench demo experiments check-experiments record-experiments fuzz clean onnxruntime models onnx-acceptance deploy-check proto

# The production binary and the bench harness, side by side: symphony runs
# its bench commands (sim, demo, bench) through symphony-bench.
# -buildvcs=auto stamps the commit into the binaries (symphony --version,
# the build-info metric) even where GOFLAGS turns it off; VERSION, if set
# (a release tag, or the image build's, which has no .git), names it too.
VERSION ?=
BUILDFLAGS = -buildvcs=auto $(if $(VERSION),-ldflags "-X github.com/symphony-serving/symphony/cmd/internal/daemon.version=$(VERSION)")
build:
	$(GO) build $(BUILDFLAGS) -o $(BIN) ./cmd/symphony
	$(GO) build $(BUILDFLAGS) -o bin/symphony-bench ./cmd/symphony-bench

# The README's test command: every package, with the race detector, then
# the paper's evaluations against their recorded figures.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)
	$(MAKE) check-experiments

# ONNX Runtime's shared library for the ONNX executor (backend/onnx), from
# the npm package onnxruntime-node, which ships it for linux/x64; into a
# git-ignored folder. The backend finds it with --onnxruntime-lib or
# SYMPHONY_ONNXRUNTIME_LIB, and tests find it here.
ORT_VERSION := 1.24.1
ORT_DIR     := .cache/onnxruntime-$(ORT_VERSION)
ORT_LIB     := $(ORT_DIR)/libonnxruntime.so.1
onnxruntime: $(ORT_LIB)
$(ORT_LIB):
	mkdir -p $(ORT_DIR)
	cd $(ORT_DIR) && npm pack --silent onnxruntime-node@$(ORT_VERSION) >/dev/null && \
	  tar xzf onnxruntime-node-$(ORT_VERSION).tgz package/bin/napi-v6/linux/x64/libonnxruntime.so.1 && \
	  mv package/bin/napi-v6/linux/x64/libonnxruntime.so.1 . && rm -rf package onnxruntime-node-$(ORT_VERSION).tgz
	@echo "ONNX Runtime $(ORT_VERSION): $(ORT_LIB)"

# The benchmark models (bench/modelgen: a ResNet-style CNN; the committed
# testdata/models are too small to measure anything but overhead) as a
# model repository in a git-ignored folder: model.onnx and a config.yaml
# without a profile, which symphony-bench profile measures and adds.
# Idempotent: an unchanged model keeps its config.yaml, profile included.
MODELS_DIR := .cache/models
models:
	$(GO) run ./cmd/symphony-bench models --out $(MODELS_DIR)

# The ONNX acceptance measurements (issue 16) on the benchmark model:
# profile, live profile adherence at 70% load, and live goodput against
# the simulator's; for a quiet machine. Results in out/onnx-acceptance.
onnx-acceptance:
	bench/scripts/onnx-acceptance.sh

# The gRPC protocol's Go code in frontend/gateway/inferencepb, generated
# from its inference.proto and committed (CI does not run protoc): run
# this after editing the .proto. protoc is the system's (apt-get install
# protobuf-compiler: 3.21.12 on Debian 12), the two plugins are pinned and
# installed into the git-ignored .cache/bin.
PROTOC_VERSION             := 3.21.12
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
PROTO_BIN                  := $(CURDIR)/.cache/bin
proto:
	@protoc --version | grep -qx 'libprotoc $(PROTOC_VERSION)' || { echo "make proto: want protoc $(PROTOC_VERSION), have $$(protoc --version 2>&1)" >&2; exit 1; }
	GOBIN=$(PROTO_BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(PROTO_BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$(PROTO_BIN):$$PATH" protoc --proto_path=. \
	  --go_out=. --go_opt=paths=source_relative \
	  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
	  frontend/gateway/inferencepb/inference.proto

# staticcheck (v0.8.2 is its 2026.2.2 release), pinned, on both builds (the rdma build's cgo files
# included); .ci/run runs it before the tests.
STATICCHECK_VERSION := v0.8.2
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags rdma ./...

# The Kubernetes manifests (deploy/k8s), checked offline: kustomize renders
# them; kubeconform validates them with -strict (an unknown field or a
# duplicate key fails) against JSON schemas made by deploy/k8sschema from
# Kubernetes' OpenAPI document, which the Go module proxy serves in module
# k8s.io/kubernetes (kubeconform's usual schemas are on GitHub, which CI
# cannot reach); and deploy/argscheck runs each Symphony container's args,
# environment and mounted config file through the binary's --print-config.
# Tools, schemas and the rendered manifests go to .cache/.
K8S_VERSION         := 1.36.3
KUBECONFORM_VERSION := v0.8.0
KUSTOMIZE_VERSION   := v5.8.2
DEPLOY_TOOLS        := $(CURDIR)/.cache/bin
K8S_SCHEMA_DIR      := .cache/k8s-schemas
K8S_SCHEMAS         := $(K8S_SCHEMA_DIR)/v$(K8S_VERSION)-standalone-strict
deploy-check: $(K8S_SCHEMAS)/.done
	GOBIN=$(DEPLOY_TOOLS) $(GO) install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)
	GOBIN=$(DEPLOY_TOOLS) $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mkdir -p .cache/deploy
	$(DEPLOY_TOOLS)/kustomize build deploy/k8s > .cache/deploy/symphony.yaml
	$(DEPLOY_TOOLS)/kustomize build deploy/k8s/live > .cache/deploy/symphony-live.yaml
	$(DEPLOY_TOOLS)/kubeconform -strict -summary -kubernetes-version $(K8S_VERSION) \
	  -schema-location $(K8S_SCHEMA_DIR) .cache/deploy/symphony.yaml .cache/deploy/symphony-live.yaml deploy/k8s/extras
	$(GO) build -o .cache/deploy/symphony ./cmd/symphony
	$(GO) run ./deploy/argscheck -symphony .cache/deploy/symphony .cache/deploy/symphony.yaml deploy/k8s/extras/*.yaml
	$(GO) run ./deploy/argscheck -symphony .cache/deploy/symphony .cache/deploy/symphony-live.yaml
$(K8S_SCHEMAS)/.done: deploy/k8sschema/main.go
	rm -rf $(K8S_SCHEMAS)
	json=$$(cd / && $(GO) mod download -json k8s.io/kubernetes@v$(K8S_VERSION)) || { echo "$$json" >&2; exit 1; }; \
	dir=$$(echo "$$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	$(GO) run ./deploy/k8sschema -in "$$dir/api/openapi-spec/swagger.json" -out $(K8S_SCHEMAS)
	touch $@

# Go benchmarks (allocation counts included) and the scheduler-alone
# throughput benchmark of the paper's Figure 11 (left).
bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./scheduler/...
	$(BIN) bench scheduler

# The main job on the bundled default: a whole cluster in one process on
# loopback TCP, driven by the load generator.
demo: build
	$(BIN) demo

# The paper's evaluations, one command each (bench/experiment; `symphony
# experiment list`), in full: CSV, JSON and the figures (SVG, PNG) in
# out/experiments/NAME; then the cost planner's study, which is not a
# figure of the Symphony paper.
experiments: build
	$(BIN) experiment all --out out/experiments
	$(BIN) provision experiment --instances 500 --seed 1 --csv out/provision/experiment.csv

# Every deterministic evaluation (the simulator's) rerun and compared, to
# the printed digit, with the figures recorded in testdata/experiments:
# the quick set and the full one. A difference fails with the figures that
# moved. After a change meant to move them, record-experiments rewrites
# the recordings; commit them with the docs/benchmarks.md figures they feed.
EXPERIMENTS_OUT := out/experiments-check
check-experiments: build
	mkdir -p $(EXPERIMENTS_OUT)
	$(BIN) experiment all --quick --check testdata/experiments --out $(EXPERIMENTS_OUT)/quick --quiet > $(EXPERIMENTS_OUT)/quick.txt
	$(BIN) experiment all --check testdata/experiments --out $(EXPERIMENTS_OUT)/full --quiet > $(EXPERIMENTS_OUT)/full.txt
record-experiments: build
	mkdir -p $(EXPERIMENTS_OUT)
	$(BIN) experiment all --quick --record testdata/experiments --out $(EXPERIMENTS_OUT)/quick --quiet > $(EXPERIMENTS_OUT)/quick.txt
	$(BIN) experiment all --record testdata/experiments --out $(EXPERIMENTS_OUT)/full --quiet > $(EXPERIMENTS_OUT)/full.txt

# A short fuzzing pass over every decoder of external bytes.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 60s -fuzzminimizetime 5s ./bench/workload/
	$(GO) test -run '^$$' -fuzz '^FuzzParseRateTrace$$' -fuzztime 60s -fuzzminimizetime 5s ./bench/workload/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 60s -fuzzminimizetime 5s ./scheduler/serving/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 60s -fuzzminimizetime 5s ./transport/wire/
	$(GO) test -run '^$$' -fuzz '^FuzzFrames$$' -fuzztime 60s -fuzzminimizetime 5s ./transport/wire/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeInferRequest$$' -fuzztime 60s -fuzzminimizetime 5s ./frontend/gateway/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeGRPCRequest$$' -fuzztime 60s -fuzzminimizetime 5s ./frontend/gateway/
	$(GO) test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime 60s -fuzzminimizetime 5s ./cmd/internal/daemon/
	$(GO) test -run '^$$' -fuzz '^FuzzParseCBC$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/lpsolve/
	$(GO) test -run '^$$' -fuzz '^FuzzParseGLPK$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/lpsolve/
	$(GO) test -run '^$$' -fuzz '^FuzzSolutionAssignment$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/
	$(GO) test -run '^$$' -fuzz '^FuzzParseApp$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/provision/
	$(GO) test -run '^$$' -fuzz '^FuzzParseModelFile$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/strictyaml/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeScheduler$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/registry/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeBackend$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/registry/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeFrontend$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/registry/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeModel$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/registry/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeAssignment$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/registry/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRoutes$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/registry/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeReport$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/registry/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEpoch$$' -fuzztime 60s -fuzzminimizetime 5s ./partition/registry/

clean:
	rm -rf bin out
