# `make demo`, `make check`, `make test`: what each target does is in docs/development.md#the-makefile.
SHELL := /bin/bash
CARGO ?= cargo
WASM_TARGET := wasm32-wasip1
PLAYGROUND_TARGET := wasm32-unknown-unknown
HOST := target/release/policy-host
DEMO_HOST := target/demo/policy-host
ROLLOUT_CHECK := target/debug/capi-rollout-check
CARGO_WASM := target/$(WASM_TARGET)/release/capi_bootstrap_rollout_policy.wasm
# The native host's overrides of the release profile (tuned for the wasm module's size).
HOST_PROFILE := --config profile.release.lto=false --config profile.release.codegen-units=16 \
	--config profile.release.opt-level=3 --config 'profile.release.panic="unwind"' \
	--config profile.release.strip=false
HOST_FEATURES ?= --features policy-host/bench,policy-host/serve
RUST_SOURCES := Cargo.toml Cargo.lock $(shell find src -name '*.rs')
KWCTL ?= $(shell command -v kwctl 2>/dev/null)
WASM_OPT ?= wasm-opt
# rustc's wasm32-wasip1 features, named: Debian's binaryen cannot read the section that says them.
WASM_OPT_FLAGS := --enable-bulk-memory --enable-sign-ext --enable-mutable-globals \
	--enable-nontrapping-float-to-int --enable-multivalue --enable-reference-types -O3
ANNOTATE := annotate -m metadata.yml -u README.md -o annotated-policy.wasm policy.wasm
# A policy.wasm that is cargo's output copied (Kubewarden's build action) goes through wasm-opt again.
POLICY_WASM_IS_CARGOS := $(shell test -f policy.wasm && cmp -s policy.wasm $(CARGO_WASM) && echo yes)
POLICY_WASM_INPUT := $(if $(POLICY_WASM_IS_CARGOS),FORCE,target/policy.cargo.wasm)
POLICY_WASM_SOURCE := $(if $(POLICY_WASM_IS_CARGOS),$(CARGO_WASM),target/policy.cargo.wasm)
# With kwctl: kwctl annotates and evaluates, no host is built; without it, policy-host does.
ANNOTATOR := $(if $(strip $(KWCTL)),$(KWCTL),$(HOST))
ANNOTATOR_BUILD := $(if $(strip $(KWCTL)),,$(HOST))
DEMO_NEEDS := $(if $(strip $(KWCTL)),annotated-policy.wasm,policy.wasm $(DEMO_HOST))
define DEMO_WITH_KWCTL
$(CARGO) run --locked --quiet -p scenario-model --bin scenarios -- \
	--kwctl $(KWCTL) --module annotated-policy.wasm e2e-tests/scenarios
