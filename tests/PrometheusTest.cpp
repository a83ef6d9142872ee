// SPDX-License-Identifier: BSL-1.0
#include "coexec/Prometheus.h"

// writePrometheus(): the values of a real pool's ledger, the families' names
// and types, escaping, label validation, and the several-pool overload's
// grouping. tests/prometheus/check_exposition.py parses the same kind of
// page with Prometheus' own Python parser.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <regex>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/CancellationToken.h"
#include "coexec/Errors.h"
#include "coexec/Executors.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/WorkQueue.h"

using namespace std::chrono_literals;

using coexec::CancellationSource;
using coexec::LabelledStats;
using coexec::OperationCancelled;
using coexec::PoolState;
using coexec::PoolStats;
using coexec::PrometheusLabels;
using coexec::RejectedExecution;
using coexec::RejectionPolicy;
using coexec::ThreadPoolExecutor;
using coexec::ThreadPoolOptions;
using coexec::WorkQueue;
using coexec::writePrometheus;
using coexec::test::checkLedgerAddsUp;
using coexec::test::Counter;
using coexec::test::finalStats;
using coexec::test::Gate;
using coexec::test::StopOnExit;

namespace {

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

/// Every sample of `text`, by its `name{labels}` as written. Checks that
/// each line is a `# HELP`, a `# TYPE` or a sample the format allows, and
/// that no sample appears twice.
std::map<std::string, std::string> samplesOf(const std::string& text) {
  static const std::regex kHelp(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* [^\n]+)");
  static const std::regex kType(R"(# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram))");
  static const std::regex kSample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\[\\"n])*",?)*\}) ([0-9]+(\.[0-9]+)?(e[-+][0-9]+)?|\+Inf))");
  std::map<std::string, std::string> samples;
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  for (const std::string& line : linesOf(text)) {
    INFO("line: " << line);
    std::smatch match;
    if (std::regex_match(line, match, kSample)) {
      CHECK(samples.emplace(match[1].str(), match[4].str()).second);
    } else {
      CHECK((std::regex_match(line, kHelp) || std::regex_match(line, kType)));
    }
  }
  return samples;
}

/// The family names of the `# TYPE` lines, in order, with their types.
std::vector<std::pair<std::string, std::string>> typesOf(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> types;
  for (const std::string& line : linesOf(text)) {
    if (line.starts_with("# TYPE ")) {
      const auto space = line.find(' ', 7);
      types.emplace_back(line.substr(7, space - 7), line.substr(space + 1));
    }
  }
  return types;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++n;
  return n;
}

/// The families writePrometheus() documents, with their types.
const std::map<std::string, std::string> kDocumentedTypes = {
    {"coexec_pool_state", "gauge"},
    {"coexec_pool_core_size", "gauge"},
    {"coexec_pool_maximum_size", "gauge"},
    {"coexec_pool_size", "gauge"},
    {"coexec_pool_active_threads", "gauge"},
    {"coexec_pool_largest_size", "gauge"},
    {"coexec_pool_queue_size", "gauge"},
    {"coexec_pool_local_queue_size", "gauge"},
    {"coexec_pool_queue_capacity", "gauge"},
    {"coexec_pool_waiting_producers", "gauge"},
    {"coexec_pool_scheduled_tasks", "gauge"},
    {"coexec_pool_tasks_total", "counter"},
    {"coexec_pool_completed_tasks_total", "counter"},
    {"coexec_pool_failed_tasks_total", "counter"},
    {"coexec_pool_cancelled_tasks_total", "counter"},
    {"coexec_pool_rejected_tasks_total", "counter"},
    {"coexec_pool_discarded_tasks_total", "counter"},
    {"coexec_pool_drained_tasks_total", "counter"},
    {"coexec_pool_waited_for_room_tasks_total", "counter"},
    {"coexec_pool_temporary_thread_runs_total", "counter"},
    {"coexec_pool_queue_wait_seconds", "histogram"},
    {"coexec_pool_run_time_seconds", "histogram"},
};

