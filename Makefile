# Two commands matter: `make demo` and `make test`. Everything else is a step of those.
SHELL := /bin/bash
CARGO ?= cargo
WASM_TARGET := wasm32-wasip1
HOST := target/release/policy-host
# The release profile in Cargo.toml is tuned for the policy module's size. The native host is
# built with these overrides: fat LTO over wasmtime would cost minutes and buy nothing.
HOST_PROFILE := --config profile.release.lto=false --config profile.release.codegen-units=16 \
	--config profile.release.opt-level=3 --config 'profile.release.panic="unwind"' \
	--config profile.release.strip=false
RUST_SOURCES := Cargo.toml Cargo.lock $(shell find src -name '*.rs')
# policy-host's cargo features (tools/policy-host/Cargo.toml): `bench` (kwctl's bench) and `serve`
# (policy-server's HTTP API, the kube client). `run` and `annotate` need neither, so `make demo`
# builds the host without them (and unoptimised, DEMO_HOST below); test and bench build it with
# both. Another feature set is another wasmtime build (shared crates get other features), so
# `make test` builds the host once, with both, for everything.
HOST_FEATURES ?= --features policy-host/bench,policy-host/serve
# kwctl, when it is on PATH or KWCTL names it: the demo then evaluates and annotates with it
# and builds no host at all. `make demo KWCTL=` ignores an installed one.
KWCTL ?= $(shell command -v kwctl 2>/dev/null)

.PHONY: all demo test cluster-test cluster-soak wasm-target wasm-opt fmt-check clippy unit e2e rollout-check host clean \
	playground playground-build playground-target playground-test readme-test FORCE

all: annotated-policy.wasm

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

# binaryen's wasm-opt is part of the build (a smaller, faster module: docs/performance.md), installed
# when missing (.ci/system-packages). Debian's binaryen 108 cannot read the target_features
# section the release profile strips, hence rustc's wasm32-wasip1 features, named.
WASM_OPT ?= wasm-opt
WASM_OPT_FLAGS := --enable-bulk-memory --enable-sign-ext --enable-mutable-globals \
	--enable-nontrapping-float-to-int --enable-multivalue --enable-reference-types -O3
wasm-opt:
	@command -v $(WASM_OPT) >/dev/null || .ci/system-packages demo

# cargo's output before wasm-opt, kept for `make bench` (its size is reported).
CARGO_WASM := target/$(WASM_TARGET)/release/capi_bootstrap_rollout_policy.wasm
target/policy.cargo.wasm: $(RUST_SOURCES) | wasm-target
	$(CARGO) build --locked --target $(WASM_TARGET) --release -p capi-bootstrap-rollout-policy
	cp $(CARGO_WASM) $@

# Kubewarden's policy-build-rust action runs `cargo build --target=wasm32-wasip1 --release`,
# copies target/wasm32-wasip1/release/*.wasm to policy.wasm itself, then asks for
# annotated-policy.wasm. That copy is newer than everything policy.wasm depends on, so make
# would ship cargo's output without wasm-opt. A policy.wasm equal to cargo's output is therefore
# always made again, from that output: wasm-opt runs, cargo does not.
POLICY_WASM_IS_CARGOS := $(shell test -f policy.wasm && cmp -s policy.wasm $(CARGO_WASM) && echo yes)
ifeq ($(POLICY_WASM_IS_CARGOS),yes)
policy.wasm: FORCE | wasm-opt
	$(WASM_OPT) $(WASM_OPT_FLAGS) $(CARGO_WASM) -o $@
else
policy.wasm: target/policy.cargo.wasm | wasm-opt
	$(WASM_OPT) $(WASM_OPT_FLAGS) $< -o $@
endif
.PHONY: FORCE
FORCE:

# The shipped module plus a waPC function that panics: e2e-tests/tests/panic_probe.rs checks
# that a panic under the release profile (and wasm-opt) reaches the host as a named error.
target/panic-probe.wasm: $(RUST_SOURCES) | wasm-target wasm-opt
	$(CARGO) build --locked --target $(WASM_TARGET) --release -p capi-bootstrap-rollout-policy --features panic-probe
	$(WASM_OPT) $(WASM_OPT_FLAGS) $(CARGO_WASM) -o $@

# Always handed to cargo, which knows whether the binary is current for these features (a
# no-op takes a second); make re-reads its time, so what depends on it is remade only when
# cargo relinked it. With the benchmarks: the crates the tests build too, so the same features
# and one wasmtime build for both.
$(HOST): FORCE
	$(CARGO) build --locked --release -p policy-host -p policy-bench $(HOST_PROFILE) $(HOST_FEATURES)
host: $(HOST)

# The same for `make demo` without kwctl, with the demo's table runner (bin scenarios).
DEMO_HOST := target/demo/policy-host
$(DEMO_HOST): FORCE
	$(CARGO) build --locked --profile demo -p policy-host -p scenario-model

