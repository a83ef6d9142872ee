// SPDX-License-Identifier: BSL-1.0
#pragma once

// fmt formatters for the pool's snapshots: PoolState, PoolStats,
// WorkerState, WorkerDump and ThreadDump. Include this header (or
// <coexec/coexec.h>) to pass them to fmt::format; the headers that declare
// the types do not include fmt.

#include <string_view>

#include <fmt/format.h>

#include "coexec/Export.h"
#include "coexec/PoolStats.h"
#include "coexec/ThreadDump.h"

/// Formats a PoolState as toString() names it: `RUNNING`, `SHUTDOWN`, `STOP`
/// or `TERMINATED`. Takes the format specs of a string (fill, alignment,
/// width: `fmt::format("{:>10}", state)`). Never blocks; throws only what
/// fmt throws (fmt::format_error for bad specs, std::bad_alloc).
template <>
struct COEXEC_EXPORT fmt::formatter<coexec::PoolState> : fmt::formatter<std::string_view> {
  /// Called by fmt: writes `state`'s name to `ctx.out()` with the parsed specs.
  fmt::format_context::iterator format(coexec::PoolState state, fmt::format_context& ctx) const;
};

/// Formats a PoolStats on one line:
/// ``pool 'io' RUNNING: size 2 (core 1, max 2, largest 2), active 2, queued 1/1,
/// tasks 7 (completed 3, failed 1, cancelled 0, discarded 0, drained 0),
/// rejected 2, waited for room 5 (waiting now 1), scheduled 3, temporary runs
/// 4, wait p99 1.2ms, run p99 85us`` (`, waited for room N (waiting now M)`
/// only once a task has waited for room or a producer waits, `, scheduled N`
/// only while timers are pending, `, temporary runs N` only once
/// newThreadRuns() has run a task, `, wait p99 ..., run p99 ...` only when
/// the pool records latency and has recorded a task).
template <>
struct COEXEC_EXPORT fmt::formatter<coexec::PoolStats> : fmt::formatter<std::string_view> {
  /// Called by fmt: writes the line to `ctx.out()` with the parsed specs.
  fmt::format_context::iterator format(const coexec::PoolStats& stats, fmt::format_context& ctx) const;
};

/// Formats a WorkerState as toString() names it; takes a string's format specs.
template <>
struct COEXEC_EXPORT fmt::formatter<coexec::WorkerState> : fmt::formatter<std::string_view> {
  /// Called by fmt: writes `state`'s name to `ctx.out()` with the parsed specs.
  fmt::format_context::iterator format(coexec::WorkerState state, fmt::format_context& ctx) const;
};

/// Formats a WorkerDump on one line: ``io-1 RUNNING task 'resize' for 1.204s,
/// local queue 3``, `io-2 RUNNING a coroutine, local queue 0`, `io-3 PARKED,
/// local queue 0` (an unnamed task shows as `task (unnamed)`).
template <>
struct COEXEC_EXPORT fmt::formatter<coexec::WorkerDump> : fmt::formatter<std::string_view> {
  /// Called by fmt: writes the line to `ctx.out()` with the parsed specs.
  fmt::format_context::iterator format(const coexec::WorkerDump& worker, fmt::format_context& ctx) const;
};

/// Formats a ThreadDump: the PoolStats line, then one indented line per
/// worker (see WorkerDump), then `  temporary threads: N` if there are any.
template <>
struct COEXEC_EXPORT fmt::formatter<coexec::ThreadDump> : fmt::formatter<std::string_view> {
  /// Called by fmt: writes the lines to `ctx.out()` with the parsed specs.
  fmt::format_context::iterator format(const coexec::ThreadDump& dump, fmt::format_context& ctx) const;
};