/// The `le` bounds writePrometheus() documents for the latency histograms.
constexpr const char* kLeBounds[] = {"1e-06", "2.5e-06", "5e-06", "1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025",
                                     "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                                     "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "+Inf"};

/// The samples of one pool: one a family, four for `state`, and each
/// histogram's buckets, sum and count.
constexpr std::size_t kHistogramSamples = std::size(kLeBounds) + 2;
const std::size_t kSamplesPerPool = (kDocumentedTypes.size() - 2) + 3 + 2 * kHistogramSamples;

}  // namespace

// ---- a real pool's ledger --------------------------------------------------------

TEST_CASE("the exposition of a pool shows its ledger while busy and once terminated", "[prometheus][stats]") {
  // core 1, max 2, a queue of one, abort(): A runs on the core thread, B
  // waits in the queue, C starts the second thread, D and E are rejected.
  Counter started;
  Gate gate;
  ThreadPoolOptions options;
  options.name = "ledger";
  options.corePoolSize = 1;
  options.maximumPoolSize = 2;
  options.workQueue = WorkQueue::bounded(1);
  options.rejectionPolicy = RejectionPolicy::abort();
  ThreadPoolExecutor pool(std::move(options));
  StopOnExit stop(gate, pool);
  const auto blocked = [&] {
    started.arrive();
    gate.wait();
  };
  auto a = pool.submit(blocked);
  REQUIRE(started.waitFor(1));
  auto b = pool.submit(blocked);
  auto c = pool.submit(blocked);
  REQUIRE(started.waitFor(2));
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);
  CHECK_THROWS_AS(pool.execute([] {}), RejectedExecution);

  const PoolStats busy = pool.stats();
  std::string text;
  writePrometheus(text, busy);
  auto samples = samplesOf(text);
  CHECK(samples.at(R"(coexec_pool_state{pool="ledger",state="RUNNING"})") == "1");
  CHECK(samples.at(R"(coexec_pool_state{pool="ledger",state="TERMINATED"})") == "0");
  CHECK(samples.at(R"(coexec_pool_core_size{pool="ledger"})") == "1");
  CHECK(samples.at(R"(coexec_pool_maximum_size{pool="ledger"})") == "2");
  CHECK(samples.at(R"(coexec_pool_size{pool="ledger"})") == "2");
  CHECK(samples.at(R"(coexec_pool_active_threads{pool="ledger"})") == "2");
  CHECK(samples.at(R"(coexec_pool_largest_size{pool="ledger"})") == "2");
  CHECK(samples.at(R"(coexec_pool_queue_size{pool="ledger"})") == "1");
  CHECK(samples.at(R"(coexec_pool_queue_capacity{pool="ledger"})") == "1");
  CHECK(samples.at(R"(coexec_pool_tasks_total{pool="ledger"})") == "3");
  CHECK(samples.at(R"(coexec_pool_completed_tasks_total{pool="ledger"})") == "0");
  CHECK(samples.at(R"(coexec_pool_rejected_tasks_total{pool="ledger"})") == "2");

  // Then A, B, C complete; two tasks fail and one is cancelled at
  // submission, each submitted once the previous one has been taken from
  // the queue, so that none is rejected.
  gate.open();
  a.get();
  b.get();
  c.get();
  for (int i = 0; i < 2; ++i) {
    auto failing = pool.submit([]() -> int { throw std::runtime_error("task failed"); });
    CHECK_THROWS_AS(failing.get(), std::runtime_error);
  }
  CancellationSource source;
  source.requestCancellation();
  auto cancelled = pool.submit([] {}, source.token());
  CHECK_THROWS_AS(cancelled.get(), OperationCancelled);

  const PoolStats last = finalStats(pool);
  checkLedgerAddsUp(last);
  text.clear();
  writePrometheus(text, last);
  samples = samplesOf(text);
  CHECK(samples.at(R"(coexec_pool_state{pool="ledger",state="RUNNING"})") == "0");
  CHECK(samples.at(R"(coexec_pool_state{pool="ledger",state="TERMINATED"})") == "1");
  CHECK(samples.at(R"(coexec_pool_size{pool="ledger"})") == "0");
  CHECK(samples.at(R"(coexec_pool_active_threads{pool="ledger"})") == "0");
  CHECK(samples.at(R"(coexec_pool_largest_size{pool="ledger"})") == "2");
  CHECK(samples.at(R"(coexec_pool_queue_size{pool="ledger"})") == "0");
  CHECK(samples.at(R"(coexec_pool_tasks_total{pool="ledger"})") == "6");
  CHECK(samples.at(R"(coexec_pool_completed_tasks_total{pool="ledger"})") == "3");
  CHECK(samples.at(R"(coexec_pool_failed_tasks_total{pool="ledger"})") == "2");
  CHECK(samples.at(R"(coexec_pool_cancelled_tasks_total{pool="ledger"})") == "1");
  CHECK(samples.at(R"(coexec_pool_rejected_tasks_total{pool="ledger"})") == "2");
  CHECK(samples.at(R"(coexec_pool_discarded_tasks_total{pool="ledger"})") == "0");
  CHECK(samples.at(R"(coexec_pool_drained_tasks_total{pool="ledger"})") == "0");
  CHECK(samples.at(R"(coexec_pool_waited_for_room_tasks_total{pool="ledger"})") == "0");
  CHECK(samples.at(R"(coexec_pool_waiting_producers{pool="ledger"})") == "0");
}