# What annotates the module: kwctl or policy-host, the same arguments, the same output.
ANNOTATE := annotate -m metadata.yml -u README.md -o annotated-policy.wasm policy.wasm

# Before anything is built: the Debian packages each command needs (.ci/system-packages).
# Listed first, so a serial make does this in its first seconds.
.PHONY: system-packages-demo system-packages-test
system-packages-demo:
	@.ci/system-packages demo
system-packages-test:
	@.ci/system-packages test

ifneq ($(strip $(KWCTL)),)
annotated-policy.wasm: policy.wasm metadata.yml README.md
	$(KWCTL) $(ANNOTATE)

# Through kwctl: only the policy module and the table runner (no wasmtime, a debug build).
demo: system-packages-demo annotated-policy.wasm
	$(CARGO) run --locked --quiet -p scenario-model --bin scenarios -- \
		--kwctl $(KWCTL) --module annotated-policy.wasm e2e-tests/scenarios
else
annotated-policy.wasm: policy.wasm metadata.yml README.md $(HOST)
	$(HOST) $(ANNOTATE)

# Without kwctl: the host as `run` and `annotate` need it (without `bench` and `serve`),
# unoptimised (cargo profile `demo`): half the build time, the same verdicts.
demo: system-packages-demo policy.wasm $(DEMO_HOST)
	$(DEMO_HOST) $(ANNOTATE)
	target/demo/scenarios --host $(DEMO_HOST) --module annotated-policy.wasm e2e-tests/scenarios
endif

fmt-check:
	$(CARGO) fmt --all -- --check

clippy: | wasm-target playground-target
	$(CARGO) clippy --locked --workspace --all-targets --all-features -- -D warnings
	$(CARGO) clippy --locked --target $(WASM_TARGET) -p capi-bootstrap-rollout-policy -- -D warnings
	$(CARGO) clippy --locked --target $(PLAYGROUND_TARGET) -p capi-rollout-playground --lib -- -D warnings

# tests/manifests.rs compares the annotated module's metadata section with metadata.yml.
unit: annotated-policy.wasm
	ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm $(CARGO) test --locked -p capi-bootstrap-rollout-policy

e2e: annotated-policy.wasm target/panic-probe.wasm
	ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm PANIC_PROBE_POLICY=$(CURDIR)/target/panic-probe.wasm \
	$(CARGO) test --locked --release -p policy-host -p e2e-tests -p policy-bench -p scenario-model \
		$(HOST_PROFILE) $(HOST_FEATURES)

# capi-rollout-check (capi-rollout-check/) on its manifest fixtures; a debug build is enough.
rollout-check:
	$(CARGO) test --locked -p capi-rollout-check

test: system-packages-test fmt-check clippy unit e2e rollout-check playground-test readme-test cluster-test kwctl-checks

# With kwctl (KWCTL=, as .ci/run hands it on): what the kwctl CI job checks (.ci/kwctl-checks:
# artifacthub-pkg.yml as kwctl writes it, make push to a registry on 127.0.0.1, pulled back and
# run). Without it, said in one line.
.PHONY: kwctl-checks
kwctl-checks: annotated-policy.wasm
ifneq ($(strip $(KWCTL)),)
	@.ci/system-packages kubewarden
	.ci/kwctl-checks
else
	@echo "make test: no kwctl (KWCTL=): the scenarios ran through policy-host; kwctl's push/pull and Artifact Hub checks not run"
endif

# The policy in front of a real control plane (cluster-test/README.md), with CAPI v1.12 and
# v1.14, behind `policy-host serve`, or Kubewarden's policy-server with POLICY_SERVER=/path/to/policy-server.
# capi-rollout-check's rotate is run against it as a person runs it (ROLLOUT_CHECK).
ROLLOUT_CHECK := target/debug/capi-rollout-check
$(ROLLOUT_CHECK): FORCE
	$(CARGO) build --locked -p capi-rollout-check
# With Kubewarden's tools given (.ci/run), TestKubewardenStack needs its OCI registry: installed
# here, before the cluster test, not only by kwctl-checks after it (a fresh machine found that).
# CLUSTER_TEST_RUN reaches the test as written: `'^TestCluster$/^reapply:'`, no `$$` needed.
cluster-test: annotated-policy.wasm $(HOST) $(ROLLOUT_CHECK)
	@if [ -n "$(strip $(KWCTL))$(KUBEWARDEN_CONTROLLER)" ]; then .ci/system-packages kubewarden; fi
	POLICY_HOST=$(CURDIR)/$(HOST) ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm ROLLOUT_CHECK=$(CURDIR)/$(ROLLOUT_CHECK) \
	CLUSTER_TEST_RUN='$(value CLUSTER_TEST_RUN)' cluster-test/run.sh

