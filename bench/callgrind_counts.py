"""Instructions and allocation calls in callgrind dumps, for the callgrind
scripts of bench/.

    python3 bench/callgrind_counts.py ALLOCATORS DUMP...

ALLOCATORS: comma-separated names of the allocator's entry points whose
calls count as allocations. Prints three words: the Ir of all DUMPs
together, the calls of those entry points, and the DUMP of the most Ir.
"""
import re
import sys


def main(allocators, paths):
    alloc = set(allocators.split(","))
    total, calls, busiest = 0, 0, (0, "")
    for path in paths:
        names, target, ir = {}, None, 0
        for line in open(path, errors="replace"):
            m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line)
            if m:
                kind, fid, name = m.groups()
                if name:
                    names[fid] = name.strip()
                target = names.get(fid, "") if kind == "cfn" else None
            elif line.startswith("calls=") and target is not None:
                if target in alloc:
                    calls += int(line.split("=")[1].split()[0])
                target = None
            elif line.startswith(("summary:", "totals:")):
                ir = max(ir, int(line.split()[1]))
        total += ir
        busiest = max(busiest, (ir, path))
    print(total, calls, busiest[1])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