TEST_CASE("every field of PoolStats reaches its family", "[prometheus][stats]") {
  // Distinct values, so that a field written into the wrong family shows.
  PoolStats s;
  s.name = "all";
  s.state = PoolState::stop;
  s.corePoolSize = 1;
  s.maximumPoolSize = 2;
  s.poolSize = 3;
  s.activeCount = 4;
  s.largestPoolSize = 5;
  s.taskCount = 6;
  s.completedTaskCount = 7;
  s.queueSize = 8;
  s.localQueueSize = 9;
  s.queueCapacity = 10;
  s.rejectedCount = 11;
  s.waitedForRoomCount = 12;
  s.waitingProducers = 13;
  s.failedCount = 14;
  s.cancelledCount = 15;
  s.discardedCount = 16;
  s.drainedCount = 17;
  s.scheduledCount = 18;
  s.temporaryThreadRuns = 19;
  coexec::LatencyHistogram waits;
  waits.record(3ms);
  waits.record(7ms);
  s.queueWait = coexec::LatencySummary::of(waits);
  coexec::LatencyHistogram runs;
  runs.record(2us);
  s.runTime = coexec::LatencySummary::of(runs);
  std::string text;
  writePrometheus(text, s);
  const auto samples = samplesOf(text);
  const std::map<std::string, std::string> expected = {
      {"coexec_pool_core_size", "1"},         {"coexec_pool_maximum_size", "2"},
      {"coexec_pool_size", "3"},              {"coexec_pool_active_threads", "4"},
      {"coexec_pool_largest_size", "5"},      {"coexec_pool_tasks_total", "6"},
      {"coexec_pool_completed_tasks_total", "7"}, {"coexec_pool_queue_size", "8"},
      {"coexec_pool_local_queue_size", "9"},  {"coexec_pool_queue_capacity", "10"},
      {"coexec_pool_rejected_tasks_total", "11"}, {"coexec_pool_waited_for_room_tasks_total", "12"},
      {"coexec_pool_waiting_producers", "13"}, {"coexec_pool_failed_tasks_total", "14"},
      {"coexec_pool_cancelled_tasks_total", "15"}, {"coexec_pool_discarded_tasks_total", "16"},
      {"coexec_pool_drained_tasks_total", "17"}, {"coexec_pool_scheduled_tasks", "18"},
      {"coexec_pool_temporary_thread_runs_total", "19"},
  };
  for (const auto& [name, value] : expected) {
    INFO(name);
    CHECK(samples.at(name + R"({pool="all"})") == value);
  }
  for (const char* state : {"RUNNING", "SHUTDOWN", "STOP", "TERMINATED"}) {
    INFO(state);
    CHECK(samples.at(std::string(R"(coexec_pool_state{pool="all",state=")") + state + "\"}") ==
          (std::string(state) == "STOP" ? "1" : "0"));
  }
  // The histograms: cumulative buckets, +Inf and _count the count, _sum in seconds.
  const auto bucket = [&](const char* family, const char* le) {
    return samples.at(std::string(family) + R"(_bucket{pool="all",le=")" + le + "\"}");
  };
  CHECK(bucket("coexec_pool_queue_wait_seconds", "0.0025") == "0");
  CHECK(bucket("coexec_pool_queue_wait_seconds", "0.005") == "1");
  CHECK(bucket("coexec_pool_queue_wait_seconds", "0.01") == "2");
  CHECK(bucket("coexec_pool_queue_wait_seconds", "+Inf") == "2");
  CHECK(samples.at(R"(coexec_pool_queue_wait_seconds_sum{pool="all"})") == "0.01");
  CHECK(samples.at(R"(coexec_pool_queue_wait_seconds_count{pool="all"})") == "2");
  CHECK(bucket("coexec_pool_run_time_seconds", "1e-06") == "0");
  CHECK(bucket("coexec_pool_run_time_seconds", "2.5e-06") == "1");
  CHECK(bucket("coexec_pool_run_time_seconds", "60") == "1");
  CHECK(samples.at(R"(coexec_pool_run_time_seconds_sum{pool="all"})") == "2e-06");
  CHECK(samples.at(R"(coexec_pool_run_time_seconds_count{pool="all"})") == "1");
  for (const char* family : {"coexec_pool_queue_wait_seconds", "coexec_pool_run_time_seconds"}) {
    INFO(family);
    std::uint64_t previous = 0;
    for (const char* le : kLeBounds) {
      INFO("le " << le);
      const std::uint64_t n = std::stoull(bucket(family, le));
      CHECK(n >= previous);  // cumulative
      previous = n;
    }
  }
  // The one-per-field families, the four state samples and two histograms of
  // 25 buckets, a sum and a count: nothing else.
  CHECK(samples.size() == expected.size() + 4 + 2 * (std::size(kLeBounds) + 2));
}