# Not part of `make test`: hours of CAPI's own traffic through the policy (cluster-test/README.md):
# TestSoak (CAPI v1.12) then TestSoakProviders (CAPI v1.10 with RKE2 and k3s), SOAK_DURATION each.
# One of them: make cluster-soak SOAK=TestSoakProviders.
SOAK_DURATION ?= 15m
SOAK ?= ^(TestSoak|TestSoakProviders)$$
cluster-soak: annotated-policy.wasm $(HOST)
	POLICY_HOST=$(CURDIR)/$(HOST) ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm \
	CLUSTER_TEST_RUN='$(SOAK)' SOAK_DURATION=$(SOAK_DURATION) CLUSTER_TEST_TIMEOUT=24h CAPI_MODULES=. \
	CAPI_EXTRA_MODULES=v1.10 CLUSTER_TEST_ARTIFACTS=$(CURDIR)/target/cluster-soak cluster-test/run.sh

# The browser playground (tools/playground/README.md): the rules built a second time, for
# wasm32-unknown-unknown with wasm-bindgen, a static page, the e2e scenarios as its examples.
# `make playground` builds it and serves it on http://127.0.0.1:$(PLAYGROUND_PORT)/.
PLAYGROUND_TARGET := wasm32-unknown-unknown
PLAYGROUND_PORT ?= 8088
PLAYGROUND_WWW := tools/playground/www
PLAYGROUND_WASM := $(PLAYGROUND_WWW)/pkg/capi_rollout_playground_bg.wasm
PLAYGROUND_SOURCES := tools/playground/Cargo.toml $(shell find tools/playground/src -name '*.rs')
# The CLI must be the very version of the wasm-bindgen crate in Cargo.lock; it is installed
# into target/tools once.
WASM_BINDGEN_VERSION = $(shell sed -n '/^name = "wasm-bindgen"$$/{n;s/^version = "\(.*\)"/\1/p;}' Cargo.lock)
TOOLS := $(CURDIR)/target/tools
WASM_BINDGEN := $(TOOLS)/bin/wasm-bindgen

playground-target:
	@rustup target list --installed | grep -qx $(PLAYGROUND_TARGET) || rustup target add $(PLAYGROUND_TARGET)

# --locked first (the CLI's own lockfile); without it when the registry lacks a locked version.
$(WASM_BINDGEN): Cargo.lock
	@test -n "$(WASM_BINDGEN_VERSION)" || { echo "no wasm-bindgen in Cargo.lock" >&2; exit 2; }
	@if [ "$$($@ --version 2>/dev/null)" != "wasm-bindgen $(WASM_BINDGEN_VERSION)" ]; then \
		echo "installing wasm-bindgen-cli $(WASM_BINDGEN_VERSION) into $(TOOLS)"; \
		$(CARGO) install --quiet --locked wasm-bindgen-cli --version =$(WASM_BINDGEN_VERSION) --root $(TOOLS) \
		|| $(CARGO) install --quiet wasm-bindgen-cli --version =$(WASM_BINDGEN_VERSION) --root $(TOOLS); \
	fi
	@touch $@

# Not passed through wasm-opt: that makes it bigger gzipped (docs/development.md).
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

# The page in Debian's headless Chromium (CHROMIUM=/usr/bin/chromium); the screenshot and the
# timings land in target/playground-artifacts/.
playground-test: playground-build tools/playground/tests/node_modules/.package-lock.json
	$(CARGO) test --locked -p capi-rollout-playground
	cd tools/playground/tests && node --test browser.test.mjs

# README.md as Artifact Hub and GitHub render it (markdown-it: CommonMark with GFM tables), in
# the same headless Chromium: no Markdown left raw, on it and on docs/*.md. Needs nothing
# built; the screenshot lands in target/readme-render/README.png.
tests/readme-render/node_modules/.package-lock.json: tests/readme-render/package-lock.json
	cd tests/readme-render && npm ci --no-audit --no-fund

readme-test: tests/readme-render/node_modules/.package-lock.json
	cd tests/readme-render && node --test render.test.mjs