endef
define DEMO_WITH_HOST
$(DEMO_HOST) $(ANNOTATE)
target/demo/scenarios --host $(DEMO_HOST) --module annotated-policy.wasm e2e-tests/scenarios
endef
DEMO_RUN = $(if $(strip $(KWCTL)),$(DEMO_WITH_KWCTL),$(DEMO_WITH_HOST))
SOAK_DURATION ?= 15m
SOAK ?= ^(TestSoak|TestSoakProviders)$$
PLAYGROUND_PORT ?= 8088
PLAYGROUND_WWW := tools/playground/www
PLAYGROUND_WASM := $(PLAYGROUND_WWW)/pkg/capi_rollout_playground_bg.wasm
PLAYGROUND_SOURCES := tools/playground/Cargo.toml $(shell find tools/playground/src -name '*.rs')
WASM_BINDGEN_VERSION = $(shell sed -n '/^name = "wasm-bindgen"$$/{n;s/^version = "\(.*\)"/\1/p;}' Cargo.lock)
TOOLS := $(CURDIR)/target/tools
WASM_BINDGEN := $(TOOLS)/bin/wasm-bindgen
LINT_VENV := $(TOOLS)/lint
ACTION_SCRIPTS := $(wildcard capi-rollout-check/action/*.sh)
POLICY_NAME := capi-bootstrap-rollout-policy
POLICY_VERSION = $(shell sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
VERSION ?= $(POLICY_VERSION)
ARTIFACTHUB_METADATA := target/artifacthub/metadata.yml
ARTIFACTHUB_VERSION = $(shell sed -n 's/^version: //p' artifacthub-pkg.yml 2>/dev/null)
KWCTL_GOALS := $(filter push artifacthub-pkg.yml release,$(MAKECMDGOALS))
ifneq ($(KWCTL_GOALS),)
ifeq ($(strip $(KWCTL)),)
$(error make $(firstword $(KWCTL_GOALS)) needs kwctl: install it from https://github.com/kubewarden/kwctl/releases and put it on PATH, or name it with KWCTL=/path/to/kwctl)
endif
endif

.PHONY: all demo check test fmt lint e2e-tests system-packages-demo system-packages-test wasm-target \
	wasm-opt playground-target host fmt-check clippy clippy-check check-unit unit e2e rollout-check \
	kwctl-checks add-provider-test cluster-test \
	cluster-soak playground playground-build playground-test readme-test lint-actions push bench \
	release clean FORCE

all: annotated-policy.wasm

# The fast loop: the Rust checks and tests, the e2e scenarios; no cluster, browser or linters.
# The fast loop: the policy, the CLI and the scenarios (fmt, clippy, tests). The scenarios run
# as `make demo` runs them (kwctl, else the unoptimised demo host), so no optimised wasmtime is
# built; the tools' own clippy and tests, and the e2e tests in the optimised host, are make test's.
check: fmt-check clippy-check demo check-unit rollout-check

# Everything CI runs (.ci/run).
test: system-packages-test fmt-check clippy unit e2e rollout-check add-provider-test playground-test readme-test cluster-test kwctl-checks lint-actions

# Kubewarden's Makefile contract (kubewarden/github-actions).
fmt: fmt-check
lint: clippy lint-actions
e2e-tests: e2e

system-packages-demo:
	@.ci/system-packages demo

system-packages-test:
	@.ci/system-packages test

demo: system-packages-demo $(DEMO_NEEDS)
	$(DEMO_RUN)

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

playground-target:
	@rustup target list --installed | grep -qx $(PLAYGROUND_TARGET) || rustup target add $(PLAYGROUND_TARGET)

wasm-opt:
	@command -v $(WASM_OPT) >/dev/null || .ci/system-packages demo

target/policy.cargo.wasm: $(RUST_SOURCES) | wasm-target
	$(CARGO) build --locked --target $(WASM_TARGET) --release -p capi-bootstrap-rollout-policy
	cp $(CARGO_WASM) $@

policy.wasm: $(POLICY_WASM_INPUT) | wasm-opt
	$(WASM_OPT) $(WASM_OPT_FLAGS) $(POLICY_WASM_SOURCE) -o $@

# The shipped module plus a waPC function that panics (e2e-tests/tests/panic_probe.rs).
target/panic-probe.wasm: $(RUST_SOURCES) | wasm-target wasm-opt
	$(CARGO) build --locked --target $(WASM_TARGET) --release -p capi-bootstrap-rollout-policy --features panic-probe
	$(WASM_OPT) $(WASM_OPT_FLAGS) $(CARGO_WASM) -o $@

$(HOST): FORCE
	$(CARGO) build --locked --release -p policy-host -p policy-bench $(HOST_PROFILE) $(HOST_FEATURES)

host: $(HOST)

$(DEMO_HOST): FORCE
	$(CARGO) build --locked --profile demo -p policy-host -p scenario-model

$(ROLLOUT_CHECK): FORCE
	$(CARGO) build --locked -p capi-rollout-check

annotated-policy.wasm: policy.wasm metadata.yml README.md $(ANNOTATOR_BUILD)
	$(ANNOTATOR) $(ANNOTATE)

fmt-check:
	$(CARGO) fmt --all -- --check

clippy: | wasm-target playground-target
	$(CARGO) clippy --locked --workspace --all-targets --all-features -- -D warnings
	$(CARGO) clippy --locked --target $(WASM_TARGET) -p capi-bootstrap-rollout-policy -- -D warnings
	$(CARGO) clippy --locked --target $(PLAYGROUND_TARGET) -p capi-rollout-playground --lib -- -D warnings

unit: annotated-policy.wasm
	ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm $(CARGO) test --locked -p capi-bootstrap-rollout-policy

clippy-check: | wasm-target
	$(CARGO) clippy --locked -p capi-bootstrap-rollout-policy -p capi-rollout-check --all-targets -- -D warnings
	$(CARGO) clippy --locked --target $(WASM_TARGET) -p capi-bootstrap-rollout-policy -- -D warnings

# The policy's tests on the module `make demo` annotated (after it, also under make -j).
check-unit: | demo
	ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm $(CARGO) test --locked -p capi-bootstrap-rollout-policy

e2e: annotated-policy.wasm target/panic-probe.wasm
	ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm PANIC_PROBE_POLICY=$(CURDIR)/target/panic-probe.wasm \
	$(CARGO) test --locked --release -p policy-host -p e2e-tests -p policy-bench -p scenario-model \
		$(HOST_PROFILE) $(HOST_FEATURES)

rollout-check:
	$(CARGO) test --locked -p capi-rollout-check

# A bootstrap provider in a group of its own and an infrastructure kind, added to a copy of the
# checkout: only their records, scenarios and generated files change, and make check passes on
# it (tests/adding_a_provider.rs; the copy and its build in target/add-provider/).
add-provider-test:
	KWCTL=$(KWCTL) $(CARGO) test --locked -p capi-bootstrap-rollout-policy --test adding_a_provider -- --ignored --nocapture

kwctl-checks: annotated-policy.wasm
ifneq ($(strip $(KWCTL)),)
	@.ci/system-packages kubewarden
	.ci/kwctl-checks
else
	@echo "make test: no kwctl (KWCTL=): the scenarios ran through policy-host; kwctl's push/pull and Artifact Hub checks not run"
endif

# CLUSTER_TEST_RUN reaches the test as written: `'^TestCluster$/^reapply:'`, no `$$` needed.
cluster-test: annotated-policy.wasm $(HOST) $(ROLLOUT_CHECK)
	@if [ -n "$(strip $(KWCTL))$(KUBEWARDEN_CONTROLLER)" ]; then .ci/system-packages kubewarden; fi
	POLICY_HOST=$(CURDIR)/$(HOST) ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm ROLLOUT_CHECK=$(CURDIR)/$(ROLLOUT_CHECK) \
	CLUSTER_TEST_RUN='$(value CLUSTER_TEST_RUN)' cluster-test/run.sh

cluster-soak: annotated-policy.wasm $(HOST)
	POLICY_HOST=$(CURDIR)/$(HOST) ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm \
	CLUSTER_TEST_RUN='$(SOAK)' SOAK_DURATION=$(SOAK_DURATION) CLUSTER_TEST_TIMEOUT=24h CAPI_MODULES=. \
	CAPI_EXTRA_MODULES=v1.10 CLUSTER_TEST_ARTIFACTS=$(CURDIR)/target/cluster-soak cluster-test/run.sh

$(WASM_BINDGEN): Cargo.lock
	@test -n "$(WASM_BINDGEN_VERSION)" || { echo "no wasm-bindgen in Cargo.lock" >&2; exit 2; }
	@if [ "$$($@ --version 2>/dev/null)" != "wasm-bindgen $(WASM_BINDGEN_VERSION)" ]; then \
		echo "installing wasm-bindgen-cli $(WASM_BINDGEN_VERSION) into $(TOOLS)"; \
		$(CARGO) install --quiet --locked wasm-bindgen-cli --version =$(WASM_BINDGEN_VERSION) --root $(TOOLS) \
		|| $(CARGO) install --quiet wasm-bindgen-cli --version =$(WASM_BINDGEN_VERSION) --root $(TOOLS); \
	fi
	@touch $@

$(PLAYGROUND_WASM): $(RUST_SOURCES) $(PLAYGROUND_SOURCES) $(WASM_BINDGEN) | playground-target
	$(CARGO) build --locked --profile playground --target $(PLAYGROUND_TARGET) -p capi-rollout-playground --lib
	$(WASM_BINDGEN) --target web --no-typescript --remove-name-section --remove-producers-section \
		--out-dir $(PLAYGROUND_WWW)/pkg target/$(PLAYGROUND_TARGET)/playground/capi_rollout_playground.wasm

$(PLAYGROUND_WWW)/examples.json: $(RUST_SOURCES) $(PLAYGROUND_SOURCES) $(wildcard e2e-tests/scenarios/*/*)
	$(CARGO) run --locked --quiet -p capi-rollout-playground --bin playground-examples -- e2e-tests/scenarios $@