TEST_CASE("each family has one HELP and one TYPE line, counters end in _total and gauges do not",
          "[prometheus][format]") {
  PoolStats s;
  s.name = "io";
  std::string text;
  writePrometheus(text, s);
  const auto types = typesOf(text);
  CHECK(std::map<std::string, std::string>(types.begin(), types.end()) == kDocumentedTypes);
  CHECK(types.size() == kDocumentedTypes.size());
  for (const auto& [name, type] : types) {
    INFO(name);
    CHECK(count(text, "# HELP " + name + " ") == 1);
    CHECK(count(text, "# TYPE " + name + " ") == 1);
    CHECK(name.starts_with("coexec_pool_"));
    CHECK(name.ends_with("_total") == (type == "counter"));
    // HELP right before TYPE, and the family's samples right after it.
    const auto help = text.find("# HELP " + name + " ");
    const auto typeLine = text.find("# TYPE " + name + " ");
    CHECK(text.find('\n', help) + 1 == typeLine);
    const std::string first = name + (type == "histogram" ? "_bucket{" : "{");
    CHECK(text.compare(text.find('\n', typeLine) + 1, first.size(), first) == 0);
  }
}

TEST_CASE("an unbounded queue's capacity is +Inf, a synchronous queue's 0", "[prometheus][format]") {
  PoolStats s;
  s.name = "q";
  s.queueCapacity = WorkQueue::kUnboundedCapacity;
  std::string text;
  writePrometheus(text, s);
  CHECK(samplesOf(text).at(R"(coexec_pool_queue_capacity{pool="q"})") == "+Inf");
  ThreadPoolExecutor pool(1, 1, 60s, WorkQueue::synchronous());
  text.clear();
  writePrometheus(text, pool.stats());
  CHECK(samplesOf(text).at(R"(coexec_pool_queue_capacity{pool="coexec"})") == "0");
}

