// SPDX-License-Identifier: BSL-1.0
#include "coexec/Prometheus.h"

// The Prometheus text exposition (format 0.0.4) of PoolStats.
//
// Invariants:
// - Every family is written whole before the next: `# HELP`, `# TYPE`, then
//   the samples of every pool in the caller's order. The format requires a
//   family's lines to be together, which is why the several-pool overload
//   iterates families outside and pools inside.
// - Everything is validated before the first byte is appended, and a failed
//   allocation while writing truncates `out` back: a call that throws leaves
//   `out` as it was.
// - A pool's label set is rendered once (`pool="io",zone="a"`, escaped) and
//   shared by all its samples; `state` and `le` are kept free for the labels
//   the families add themselves.
//
// No state, no locks: the functions read their arguments only.
//
// Adding a family is adding a row to kFamilies. The latency histograms
// (queueWait, runTime) write several lines per pool: a cumulative
// `_bucket{...,le="..."}` line per bound of kLatencyBounds, then `+Inf`,
// `_sum` and `_count`, in seconds, from the fine histogram of PoolStats.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "coexec/WorkQueue.h"

namespace coexec {
namespace {

enum class FamilyType : std::uint8_t { counter, gauge, histogram };

std::string_view typeName(FamilyType type) noexcept {
  switch (type) {
    case FamilyType::counter: return "counter";
    case FamilyType::gauge: return "gauge";
    case FamilyType::histogram: return "histogram";
  }
  return "untyped";
}

/// Appends one pool's samples of the family `name`; `labels` is the pool's
/// rendered label set, never empty (it has at least `pool`).
using WriteSamples = void (*)(std::string& out, std::string_view name, std::string_view labels,
                              const PoolStats& stats);

struct Family {
  std::string_view name;  ///< with `_total` for counters
  FamilyType type;
  std::string_view help;  ///< one line; escaped when written
  WriteSamples write;
};

template <class Value>
void sample(std::string& out, std::string_view name, std::string_view labels, const Value& value) {
  fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, value);
}

/// The family of one PoolStats field, an integer.
template <auto Field>
void field(std::string& out, std::string_view name, std::string_view labels, const PoolStats& stats) {
  sample(out, name, labels, stats.*Field);
}

void queueCapacity(std::string& out, std::string_view name, std::string_view labels, const PoolStats& stats) {
  if (stats.queueCapacity == WorkQueue::kUnboundedCapacity) {
    sample(out, name, labels, std::string_view("+Inf"));
  } else {
    sample(out, name, labels, stats.queueCapacity);
  }
}

void state(std::string& out, std::string_view name, std::string_view labels, const PoolStats& stats) {
  for (const PoolState each : {PoolState::running, PoolState::shutdown, PoolState::stop, PoolState::terminated}) {
    fmt::format_to(std::back_inserter(out), "{}{{{},state=\"{}\"}} {}\n", name, labels, toString(each),
                   each == stats.state ? 1 : 0);
  }
}

/// The `le` bounds of the latency histograms, in seconds: from 1 us (a task
/// that waited for nothing) to a minute, 1-2.5-5 a decade.
constexpr double kLatencyBounds[] = {1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
                                     1e-2, 2.5e-2, 5e-2, 0.1,  0.25,   0.5,  1.0,  2.5,    5.0,  10.0, 30.0,   60.0};

/// A histogram family from one of PoolStats' LatencySummary fields. A bucket
/// counts the fine buckets that lie wholly at or below its bound (see
/// LatencyHistogram::countAtOrBelow()).
template <auto Field>
void latency(std::string& out, std::string_view name, std::string_view labels, const PoolStats& stats) {
  const LatencyHistogram& histogram = (stats.*Field).histogram;
  for (const double bound : kLatencyBounds) {
    const auto ns = std::chrono::nanoseconds(static_cast<std::int64_t>(bound * 1e9 + 0.5));
    fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, bound,
                   histogram.countAtOrBelow(ns));
  }
  fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, histogram.count());
  fmt::format_to(std::back_inserter(out), "{}_sum{{{}}} {}\n", name, labels,
                 std::chrono::duration<double>(histogram.sum()).count());
  fmt::format_to(std::back_inserter(out), "{}_count{{{}}} {}\n", name, labels, histogram.count());
}

