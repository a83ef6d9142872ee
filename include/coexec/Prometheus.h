// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "coexec/Export.h"
#include "coexec/PoolStats.h"

namespace coexec {

/// Labels added to every sample of a pool: name/value pairs, written in this
/// order after the default `pool` label (see writePrometheus()).
///
/// A name must match `[a-zA-Z_][a-zA-Z0-9_]*`, must not start with `__`
/// (reserved by Prometheus), must not be `state` or `le` (the labels the
/// writer itself puts on `coexec_pool_state` and on histogram buckets), and
/// must not repeat within one set. A value is any UTF-8 text; it is escaped
/// as the format requires.
using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

/// One pool's snapshot and its labels, for the several-pool writePrometheus().
///
/// Thread safety: a plain value; copy freely.
struct LabelledStats {
  PoolStats stats;          ///< the pool's snapshot, as ThreadPoolExecutor::stats() returns it
  PrometheusLabels labels;  ///< written after the default `pool="<stats.name>"` (see writePrometheus())
};

/// Appends `stats` to `out` in the Prometheus text exposition format, version
/// 0.0.4 (what a `/metrics` page serves, with `Content-Type: text/plain;
/// version=0.0.4`): for each metric family a `# HELP` line, a `# TYPE` line
/// and its samples, each line ending in `\n`. Does not clear `out`.
///
/// Every sample carries the label `pool="<stats.name>"` followed by `labels`
/// in their order; a `pool` entry in `labels` replaces the default one. The
/// families, all named `coexec_pool_...` (docs/production.md lists them with
/// the alerts to write on them):
///
/// - counters (`_total`): `tasks_total` (taskCount), `completed_tasks_total`,
///   `failed_tasks_total`, `cancelled_tasks_total`, `rejected_tasks_total`,
///   `discarded_tasks_total`, `drained_tasks_total`,
///   `waited_for_room_tasks_total`, `temporary_thread_runs_total`;
/// - gauges: `state` (one sample per PoolState, labelled
///   `state="RUNNING"` etc., 1 for the current state and 0 for the others),
///   `core_size`, `maximum_size`, `size` (poolSize), `active_threads`,
///   `largest_size`, `queue_size`, `local_queue_size`, `queue_capacity`
///   (`+Inf` for an unbounded queue, 0 for synchronous()),
///   `waiting_producers`, `scheduled_tasks`;
/// - histograms, in seconds (`_bucket{le="..."}`, `_sum`, `_count`):
///   `queue_wait_seconds` (PoolStats::queueWait) and `run_time_seconds`
///   (runTime), with `le` bounds from 1 us to 60 s (1, 2.5, 5 a decade) and
///   `+Inf`; a bucket counts the samples of the fine histogram's buckets that
///   lie wholly at or below its bound, so a sample within 3.125 % below a
///   bound may count in the next one. All zero unless the pool records
///   latency (ThreadPoolOptions::recordLatency).
///
/// Families may be added, never renamed: a scraper should not expect
/// exactly this set.
///
/// Values are decimal integers (a counter above 2^53 loses precision when
/// Prometheus reads it as a double, as any counter does). The values are
/// the snapshot's: see PoolStats for which of them are one instant's.
///
/// Never blocks, takes no lock, runs no callback. Thread safety: reads only
/// its arguments; concurrent calls with different `out` strings are safe.
///
/// \throws std::invalid_argument if a label name is invalid (see
/// PrometheusLabels), before anything is written; std::bad_alloc. `out` is
/// unchanged whenever it throws.
///
/// Cost: O(size of the text), about 7 KB for a pool with a short name and
/// no other label.
COEXEC_EXPORT void writePrometheus(std::string& out, const PoolStats& stats, const PrometheusLabels& labels = {});

/// Appends several pools to `out` as writePrometheus(out, stats, labels) does
/// for one, each family once: its `# HELP` and `# TYPE` lines, then one
/// sample (for `state`, one group of samples) per pool in the order of
/// `pools`, since the format requires a family's lines to be together.
/// Nothing is written for an empty span.
///
/// Never blocks, takes no lock, runs no callback. Thread safety: as the
/// one-pool writePrometheus().
///
/// \throws std::invalid_argument if a label name is invalid, or if two pools
/// end up with the same label set (two pools of the same name and no label
/// to tell them apart: Prometheus would refuse the duplicate samples), before
/// anything is written; std::bad_alloc. `out` is unchanged whenever it throws.
///
/// Cost: O(size of the text), about 1 KB more per further pool, plus sorting
/// the pools' label sets.
COEXEC_EXPORT void writePrometheus(std::string& out, std::span<const LabelledStats> pools);

}  // namespace coexec
