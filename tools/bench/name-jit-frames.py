#!/usr/bin/env python3
"""Names the JIT frames of a callgrind profile of the wasm guest.

callgrind shows code that wasmtime compiled at run time as bare addresses (0x0000000004d7b100).
Run the guest with wasmtime's perf map on (`bench --profile perf-map REQUEST`, which writes
/tmp/perf-<pid>.map), then give this script the map and `callgrind_annotate` output: it prints
the annotate output with each address replaced by the wasm function it falls in.

  valgrind --tool=callgrind --callgrind-out-file=cg.out \\
      target/release/bench --profile perf-map edit --iterations 50 --module policy-with-names.wasm
  callgrind_annotate --inclusive=yes cg.out | tools/bench/name-jit-frames.py /tmp/perf-PID.map
"""
import bisect
import re
import sys


def load_map(path):
    starts, ends, names = [], [], []
    with open(path) as f:
        for line in f:
            start, size, name = line.rstrip("\n").split(" ", 2)
            starts.append(int(start, 16))
            ends.append(int(start, 16) + int(size, 16))
            names.append(name)
    order = sorted(range(len(starts)), key=starts.__getitem__)
    return [starts[i] for i in order], [ends[i] for i in order], [names[i] for i in order]


def main():
    starts, ends, names = load_map(sys.argv[1])
    address = re.compile(r"\?\?\?:0x([0-9a-f]+)('?\d*)( \([\d,]+x\))? \[\?\?\?\]")

    def name(match):
        a = int(match.group(1), 16)
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and a < ends[i]:
            return f"wasm:{names[i]}{match.group(2)}{match.group(3) or ''}"
        return match.group(0)

    for line in sys.stdin:
        sys.stdout.write(address.sub(name, line))


if __name__ == "__main__":
    main()
