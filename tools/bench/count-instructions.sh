#!/bin/bash
# Instructions per evaluation of the four main requests, counted by callgrind: repeatable
# whatever else the machine is doing, unlike timings. For each module, `bench --profile wasm`
# (fresh instance + call, no deadline) runs each request twice with different iteration counts;
# the difference divided by the extra iterations leaves out start-up and compilation.
#
#   tools/bench/count-instructions.sh annotated-policy.wasm [other.wasm ...]
#   NATIVE=1 tools/bench/count-instructions.sh     # the rules natively instead
#   GUEST=1 ...       # only the `validate` call (the guest, and the host calls it makes)
#   REQUESTS="edit fleet-1000" ...   # other requests (bench --profile's names)
#
# Needs valgrind and target/release/bench (`make bench` builds it).
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH=${BENCH:-target/release/bench}
REQUESTS=${REQUESTS:-rotation token edit large}
TOGGLE=()
if [ -n "${GUEST:-}" ]; then
  TOGGLE=(--toggle-collect='*WasmtimeEngineProvider as wapc::wapchost::traits::WebAssemblyEngineProvider>::call')
fi
count() { # module-args request iterations
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "${TOGGLE[@]}" "$BENCH" $1 \
    --profile "$2" "$3" --iterations "$4" 2>&1 | sed -n 's/.*Collected : //p'
}
per_eval() { # module-args target
  local line="" a b x y
  for request in $REQUESTS; do
    case "$request" in
      large*|fleet-10000) a=1; b=3 ;;
      fleet-1000|sweep-*) a=2; b=8 ;;
      *) a=10; b=60 ;;
    esac
    x=$(count "$1" "$2" "$request" "$a")
    y=$(count "$1" "$2" "$request" "$b")
    line="$line $request=$(( (y - x) / (b - a) ))"
  done
  echo "$line"
}
if [ -n "${NATIVE:-}" ]; then
  echo "native:$(per_eval "" native)"
  exit 0
fi
for module in "${@:-annotated-policy.wasm}"; do
  count "--module $module" wasm rotation 1 >/dev/null # fills wasmtime's cache
  echo "$module:$(per_eval "--module $module" wasm)"
done