# `make push REGISTRY=host[:port]/path`: `kwctl push` of annotated-policy.wasm to
# registry://$(REGISTRY)/capi-bootstrap-rollout-policy:v<version in Cargo.toml>; kwctl prints
# the immutable reference to sign. SOURCES=sources.yaml: kwctl's sources file (insecure_sources
# for a plain-HTTP registry). Credentials: Docker's config.json, as kwctl reads it.
POLICY_NAME := capi-bootstrap-rollout-policy
POLICY_VERSION = $(shell sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
# Publishing is kwctl's: push, artifacthub-pkg.yml and release stop before anything is built
# when there is none.
KWCTL_GOALS := $(filter push artifacthub-pkg.yml release,$(MAKECMDGOALS))
ifneq ($(KWCTL_GOALS),)
ifeq ($(strip $(KWCTL)),)
$(error make $(firstword $(KWCTL_GOALS)) needs kwctl: install it from https://github.com/kubewarden/kwctl/releases and put it on PATH, or name it with KWCTL=/path/to/kwctl)
endif
endif
.PHONY: push
push: annotated-policy.wasm
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=host[:port]/path [SOURCES=sources.yaml]" >&2; exit 2; }
	@test -n "$(POLICY_VERSION)" || { echo "no package version in Cargo.toml" >&2; exit 2; }
	$(KWCTL) push $(if $(SOURCES),--sources-path $(SOURCES)) annotated-policy.wasm \
		registry://$(REGISTRY)/$(POLICY_NAME):v$(POLICY_VERSION)

# Benchmarks (tools/bench/README.md), not part of `make test`: rewrites the generated part of
# docs/performance.md. BASELINE=other.wasm: another annotated module measured in the same run (the
# before of a change). For your own requests: `policy-host bench`, kwctl's bench.
.PHONY: bench
bench: annotated-policy.wasm target/policy.cargo.wasm
	$(CARGO) run --locked --quiet --release -p policy-bench $(HOST_PROFILE) $(HOST_FEATURES) --bin bench -- \
		--module annotated-policy.wasm --policy target/policy.cargo.wasm --output docs/performance.md \
		--command "make bench$(if $(BASELINE), BASELINE=$(BASELINE))" $(if $(BASELINE),--baseline $(BASELINE))

clean:
	$(CARGO) clean
	rm -f policy.wasm annotated-policy.wasm
	rm -rf $(PLAYGROUND_WWW)/pkg $(PLAYGROUND_WWW)/examples.json tools/playground/tests/node_modules \
		tests/readme-render/node_modules

# ---------------------------------------------------------------------------------------------
# Kubewarden's Makefile contract: the targets kubewarden/github-actions' reusable workflows and
# actions call (policy.wasm, annotated-policy.wasm and test are above).
.PHONY: fmt lint e2e-tests
fmt: fmt-check
lint: clippy
e2e-tests: e2e

# artifacthub-pkg.yml, written by `kwctl scaffold artifacthub` from metadata.yml and
# questions-ui.yml. kwctl takes the version from metadata.yml's io.kubewarden.policy.version
# and ignores --version, so `make artifacthub-pkg.yml VERSION=x.y.z` hands it a copy of
# metadata.yml with that version; the file is remade whenever its version is not VERSION. The
# default is the version in Cargo.toml. Bump every version with `make release`.
VERSION ?= $(POLICY_VERSION)
ARTIFACTHUB_METADATA := target/artifacthub/metadata.yml
ARTIFACTHUB_VERSION = $(shell sed -n 's/^version: //p' artifacthub-pkg.yml 2>/dev/null)
artifacthub-pkg.yml: metadata.yml questions-ui.yml \
		$(if $(filter-out $(VERSION),$(ARTIFACTHUB_VERSION)),FORCE)
	@test -n "$(VERSION)" || { echo "no VERSION and no package version in Cargo.toml" >&2; exit 2; }
	@mkdir -p $(dir $(ARTIFACTHUB_METADATA))
	sed 's/^\(  io\.kubewarden\.policy\.version:\).*/\1 $(VERSION)/' metadata.yml > $(ARTIFACTHUB_METADATA)
	@grep -qx '  io.kubewarden.policy.version: $(VERSION)' $(ARTIFACTHUB_METADATA) || \
		{ echo "metadata.yml: no io.kubewarden.policy.version annotation to set" >&2; exit 2; }
	$(KWCTL) scaffold artifacthub --metadata-path $(ARTIFACTHUB_METADATA) \
		--questions-path questions-ui.yml --output $@

# ---------------------------------------------------------------------------------------------
# The GitHub workflows and capi-rollout-check's action, linted like code: actionlint (with shellcheck
# over every `run:` script), shellcheck over the action's scripts, zizmor over .github/ and
# capi-rollout-check/action.yml, from PyPI at the hashes in .ci/requirements-lint.txt. zizmor runs --offline: the
# audits that ask GitHub's API are for GitHub.
LINT_VENV := $(TOOLS)/lint
ACTION_SCRIPTS := $(wildcard capi-rollout-check/action/*.sh)
.PHONY: lint-actions
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
lint: lint-actions
test: lint-actions

# ---------------------------------------------------------------------------------------------
# `make release VERSION=x.y.z`: every version at once (.ci/release says which), CHANGELOG.md's
# Unreleased notes become the entry for x.y.z, and artifacthub-pkg.yml is remade. Commits
# nothing: review, commit, tag vx.y.z and push the tag; release.yml does the rest.
.PHONY: release
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