TEST_CASE("writePrometheus appends to the string and leaves what was there", "[prometheus][format]") {
  PoolStats s;
  s.name = "a";
  std::string text = "# a line of the caller's\n";
  writePrometheus(text, s);
  CHECK(text.starts_with("# a line of the caller's\n# HELP coexec_pool_state "));
  std::string alone;
  writePrometheus(alone, s);
  CHECK(text == "# a line of the caller's\n" + alone);
}

// ---- labels ----------------------------------------------------------------------

TEST_CASE("label values are escaped: backslash, double quote and newline", "[prometheus][labels]") {
  PoolStats s;
  s.name = "a\\b\"c\nd";
  std::string text;
  writePrometheus(text, s, {{"path", "C:\\dir"}, {"quote", "say \"hi\""}, {"utf8", "caf\xc3\xa9 {x}, y=z"}});
  CHECK(count(text, R"(coexec_pool_size{pool="a\\b\"c\nd",path="C:\\dir",quote="say \"hi\"",)"
                    "utf8=\"caf\xc3\xa9 {x}, y=z\"} 0\n") == 1);
  // No raw newline inside a sample: every line is one the format allows.
  CHECK(samplesOf(text).size() == kSamplesPerPool);
}

TEST_CASE("the labels follow the default pool label in the caller's order and a pool label replaces it",
          "[prometheus][labels]") {
  PoolStats s;
  s.name = "io";
  std::string text;
  writePrometheus(text, s, {{"zone", "b"}, {"app", "a"}});
  CHECK(count(text, "coexec_pool_size{pool=\"io\",zone=\"b\",app=\"a\"} 0\n") == 1);
  text.clear();
  writePrometheus(text, s, {{"zone", "b"}, {"pool", "renamed"}});
  CHECK(count(text, "coexec_pool_size{zone=\"b\",pool=\"renamed\"} 0\n") == 1);
  CHECK(count(text, "\"io\"") == 0);
}

TEST_CASE("invalid label names throw std::invalid_argument and leave the string unchanged",
          "[prometheus][labels]") {
  PoolStats s;
  s.name = "io";
  for (const char* name : {"", "1abc", "a-b", "a b", "caf\xc3\xa9", "a:b", "__name__", "__x", "state", "le"}) {
    INFO("label name '" << name << "'");
    std::string text = "kept";
    CHECK_THROWS_AS(writePrometheus(text, s, {{"ok", "1"}, {name, "v"}}), std::invalid_argument);
    CHECK(text == "kept");
  }
  std::string text = "kept";
  CHECK_THROWS_AS(writePrometheus(text, s, {{"zone", "a"}, {"zone", "b"}}), std::invalid_argument);
  CHECK_THROWS_AS(writePrometheus(text, s, {{"pool", "a"}, {"pool", "b"}}), std::invalid_argument);
  CHECK(text == "kept");
  // The rules' edges that are valid.
  for (const char* name : {"_", "_x", "a_", "A9", "x__y"}) {
    INFO("label name '" << name << "'");
    CHECK_NOTHROW(writePrometheus(text, s, {{name, "v"}}));
  }
}

// ---- several pools ---------------------------------------------------------------