constexpr FamilyType kCounter = FamilyType::counter;
constexpr FamilyType kGauge = FamilyType::gauge;
constexpr FamilyType kHistogram = FamilyType::histogram;

// The order of the page: lifecycle, threads, queue, task outcomes. The help
// texts are PoolStats' field docs, shortened.
constexpr Family kFamilies[] = {
    {"coexec_pool_state", kGauge, "The pool's lifecycle state: 1 for the current one, 0 for the others.", &state},
    {"coexec_pool_core_size", kGauge, "corePoolSize: threads kept when idle.", &field<&PoolStats::corePoolSize>},
    {"coexec_pool_maximum_size", kGauge, "maximumPoolSize: the upper bound on threads.",
     &field<&PoolStats::maximumPoolSize>},
    {"coexec_pool_size", kGauge, "Live worker threads (poolSize).", &field<&PoolStats::poolSize>},
    {"coexec_pool_active_threads", kGauge, "Threads running a task now.", &field<&PoolStats::activeCount>},
    {"coexec_pool_largest_size", kGauge, "The most threads the pool has had at once.",
     &field<&PoolStats::largestPoolSize>},
    {"coexec_pool_queue_size", kGauge, "Tasks waiting in the work queue.", &field<&PoolStats::queueSize>},
    {"coexec_pool_local_queue_size", kGauge, "Tasks submitted from pool threads, waiting in their local queues.",
     &field<&PoolStats::localQueueSize>},
    {"coexec_pool_queue_capacity", kGauge, "The work queue's capacity: 0 for a hand-off queue, +Inf if unbounded.",
     &queueCapacity},
    {"coexec_pool_waiting_producers", kGauge, "Producers waiting for room in the queue now (block, submitWhenRoom).",
     &field<&PoolStats::waitingProducers>},
    {"coexec_pool_scheduled_tasks", kGauge, "Timers pending: scheduled tasks not yet due and periodic schedules.",
     &field<&PoolStats::scheduledCount>},
    {"coexec_pool_tasks_total", kCounter, "Tasks admitted (taskCount).", &field<&PoolStats::taskCount>},
    {"coexec_pool_completed_tasks_total", kCounter, "Admitted tasks that returned normally.",
     &field<&PoolStats::completedTaskCount>},
    {"coexec_pool_failed_tasks_total", kCounter, "Admitted tasks that threw.", &field<&PoolStats::failedCount>},
    {"coexec_pool_cancelled_tasks_total", kCounter, "Tasks cancelled: while queued, by OperationCancelled, or at "
     "submission.", &field<&PoolStats::cancelledCount>},
    {"coexec_pool_rejected_tasks_total", kCounter, "Tasks the pool refused (the rejection policy, or after shutdown).",
     &field<&PoolStats::rejectedCount>},
    {"coexec_pool_discarded_tasks_total", kCounter, "Admitted tasks evicted from the queue by discardOldest.",
     &field<&PoolStats::discardedCount>},
    {"coexec_pool_drained_tasks_total", kCounter, "Tasks returned unrun by shutdownNow.",
     &field<&PoolStats::drainedCount>},
    {"coexec_pool_waited_for_room_tasks_total", kCounter, "Tasks admitted after waiting for room in the queue.",
     &field<&PoolStats::waitedForRoomCount>},
    {"coexec_pool_temporary_thread_runs_total", kCounter, "Rejected tasks run on a temporary thread by newThreadRuns.",
     &field<&PoolStats::temporaryThreadRuns>},
    {"coexec_pool_queue_wait_seconds", kHistogram, "Time from a task's admission (a timer task: its due time) to its "
     "start on a pool thread (recordLatency).", &latency<&PoolStats::queueWait>},
    {"coexec_pool_run_time_seconds", kHistogram, "Time a task's code ran, from its start to its end (recordLatency; "
     "a coroutine task: its segments, not its suspensions).", &latency<&PoolStats::runTime>},
};

// ---- escaping and validation ------------------------------------------------

/// `\` and newline escaped, as the format requires of help texts.
void appendHelp(std::string& out, std::string_view text) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