playground-build: $(PLAYGROUND_WASM) $(PLAYGROUND_WWW)/examples.json

playground: playground-build
	python3 tools/playground/serve.py $(PLAYGROUND_WWW) $(PLAYGROUND_PORT)

tools/playground/tests/node_modules/.package-lock.json: tools/playground/tests/package-lock.json
	cd tools/playground/tests && npm ci --no-audit --no-fund

playground-test: playground-build tools/playground/tests/node_modules/.package-lock.json
	$(CARGO) test --locked -p capi-rollout-playground
	cd tools/playground/tests && node --test browser.test.mjs

tests/readme-render/node_modules/.package-lock.json: tests/readme-render/package-lock.json
	cd tests/readme-render && npm ci --no-audit --no-fund

readme-test: tests/readme-render/node_modules/.package-lock.json
	cd tests/readme-render && node --test render.test.mjs

$(LINT_VENV)/.installed: .ci/requirements-lint.txt
	rm -rf $(LINT_VENV)
	python3 -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes \
		--only-binary :all: -r $<
	@touch $@

lint-actions: $(LINT_VENV)/.installed
	PATH="$(LINT_VENV)/bin:$$PATH" actionlint -no-color .github/workflows/*.yml
	$(LINT_VENV)/bin/shellcheck -x $(ACTION_SCRIPTS) .ci/run .ci/release .ci/system-packages .ci/kwctl-checks cluster-test/*.sh cluster-test/capi/*.sh cluster-test/hack/*.sh
	$(LINT_VENV)/bin/zizmor --offline --no-progress --persona auditor .github capi-rollout-check/action.yml

push: annotated-policy.wasm
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=host[:port]/path [SOURCES=sources.yaml]" >&2; exit 2; }
	@test -n "$(POLICY_VERSION)" || { echo "no package version in Cargo.toml" >&2; exit 2; }
	$(KWCTL) push $(if $(SOURCES),--sources-path $(SOURCES)) annotated-policy.wasm \
		registry://$(REGISTRY)/$(POLICY_NAME):v$(POLICY_VERSION)

bench: annotated-policy.wasm target/policy.cargo.wasm
	$(CARGO) run --locked --quiet --release -p policy-bench $(HOST_PROFILE) $(HOST_FEATURES) --bin bench -- \
		--module annotated-policy.wasm --policy target/policy.cargo.wasm --output docs/performance.md \
		--command "make bench$(if $(BASELINE), BASELINE=$(BASELINE))" $(if $(BASELINE),--baseline $(BASELINE))

artifacthub-pkg.yml: metadata.yml questions-ui.yml \
		$(if $(filter-out $(VERSION),$(ARTIFACTHUB_VERSION)),FORCE)
	@test -n "$(VERSION)" || { echo "no VERSION and no package version in Cargo.toml" >&2; exit 2; }
	@mkdir -p $(dir $(ARTIFACTHUB_METADATA))
	sed 's/^\(  io\.kubewarden\.policy\.version:\).*/\1 $(VERSION)/' metadata.yml > $(ARTIFACTHUB_METADATA)
	@grep -qx '  io.kubewarden.policy.version: $(VERSION)' $(ARTIFACTHUB_METADATA) || \
		{ echo "metadata.yml: no io.kubewarden.policy.version annotation to set" >&2; exit 2; }
	$(KWCTL) scaffold artifacthub --metadata-path $(ARTIFACTHUB_METADATA) \
		--questions-path questions-ui.yml --output $@