TEST_CASE("several pools: each family once, one sample per pool in the caller's order",
          "[prometheus][multipool]") {
  std::vector<LabelledStats> pools(3);
  pools[0].stats.name = "cpu";
  pools[0].stats.poolSize = 4;
  pools[1].stats.name = "io";
  pools[1].stats.poolSize = 16;
  pools[1].stats.state = PoolState::shutdown;
  pools[2].stats.name = "io";
  pools[2].stats.poolSize = 2;
  pools[2].labels = {{"shard", "2"}};
  std::string text;
  writePrometheus(text, pools);
  const auto types = typesOf(text);
  CHECK(types.size() == kDocumentedTypes.size());
  for (const auto& [name, type] : types) {
    INFO(name);
    CHECK(count(text, "# TYPE " + name + " ") == 1);
    // The family's samples directly follow its TYPE line, pool by pool.
    const auto block = text.find('\n', text.find("# TYPE " + name + " ")) + 1;
    const auto end = text.find("# HELP ", block);
    const std::string samples = text.substr(block, end == std::string::npos ? std::string::npos : end - block);
    const auto cpu = samples.find("{pool=\"cpu\"");
    const auto io = samples.find("{pool=\"io\"}");
    const auto io2 = samples.find("{pool=\"io\",shard=\"2\"");
    const bool histogram = type == "histogram";
    const auto io1 = name == "coexec_pool_state" ? samples.find("{pool=\"io\",state=")
                     : histogram                 ? samples.find("{pool=\"io\",le=")
                                                 : io;
    CHECK(cpu < io1);
    CHECK(io1 < io2);
    CHECK(io2 != std::string::npos);
    CHECK(linesOf(samples).size() == (name == "coexec_pool_state" ? 12u : histogram ? 3 * kHistogramSamples : 3u));
  }
  const auto samples = samplesOf(text);
  CHECK(samples.at(R"(coexec_pool_size{pool="cpu"})") == "4");
  CHECK(samples.at(R"(coexec_pool_size{pool="io"})") == "16");
  CHECK(samples.at(R"(coexec_pool_size{pool="io",shard="2"})") == "2");
  CHECK(samples.at(R"(coexec_pool_state{pool="io",state="SHUTDOWN"})") == "1");
  CHECK(samples.at(R"(coexec_pool_state{pool="cpu",state="RUNNING"})") == "1");

  // One pool through either overload gives the same text.
  std::string one;
  writePrometheus(one, pools[0].stats);
  std::string span;
  writePrometheus(span, std::span<const LabelledStats>(pools.data(), 1));
  CHECK(one == span);
}

TEST_CASE("several pools with the same label set throw std::invalid_argument", "[prometheus][multipool]") {
  std::vector<LabelledStats> pools(2);
  pools[0].stats.name = "io";
  pools[0].labels = {{"zone", "a"}, {"shard", "1"}};
  pools[1].stats.name = "io";
  pools[1].labels = {{"shard", "1"}, {"zone", "a"}};  // the same set in another order
  std::string text = "kept";
  CHECK_THROWS_AS(writePrometheus(text, pools), std::invalid_argument);
  CHECK(text == "kept");
  pools[1].labels[0].second = "2";
  CHECK_NOTHROW(writePrometheus(text, pools));
  // An empty span writes nothing.
  std::string empty;
  writePrometheus(empty, std::span<const LabelledStats>());
  CHECK(empty.empty());
}

// ---- docs/production.md ----------------------------------------------------------

// The code of docs/production.md, "Metrics for Prometheus", verbatim
// (docs.productionSnippetsMatch checks that the doc shows it unchanged).
TEST_CASE("the snippets of docs/production.md write the pages it describes", "[prometheus][docs]") {
  ThreadPoolExecutor pool(coexec::Executors::fixed(2, 100, "api"));
  ThreadPoolExecutor cpu(coexec::Executors::fixed(2, 100, "cpu"));
  ThreadPoolExecutor io(coexec::Executors::fixed(2, 100, "io"));
  {
    // snippet:begin prometheus-one-pool
    std::string page;
    coexec::writePrometheus(page, pool.stats());
    // snippet:end
    CHECK(count(page, "coexec_pool_maximum_size{pool=\"api\"} 2\n") == 1);
  }
  {
    // snippet:begin prometheus-several-pools
    const coexec::LabelledStats pools[] = {
        {cpu.stats(), {}},
        {io.stats(), {{"tier", "storage"}}},
    };
    std::string page;
    coexec::writePrometheus(page, pools);
    // snippet:end
    CHECK(count(page, "# TYPE coexec_pool_size gauge\n"
                      "coexec_pool_size{pool=\"cpu\"} 0\n"
                      "coexec_pool_size{pool=\"io\",tier=\"storage\"} 0\n") == 1);
  }
}
