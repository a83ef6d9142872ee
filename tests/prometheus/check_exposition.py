#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Parses coexec's Prometheus exposition with Prometheus' own Python parser.

    check_exposition.py PATH_TO_prometheus_ExpositionDump

Runs the dump program (ExpositionDump.cpp), which writes the exposition of
three pools with a known ledger and the same snapshots as JSON, then checks
with prometheus_client.parser.text_string_to_metric_families:

- every line follows the text format 0.0.4 (a stricter check than the
  parser's, which is lax);
- the families are exactly the documented ones, each once (a family split in
  two would be parsed as two), with their types, a help text, and counters'
  samples named `<family>_total`;
- each family has one sample per pool (four for `state`), in the pools'
  order, carrying the pool's labels (escaped values read back unchanged);
- each value is the snapshot's field this script maps it to, independently
  of the C++ table (+Inf for an unbounded queue), and the ledger's
  numbers are the known ones;
- the two latency histograms: per pool, the documented `le` bounds in
  order, then `+Inf`, `_sum` (seconds) and `_count`; each bucket the number
  of samples whose fine bucket (from the JSON) lies wholly at or below its
  bound, computed here; `+Inf` and `_count` the histogram's count.

Exit 0 if all hold; 1 with every failure listed otherwise.
"""

import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

# Family name as the parser reports it (counters without `_total`) ->
# (type, the PoolStats field it shows). `state` is checked on its own.
FAMILIES = {
    "coexec_pool_core_size": ("gauge", "corePoolSize"),
    "coexec_pool_maximum_size": ("gauge", "maximumPoolSize"),
    "coexec_pool_size": ("gauge", "poolSize"),
    "coexec_pool_active_threads": ("gauge", "activeCount"),
    "coexec_pool_largest_size": ("gauge", "largestPoolSize"),
    "coexec_pool_queue_size": ("gauge", "queueSize"),
    "coexec_pool_local_queue_size": ("gauge", "localQueueSize"),
    "coexec_pool_queue_capacity": ("gauge", "queueCapacity"),
    "coexec_pool_waiting_producers": ("gauge", "waitingProducers"),
    "coexec_pool_scheduled_tasks": ("gauge", "scheduledCount"),
    "coexec_pool_tasks": ("counter", "taskCount"),
    "coexec_pool_completed_tasks": ("counter", "completedTaskCount"),
    "coexec_pool_failed_tasks": ("counter", "failedCount"),
    "coexec_pool_cancelled_tasks": ("counter", "cancelledCount"),
    "coexec_pool_rejected_tasks": ("counter", "rejectedCount"),
    "coexec_pool_discarded_tasks": ("counter", "discardedCount"),
    "coexec_pool_drained_tasks": ("counter", "drainedCount"),
    "coexec_pool_waited_for_room_tasks": ("counter", "waitedForRoomCount"),
    "coexec_pool_temporary_thread_runs": ("counter", "temporaryThreadRuns"),
}
STATES = ["RUNNING", "SHUTDOWN", "STOP", "TERMINATED"]
# Histogram families -> the PoolStats field (a LatencySummary) they show.
HISTOGRAMS = {
    "coexec_pool_queue_wait_seconds": "queueWait",
    "coexec_pool_run_time_seconds": "runTime",
}
LE_BOUNDS = [1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
             1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]
# (queueWait, runTime) counts of the ledger's pools (ExpositionDump.cpp).
KNOWN_LATENCY = [(2, 0), (5, 5), (0, 0)]

# The ledger ExpositionDump.cpp runs (its comment), pool by pool.
KNOWN = [
    {"poolSize": 2, "activeCount": 2, "largestPoolSize": 2, "queueSize": 1, "queueCapacity": 1,
     "taskCount": 3, "completedTaskCount": 0, "rejectedCount": 2},
    {"poolSize": 0, "activeCount": 0, "largestPoolSize": 2, "queueSize": 0, "taskCount": 6,
     "completedTaskCount": 3, "failedCount": 2, "cancelledCount": 1, "rejectedCount": 2},
    {"poolSize": 0, "taskCount": 0},
]
KNOWN_STATES = ["RUNNING", "TERMINATED", "RUNNING"]

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
LINE_FORMS = [
    re.compile(rf"# HELP {NAME} (?:[^\\\n]|\\[\\n])+"),
    re.compile(rf"# TYPE {NAME} (?:counter|gauge|histogram|summary|untyped)"),
    re.compile(rf"{NAME}\{{{LABEL}(?:,{LABEL})*\}} (?:[0-9]+(?:\.[0-9]+)?(?:e[-+][0-9]+)?|\+Inf)"),
]

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def check_histogram(family, pools, field):
    check(family.type == "histogram", f"{family.name}: type {family.type}, expected histogram")
    per_pool = len(LE_BOUNDS) + 3  # the bounds, +Inf, _sum, _count
    check(len(family.samples) == per_pool * len(pools),
          f"{family.name}: {len(family.samples)} samples, expected {per_pool} a pool")
    for index, pool in enumerate(pools):
        samples = family.samples[index * per_pool:(index + 1) * per_pool]
        if len(samples) != per_pool:
            continue
        latency = pool["latency"][field]
        for sample, bound in zip(samples, LE_BOUNDS + [math.inf]):
            check(sample.name == family.name + "_bucket", f"{family.name}: {sample.name}, expected a _bucket")
            le = sample.labels.get("le")
            check(le is not None and float(le) == bound, f"{family.name}: le {le}, expected {bound}")
            check(dict((k, v) for k, v in sample.labels.items() if k != "le") == pool["labels"],
                  f"{family.name}: labels {sample.labels}, expected {pool['labels']} and le")
            if bound == math.inf:
                want = latency["count"]
            else:
                want = sum(n for upper, n in latency["buckets"] if upper <= round(bound * 1e9))
            check(sample.value == want, f"{family.name}{sample.labels}: {sample.value}, expected {want}")
        total, count = samples[-2], samples[-1]
        check(total.name == family.name + "_sum", f"{family.name}: {total.name}, expected _sum")
        check(math.isclose(total.value, latency["sumNs"] / 1e9, rel_tol=1e-9, abs_tol=1e-12),
              f"{family.name}_sum{total.labels}: {total.value}, expected {latency['sumNs'] / 1e9}")
        check(count.name == family.name + "_count" and count.value == latency["count"],
              f"{family.name}: {count.name} {count.value}, expected _count {latency['count']}")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as work:
        exposition_file = Path(work) / "exposition.txt"
        expected_file = Path(work) / "expected.json"
        subprocess.run([sys.argv[1], str(exposition_file), str(expected_file)], check=True, timeout=120)
        text = exposition_file.read_text(encoding="utf-8")
        expected = json.loads(expected_file.read_text(encoding="utf-8"))
    pools = expected["pools"]
    unbounded = expected["unboundedCapacity"]

    check(text.endswith("\n"), "the exposition does not end in a newline")
    for number, line in enumerate(text.split("\n")[:-1], 1):
        check(any(form.fullmatch(line) for form in LINE_FORMS), f"line {number} is not of the format: {line!r}")

    # The known ledger, from the snapshots themselves.
    check(len(pools) == len(KNOWN), f"{len(pools)} pools in the JSON, expected {len(KNOWN)}")
    for pool, known, state in zip(pools, KNOWN, KNOWN_STATES):
        for field, value in known.items():
            check(pool["stats"][field] == value,
                  f"pool {pool['labels']}: {field} is {pool['stats'][field]}, the ledger says {value}")
        check(pool["state"] == state, f"pool {pool['labels']}: state {pool['state']}, expected {state}")
    check(pools[2]["stats"]["queueCapacity"] == unbounded, "the idle pool's queue is not unbounded")
    for pool, (waits, runs) in zip(pools, KNOWN_LATENCY):
        got = (pool["latency"]["queueWait"]["count"], pool["latency"]["runTime"]["count"])
        check(got == (waits, runs), f"pool {pool['labels']}: latency counts {got}, the ledger says {(waits, runs)}")
    check(any("\n" in value and '"' in value and "\\" in value for value in pools[0]["labels"].values()),
          "no label value of the busy pool needs every escape")
    fields = {field for _, field in FAMILIES.values()}
    check(set(pools[0]["stats"]) == fields,
          f"PoolStats fields without a family: {sorted(set(pools[0]['stats']) - fields)}; "
          f"families without a field: {sorted(fields - set(pools[0]['stats']))}")

    families = list(text_string_to_metric_families(text))
    names = [family.name for family in families]
    check(len(names) == len(set(names)), f"a family appears more than once (split up): {names}")
    documented = set(FAMILIES) | set(HISTOGRAMS) | {"coexec_pool_state"}
    check(set(names) == documented, f"families {sorted(set(names))}, expected {sorted(documented)}")

    for family in families:
        check(family.documentation.strip() != "", f"{family.name}: no help text")
        if family.name == "coexec_pool_state":
            check(family.type == "gauge", f"coexec_pool_state: type {family.type}, expected gauge")
            check(len(family.samples) == len(STATES) * len(pools),
                  f"coexec_pool_state: {len(family.samples)} samples, expected {len(STATES) * len(pools)}")
            for index, pool in enumerate(pools):
                for offset, state in enumerate(STATES):
                    if index * len(STATES) + offset >= len(family.samples):
                        continue
                    sample = family.samples[index * len(STATES) + offset]
                    check(sample.labels == dict(pool["labels"], state=state),
                          f"coexec_pool_state sample {sample}: labels, expected {pool['labels']} and {state}")
                    check(sample.value == (1.0 if state == pool["state"] else 0.0),
                          f"coexec_pool_state sample {sample}: value, the pool is {pool['state']}")
            continue
        if family.name in HISTOGRAMS:
            check_histogram(family, pools, HISTOGRAMS[family.name])
            continue
        if family.name not in FAMILIES:
            continue
        kind, field = FAMILIES[family.name]
        check(family.type == kind, f"{family.name}: type {family.type}, expected {kind}")
        sample_name = family.name + "_total" if kind == "counter" else family.name
        check(len(family.samples) == len(pools), f"{family.name}: {len(family.samples)} samples, expected one a pool")
        for sample, pool in zip(family.samples, pools):
            check(sample.name == sample_name, f"{family.name}: sample named {sample.name}, expected {sample_name}")
            check(sample.labels == pool["labels"], f"{family.name}: labels {sample.labels}, expected {pool['labels']}")
            value = pool["stats"][field]
            want = math.inf if field == "queueCapacity" and value == unbounded else float(value)
            check(sample.value == want, f"{family.name}{sample.labels}: {sample.value}, expected {want} ({field})")

    if failures:
        print("\n".join(failures), file=sys.stderr)
        print(f"{len(failures)} checks failed", file=sys.stderr)
        return 1
    print(f"{len(families)} families, {sum(len(f.samples) for f in families)} samples of {len(pools)} pools: all as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
