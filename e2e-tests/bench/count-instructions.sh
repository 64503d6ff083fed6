#!/bin/bash
# Instructions per evaluation of the four main requests, counted by callgrind: repeatable
# whatever else the machine is doing, unlike timings. For each module, `bench --profile wasm`
# (fresh instance + call, no deadline) runs each request twice with different iteration counts;
# the difference divided by the extra iterations leaves out start-up and compilation.
#
#   e2e-tests/bench/count-instructions.sh annotated-policy.wasm [other.wasm ...]
#   NATIVE=1 e2e-tests/bench/count-instructions.sh     # the rules natively instead
#
# Needs valgrind and target/release/bench (`make bench` builds it).
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH=${BENCH:-target/release/bench}
count() { # module-args request iterations
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BENCH" $1 --profile "$2" "$3" \
    --iterations "$4" 2>&1 | sed -n 's/.*Collected : //p'
}
per_eval() { # module-args target
  local line="" a b x y
  for request in rotation token edit large; do
    if [ "$request" = large ]; then a=1; b=3; else a=10; b=60; fi
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