/// `\`, `"` and newline escaped, as the format requires of label values.
void appendLabelValue(std::string& out, std::string_view value) {
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

[[noreturn]] void throwBadLabel(std::string_view name, std::string_view why) {
  throw std::invalid_argument(fmt::format("coexec::writePrometheus: label name '{}' {}", name, why));
}

bool isNameStart(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isNameChar(char c) noexcept { return isNameStart(c) || (c >= '0' && c <= '9'); }

void checkLabelName(std::string_view name) {
  if (name.empty() || !isNameStart(name.front()) || !std::all_of(name.begin(), name.end(), isNameChar)) {
    throwBadLabel(name, "does not match [a-zA-Z_][a-zA-Z0-9_]*");
  }
  if (name.starts_with("__")) throwBadLabel(name, "starts with __ (reserved by Prometheus)");
  if (name == "state" || name == "le") throwBadLabel(name, "is reserved (the exposition's own label)");
}

/// A pool's label set, checked: the default `pool` first unless `labels`
/// names one, then `labels` in order.
PrometheusLabels labelSet(const PoolStats& stats, const PrometheusLabels& labels) {
  PrometheusLabels set;
  set.reserve(labels.size() + 1);
  const bool ownPool = std::any_of(labels.begin(), labels.end(), [](const auto& label) { return label.first == "pool"; });
  if (!ownPool) set.emplace_back("pool", stats.name);
  for (const auto& label : labels) {
    checkLabelName(label.first);
    const bool repeated =
        std::any_of(set.begin(), set.end(), [&](const auto& earlier) { return earlier.first == label.first; });
    if (repeated) throwBadLabel(label.first, "appears twice");
    set.push_back(label);
  }
  return set;
}

std::string render(const PrometheusLabels& set) {
  std::string text;
  for (const auto& [name, value] : set) {
    if (!text.empty()) text += ',';
    text += name;
    text += "=\"";
    appendLabelValue(text, value);
    text += '"';
  }
  return text;
}

/// Throws if two pools have the same label set, whatever the order of their
/// labels.
void checkDistinct(std::vector<PrometheusLabels> sets) {
  for (auto& set : sets)
    std::sort(set.begin(), set.end());
  std::sort(sets.begin(), sets.end());
  const auto twin = std::adjacent_find(sets.begin(), sets.end());
  if (twin != sets.end()) {
    throw std::invalid_argument(fmt::format(
        "coexec::writePrometheus: two pools have the same labels {{{}}}; add a label that tells them apart",
        render(*twin)));
  }
}

/// A pool as the caller gave it (neither copied).
struct PoolRef {
  const PoolStats* stats;
  const PrometheusLabels* labels;
};

struct RenderedPool {
  const PoolStats* stats;
  std::string labels;
};

void writeFamilies(std::string& out, const std::vector<RenderedPool>& pools) {
  const std::size_t before = out.size();
  try {
    for (const Family& family : kFamilies) {
      out += "# HELP ";
      out += family.name;
      out += ' ';
      appendHelp(out, family.help);
      fmt::format_to(std::back_inserter(out), "\n# TYPE {} {}\n", family.name, typeName(family.type));
      for (const RenderedPool& pool : pools)
        family.write(out, family.name, pool.labels, *pool.stats);
    }
  } catch (...) {
    out.resize(before);  // shrinking never throws
    throw;
  }
}

void writePools(std::string& out, std::span<const PoolRef> pools) {
  if (pools.empty()) return;
  std::vector<PrometheusLabels> sets;
  sets.reserve(pools.size());
  for (const PoolRef& pool : pools)
    sets.push_back(labelSet(*pool.stats, *pool.labels));
  std::vector<RenderedPool> rendered;
  rendered.reserve(pools.size());
  for (std::size_t i = 0; i < pools.size(); ++i)
    rendered.push_back({pools[i].stats, render(sets[i])});
  if (pools.size() > 1) checkDistinct(std::move(sets));
  writeFamilies(out, rendered);
}

}  // namespace

void writePrometheus(std::string& out, const PoolStats& stats, const PrometheusLabels& labels) {
  const PoolRef pool{&stats, &labels};
  writePools(out, std::span<const PoolRef>(&pool, 1));
}

void writePrometheus(std::string& out, std::span<const LabelledStats> pools) {
  std::vector<PoolRef> refs;
  refs.reserve(pools.size());
  for (const LabelledStats& pool : pools)
    refs.push_back({&pool.stats, &pool.labels});
  writePools(out, refs);
}

}  // namespace coexec
