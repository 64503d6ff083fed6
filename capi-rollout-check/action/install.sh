#!/usr/bin/env bash
# Installs capi-rollout-check for the GitHub Action in action.yml and writes its path to
# $GITHUB_OUTPUT (`path=...`).
#
# On Linux x64 and arm64 runners: the release's static binary, refused unless its sha256 is the
# one in the release's .sha256 file and it reports the version asked for. Elsewhere, with
# VERSION=source, or when the action's own version has no release yet (a commit after the last
# release): built from the action's own source with cargo.
#
# Environment: VERSION (the action's `version` input: empty for the action's own version, x.y.z
# or vx.y.z, or `source`); GITHUB_ACTION_PATH, RUNNER_OS, RUNNER_ARCH, RUNNER_TEMP and
# GITHUB_OUTPUT, as the runner sets them. Tests set CAPI_ROLLOUT_CHECK_RELEASES (where the
# releases are, instead of the repository's GitHub releases) and CARGO.
set -euo pipefail

root=${GITHUB_ACTION_PATH:?the directory of the action}
dest=${RUNNER_TEMP:?a temporary directory}/capi-rollout-check
output=${GITHUB_OUTPUT:?the output file of the step}

package_field() { # FILE KEY: KEY's value in FILE's [package] table
  sed -n '/^\[package\]/,/^\[/s/^'"$2"' *= *"\(.*\)"$/\1/p' "$1"
}
own_version=$(package_field "$root/Cargo.toml" version)
repository=$(package_field "$root/../Cargo.toml" repository)
releases=${CAPI_ROLLOUT_CHECK_RELEASES:-$repository/releases/download}
protocols='=https'
if [ -n "${CAPI_ROLLOUT_CHECK_RELEASES:-}" ]; then protocols='=http,https'; fi

fail() {
  echo "::error title=capi-rollout-check::$1"
  exit 1
}

use() { # BINARY: hand it to the next step
  "$1" --version
  echo "path=$1" >>"$output"
}

build() {
  echo "Building capi-rollout-check $own_version from the action's source with cargo"
  "${CARGO:-cargo}" install --locked --quiet --path "$root" --root "$dest/build"
  use "$dest/build/bin/capi-rollout-check"
}

requested=${VERSION:-}
requested=${requested#v}
if [ "$requested" = source ]; then
  build
  exit 0
fi
version=${requested:-$own_version}
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  fail "version '$VERSION' is not a release version (x.y.z), nor 'source'"
fi

case "${RUNNER_OS:-}/${RUNNER_ARCH:-}" in
  Linux/X64) asset=capi-rollout-check-linux-amd64 ;;
  Linux/ARM64) asset=capi-rollout-check-linux-arm64 ;;
  *) asset= ;;
esac
if [ -z "$asset" ]; then
  if [ "$version" != "$own_version" ]; then
    fail "no capi-rollout-check release binary for ${RUNNER_OS:-}/${RUNNER_ARCH:-}: use the action at v$version (it builds its own source) or a Linux x64 or arm64 runner"
  fi
  build
  exit 0
fi

mkdir -p "$dest"
download() { # URL FILE: prints the HTTP status
  curl --silent --show-error --location --retry 3 --proto "$protocols" \
    --output "$2" --write-out '%{http_code}' "$1"
}
url=$releases/v$version/$asset
status=$(download "$url" "$dest/$asset") || fail "cannot download $url"
if [ "$status" = 404 ]; then
  if [ -n "$requested" ]; then
    fail "capi-rollout-check $version has no release binary at $url"
  fi
  echo "::notice title=capi-rollout-check::$version is not released yet: building this action's source"
  rm -f "$dest/$asset"
  build
  exit 0
fi
[ "$status" = 200 ] || fail "downloading $url: HTTP $status"
status=$(download "$url.sha256" "$dest/$asset.sha256") || fail "cannot download $url.sha256"
[ "$status" = 200 ] || fail "downloading $url.sha256: HTTP $status; a binary without its checksum is not run"

# The checksum file names exactly this asset, and the asset matches it.
if ! grep -qxE "[0-9a-f]{64}  $asset" "$dest/$asset.sha256"; then
  fail "$url.sha256 is not one sha256 line for $asset"
fi
if ! (cd "$dest" && sha256sum --check --strict --status "$asset.sha256"); then
  rm -f "$dest/$asset"
  fail "$asset does not match its published sha256: not installed"
fi
chmod +x "$dest/$asset"
reported=$("$dest/$asset" --version)
[ "$reported" = "capi-rollout-check $version" ] ||
  fail "$asset reports '$reported', expected capi-rollout-check $version"
echo "capi-rollout-check $version for ${RUNNER_OS}/${RUNNER_ARCH}: sha256 verified"
use "$dest/$asset"