clean:
	$(CARGO) clean
	rm -f policy.wasm annotated-policy.wasm
	rm -rf $(PLAYGROUND_WWW)/pkg $(PLAYGROUND_WWW)/examples.json tools/playground/tests/node_modules \
		tests/readme-render/node_modules

FORCE:

release:
	@case "$(origin VERSION)" in command\ line|environment*) ;; \
		*) echo "usage: make release VERSION=x.y.z" >&2; exit 2;; esac
	.ci/release $(VERSION)
	$(MAKE) artifacthub-pkg.yml VERSION=$(patsubst v%,%,$(VERSION))
	@echo "next: git commit -am 'Release v$(patsubst v%,%,$(VERSION))' && git tag v$(patsubst v%,%,$(VERSION)) && git push origin HEAD v$(patsubst v%,%,$(VERSION))"

# What the records make (src/capi/providers.rs, src/capi/infrastructure.rs): the marked regions
# of metadata.yml, policy.yaml, questions-ui.yml, docs/settings.md, docs/context-aware.md and the
# README's lookup RBAC, artifacthub-pkg.yml's annotations as kwctl writes them from the first and
# third (tests/generate/; no kwctl needed), and docs/infrastructure.md's generated part
# (tests/infrastructure.rs). Without the UPDATE_ variables the same tests fail when a file differs.
.PHONY: generate
generate:
	UPDATE_GENERATED=1 $(CARGO) test -p capi-bootstrap-rollout-policy --test providers -- \
		--exact the_generated_regions_are_what_the_records_make
	UPDATE_INFRASTRUCTURE_DOCS=1 $(CARGO) test -p capi-bootstrap-rollout-policy --test infrastructure -- \
		--exact the_docs_table_is_the_records
