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
HOST_SOURCES := e2e-tests/Cargo.toml $(shell find e2e-tests/src -name '*.rs')

.PHONY: all demo test wasm-target wasm-opt fmt-check clippy unit e2e preflight host clean

all: annotated-policy.wasm

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

# binaryen's wasm-opt (Debian package binaryen) is part of the build: -O3 over cargo's output
# takes 12 % off the module and 4-8 % off the guest's instructions (BENCHMARKS.md). Installed
# here when missing, as rustup's target above. Debian's binaryen 108 cannot read the
# target_features section the release profile strips, hence the explicit features, which are
# the ones rustc enables for wasm32-wasip1.
WASM_OPT ?= wasm-opt
WASM_OPT_FLAGS := --enable-bulk-memory --enable-sign-ext --enable-mutable-globals \
	--enable-nontrapping-float-to-int --enable-multivalue --enable-reference-types -O3
wasm-opt:
	@command -v $(WASM_OPT) >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get install -y --no-install-recommends binaryen >/dev/null || \
			{ apt-get update >/dev/null && apt-get install -y --no-install-recommends binaryen >/dev/null; }; \
		else echo "wasm-opt not found: install binaryen (apt-get install binaryen)" >&2; exit 1; fi; }

# cargo's output before wasm-opt, kept for `make bench` (its size and speed are reported).
CARGO_WASM := target/$(WASM_TARGET)/release/capi_bootstrap_rollout_policy.wasm
target/policy.cargo.wasm: $(RUST_SOURCES) | wasm-target
	$(CARGO) build --locked --target $(WASM_TARGET) --release -p capi-bootstrap-rollout-policy
	cp $(CARGO_WASM) $@

policy.wasm: target/policy.cargo.wasm | wasm-opt
	$(WASM_OPT) $(WASM_OPT_FLAGS) $< -o $@

# The shipped module plus a waPC function that panics: e2e-tests/tests/panic_probe.rs checks
# that a panic under the release profile (and wasm-opt) reaches the host as a named error.
target/panic-probe.wasm: $(RUST_SOURCES) | wasm-target wasm-opt
	$(CARGO) build --locked --target $(WASM_TARGET) --release -p capi-bootstrap-rollout-policy --features panic-probe
	$(WASM_OPT) $(WASM_OPT_FLAGS) $(CARGO_WASM) -o $@

$(HOST): $(HOST_SOURCES) Cargo.lock
	$(CARGO) build --locked --release -p policy-host $(HOST_PROFILE)
host: $(HOST)

annotated-policy.wasm: policy.wasm metadata.yml README.md $(HOST)
	$(HOST) annotate -m metadata.yml -u README.md -o $@ policy.wasm

demo: annotated-policy.wasm
	$(CARGO) run --locked --quiet --release -p policy-host $(HOST_PROFILE) --bin scenarios -- --module annotated-policy.wasm e2e-tests/scenarios

fmt-check:
	$(CARGO) fmt --all -- --check

clippy: | wasm-target
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	$(CARGO) clippy --locked --target $(WASM_TARGET) -p capi-bootstrap-rollout-policy -- -D warnings

# tests/manifests.rs compares the annotated module's metadata section with metadata.yml.
unit: annotated-policy.wasm
	ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm $(CARGO) test --locked -p capi-bootstrap-rollout-policy

e2e: annotated-policy.wasm target/panic-probe.wasm
	ANNOTATED_POLICY=$(CURDIR)/annotated-policy.wasm PANIC_PROBE_POLICY=$(CURDIR)/target/panic-probe.wasm \
	$(CARGO) test --locked --release -p policy-host $(HOST_PROFILE)

# capi-rollout-check (preflight/) on its manifest fixtures; a debug build is enough.
preflight:
	$(CARGO) test --locked -p capi-rollout-check

test: fmt-check clippy unit e2e preflight

# `make push REGISTRY=host[:port]/path`: publishes annotated-policy.wasm as kwctl push does, to
# registry://$(REGISTRY)/capi-bootstrap-rollout-policy:v<version in Cargo.toml>, and prints the
# immutable reference to sign. SOURCES=sources.yaml: kwctl's sources file (insecure_sources
# lets a plain-HTTP registry on loopback in). Credentials: Docker's config.json.
POLICY_NAME := capi-bootstrap-rollout-policy
POLICY_VERSION = $(shell sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
.PHONY: push
push: annotated-policy.wasm $(HOST)
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=host[:port]/path [SOURCES=sources.yaml]" >&2; exit 2; }
	@test -n "$(POLICY_VERSION)" || { echo "no package version in Cargo.toml" >&2; exit 2; }
	$(HOST) push $(if $(SOURCES),--sources-path $(SOURCES)) annotated-policy.wasm \
		registry://$(REGISTRY)/$(POLICY_NAME):v$(POLICY_VERSION)

# Benchmarks, not part of `make test` (a few minutes; no timing is ever asserted): the rule
# engine natively and the annotated module in policy-host with a fresh instance per evaluation
# (as policy-server), a size sweep, the module's size with and without binaryen's wasm-opt, the
# guest's memory. Rewrites the generated part of BENCHMARKS.md. For your own requests:
# `policy-host bench -r REQUEST.json annotated-policy.wasm`, kwctl's bench.
.PHONY: bench
bench: annotated-policy.wasm target/policy.cargo.wasm $(HOST)
	$(CARGO) run --locked --quiet --release -p policy-host $(HOST_PROFILE) --bin bench -- \
		--module annotated-policy.wasm --policy target/policy.cargo.wasm --output BENCHMARKS.md \
		--command "make bench"

clean:
	$(CARGO) clean
	rm -f policy.wasm annotated-policy.wasm
