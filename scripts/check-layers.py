#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""The layering check (`make check`): every file of include/coexec/ and src/
belongs to one layer of docs/architecture.md, and includes only files of its
own layer or of layers below it.

docs/architecture.md holds the rules, once:
  - "## Layers": a table `| N | layer | files |`, bottom layer first; the
    files are paths from the repository's root, a path ending in `/` naming
    everything below it, `*` matching within one path component. A file
    matched by several entries belongs to the most specific one (the longest
    pattern).
  - "## Upward includes still to remove": a list of `- \`from\` -> \`to\``
    items, and "## Include cycles still to remove": a list of
    `- \`a\` \`b\` ...` items, the files of one cycle. Each is allowed until it
    is gone; the check fails on an item that no longer holds, so the lists
    only shrink.

Fails (exit 1), naming each, on: a file in no layer; an include of a file of
a higher layer that the list does not name; a cycle in the include graph of
the coexec files that the list does not name; a listed include or cycle that
is gone. Exit 2: the rules themselves
cannot be read. The headers CMake generates into the build tree
(coexec/Export.h, coexec/Version.h) are not checked: any file may include
them. Reads only: `python3 scripts/check-layers.py [ROOT]`.
"""

import fnmatch
import os
import re
import sys

ROOTS = ("include/coexec", "src")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def fail_rules(message):
    print(f"check-layers: {message}", file=sys.stderr)
    sys.exit(2)


def section(text, heading):
    match = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not match:
        fail_rules(f'docs/architecture.md has no "## {heading}" section')
    return match.group(1)


def read_rules(root):
    path = os.path.join(root, "docs", "architecture.md")
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as error:
        fail_rules(f"cannot read {path}: {error}")
    layers = []  # (number, name, [patterns])
    for line in section(text, "Layers").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].isdigit():
            continue
        patterns = re.findall(r"`([^`]+)`", cells[2])
        if not patterns:
            fail_rules(f"layer {cells[1]!r} names no files")
        layers.append((int(cells[0]), cells[1], patterns))
    if not layers:
        fail_rules('the "## Layers" table has no rows')
    if [number for number, _, _ in layers] != list(range(1, len(layers) + 1)):
        fail_rules("the layers must be numbered 1, 2, ... from the bottom, in order")
    allowed = set()
    for line in section(text, "Upward includes still to remove").splitlines():
        match = re.match(r"^\s*-\s*`([^`]+)`\s*->\s*`([^`]+)`", line)
        if match:
            allowed.add((match.group(1), match.group(2)))
    allowed_cycles = set()
    for line in section(text, "Include cycles still to remove").splitlines():
        if re.match(r"^\s*-\s*`", line):
            allowed_cycles.add(tuple(sorted(re.findall(r"`([^`]+)`", line))))
    return layers, allowed, allowed_cycles


def source_files(root):
    files = []
    for top in ROOTS:
        for directory, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith((".h", ".hpp", ".cpp")):
                    files.append(os.path.relpath(os.path.join(directory, name), root))
    return sorted(files)


def matches(pattern, path):
    if pattern.endswith("/"):
        return path.startswith(pattern)
    return fnmatch.fnmatchcase(path, pattern) and path.count("/") == pattern.count("/")


def layer_of(path, layers):
    best = None
    for number, name, patterns in layers:
        for pattern in patterns:
            if matches(pattern, path) and (best is None or len(pattern) > best[2]):
                best = (number, name, len(pattern))
    return best


def resolve(root, source, target, known):
    """The repository path an #include names, or None (not a coexec file)."""
    candidates = []
    if target.startswith("coexec/"):
        candidates.append("include/" + target)
    candidates.append(os.path.normpath(os.path.join(os.path.dirname(source), target)))
    candidates.append("src/" + target)  # the library's sources see src/ on their include path
    for candidate in candidates:
        if candidate in known:
            return candidate
    return None


def includes(root, files):
    known = set(files)
    graph = {}
    for path in files:
        graph[path] = []
        with open(os.path.join(root, path), encoding="utf-8") as source:
            for line in source:
                match = INCLUDE.match(line)
                if match:
                    target = resolve(root, path, match.group(1), known)
                    if target and target != path:
                        graph[path].append(target)
    return graph


def cycles(graph):
    """The strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for next_node in graph.get(node, ()):
            if next_node not in index:
                visit(next_node)
                low[node] = min(low[node], low[next_node])
            elif next_node in on_stack:
                low[node] = min(low[node], index[next_node])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(root)
    layers, allowed, allowed_cycles = read_rules(root)
    files = source_files(root)
    graph = includes(root, files)
    problems = []
    layer = {}
    for path in files:
        found = layer_of(path, layers)
        if found is None:
            problems.append(f"{path}: in no layer of docs/architecture.md")
        else:
            layer[path] = found
    upward = set()
    for source, targets in graph.items():
        for target in targets:
            if source in layer and target in layer and layer[target][0] > layer[source][0]:
                upward.add((source, target))
                if (source, target) not in allowed:
                    problems.append(f"{source} ({layer[source][1]}) includes {target}, "
                                    f"of a layer above it ({layer[target][1]})")
    for source, target in sorted(allowed - upward):
        problems.append(f"{source} -> {target} is listed as an upward include still to remove, "
                        f"but is not one: take it off the list")
    found_cycles = {tuple(component) for component in cycles(graph)}
    for component in sorted(found_cycles - allowed_cycles):
        problems.append("an include cycle: " + " ".join(component))
    for component in sorted(allowed_cycles - found_cycles):
        problems.append("the cycle " + " ".join(component) + " is listed as still to remove, "
                        "but is not one: take it off the list")
    counts = {name: 0 for _, name, _ in layers}
    for found in layer.values():
        counts[found[1]] += 1
    summary = ", ".join(f"{name} {count}" for name, count in counts.items())
    if problems:
        for problem in problems:
            print(f"check-layers: {problem}", file=sys.stderr)
        print(f"check-layers: {len(problems)} problem(s) in {len(files)} files", file=sys.stderr)
        return 1
    print(f"check-layers: {len(files)} files in {len(layers)} layers ({summary}); "
          f"{len(upward)} upward includes and {len(found_cycles)} include cycles still to remove, "
          f"none other")
    return 0


if __name__ == "__main__":
    sys.exit(main())
