// SPDX-License-Identifier: BSL-1.0
// The model-based stress driver: generates programs from seeds (a random pool
// configuration and random operations on several producer threads, see
// model/Program.h), runs each on a fresh pool and checks every promise
// model/Runner.h lists. Bounded by time, not by size: the sanitizer builds
// run for as long as the plain one.
//
//   stress_ModelStress [--seconds S] [--programs N] [--seed N] [--first-seed N]
//                      [--faults [--site NAME] [--call N]] [--verbose]
//
//   --seconds S      run new programs until S seconds have passed (default 20)
//   --programs N     stop after N programs (default: no limit)
//   --seed N         run the program of seed N once, printing it (a replay)
//   --first-seed N   the first seed (default: from the clock, printed)
//   --faults         the fault sweep instead (model/FaultSweep.h): each fault
//                    site, the N-th call throwing for N = 1, 2, ...; with
//                    --seed N, the sweep of seed N's program alone (a replay),
//                    narrowed by --site NAME (one fault site) and --call N
//                    (its N-th call only)
//   --verbose        print every program
//
// Exit 0 when every program passed; 1 and the failing program's seed, its
// description and the violations otherwise.

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "model/FaultSweep.h"
#include "model/Program.h"
#include "model/Runner.h"

namespace {

using coexec::stress::Program;
using coexec::stress::RunReport;

struct Settings {
  double seconds = 20;
  std::uint64_t programs = 0;
  bool replay = false;
  std::uint64_t seed = 0;
  bool firstSeedGiven = false;
  std::uint64_t firstSeed = 0;
  bool faults = false;
  const char* site = nullptr;
  std::uint64_t call = 0;
  bool verbose = false;
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "stress_ModelStress: %s\n"
               "usage: stress_ModelStress [--seconds S] [--programs N] [--seed N] [--first-seed N] [--faults "
               "[--site NAME] [--call N]] [--verbose]\n",
               error.c_str());
  std::exit(2);
}

std::uint64_t number(int& i, int argc, char** argv) {
  if (i + 1 >= argc) usage(fmt::format("{} needs a number", argv[i]));
  const std::string text = argv[++i];
  try {
    std::size_t used = 0;
    const unsigned long long v = std::stoull(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    usage(fmt::format("{} needs a number, not '{}'", argv[i - 1], text));
  }
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--seconds") {
      s.seconds = static_cast<double>(number(i, argc, argv));
    } else if (arg == "--programs") {
      s.programs = number(i, argc, argv);
    } else if (arg == "--seed") {
      s.replay = true;
      s.seed = number(i, argc, argv);
    } else if (arg == "--first-seed") {
      s.firstSeedGiven = true;
      s.firstSeed = number(i, argc, argv);
    } else if (arg == "--faults") {
      s.faults = true;
    } else if (arg == "--site") {
      if (i + 1 >= argc) usage("--site needs a fault site's name");
      s.site = argv[++i];
    } else if (arg == "--call") {
      s.call = number(i, argc, argv);
      if (s.call == 0) usage("--call counts from 1");
    } else if (arg == "--verbose") {
      s.verbose = true;
    } else {
      usage(fmt::format("unknown argument '{}'", arg));
    }
  }
  if (s.faults && s.replay && s.seed == 0) usage("the fault sweep's seeds start at 1: --faults --seed 0 names none");
  if ((s.site != nullptr || s.call != 0) && !(s.faults && s.replay)) usage("--site and --call replay a fault run: they need --faults --seed N");
  return s;
}

void printFailure(const Program& program, const RunReport& report) {
  fmt::print("FAILED: {}", coexec::stress::describe(program));
  for (const auto& v : report.violations) fmt::print("  violation: {}\n", v);
  fmt::print("  final stats: {}\n", report.finalStats);
  if (program.faults.site == coexec::stress::FaultSite::none) {
    fmt::print("replay: stress_ModelStress --seed {}\n", program.seed);
  }
  std::fflush(stdout);
}

int runStress(const Settings& s) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const std::uint64_t first = s.replay ? s.seed
                              : s.firstSeedGiven
                                  ? s.firstSeed
                                  : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  if (!s.replay) fmt::print("model stress: first seed {}, {} s\n", first, s.seconds);
  std::uint64_t programs = 0, tasks = 0, started = 0, futures = 0, handles = 0, returned = 0, admitted = 0;
  std::uint64_t foreign = 0, foreignOnWorkers = 0, aligned = 0;
  std::array<std::uint64_t, 4> foreignOutcomes{};
  auto lastReport = start;
  for (std::uint64_t seed = first;; ++seed) {
    const Program program = coexec::stress::generate(seed);
    if (s.replay || s.verbose) fmt::print("{}", coexec::stress::describe(program));
    std::fflush(stdout);
    const RunReport report = coexec::stress::runProgram(program);
    ++programs;
    tasks += report.tasks;
    started += report.started;
    futures += report.futures;
    handles += report.handles;
    returned += report.pendingReturned;
    admitted += report.admitted;
    foreign += report.foreign;
    foreignOnWorkers += report.foreignOnWorkers;
    aligned += report.alignedResults;
    for (std::size_t i = 0; i < foreignOutcomes.size(); ++i)
      foreignOutcomes[i] += report.foreignOutcomes[i];
    if (!report.ok()) {
      printFailure(program, report);
      return 1;
    }
    if (s.replay || s.verbose) fmt::print("  passed: {}\n", report.finalStats);
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    if (now - lastReport >= std::chrono::seconds(10)) {
      lastReport = now;
      fmt::print("  {:6.0f} s: {} programs, {} tasks, 0 lost\n", elapsed, programs, tasks);
      std::fflush(stdout);
    }
    if (s.replay || (s.programs != 0 && programs >= s.programs) || elapsed >= s.seconds) break;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  fmt::print(
      "model stress: {} programs in {:.1f} s (seeds {}..{}): {} tasks created, {} ran, {} admitted by the pools, "
      "{} Futures and {} periodic handles settled as their tasks allow, {} drained tasks accounted; {} foreign "
      "coroutines ended once ({} started on a worker, ended before its pool terminated; from the task they awaited: "
      "{} values, {} errors, {} cancellations, {} refusals), {} over-aligned results aligned and intact; 0 lost\n",
      programs, elapsed, first, first + programs - 1, tasks, started, admitted, futures, handles, returned, foreign,
      foreignOnWorkers, foreignOutcomes[0], foreignOutcomes[1], foreignOutcomes[2], foreignOutcomes[3], aligned);
  fmt::print("{} passed, 0 failed\n", programs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = parse(argc, argv);
  try {
    if (s.faults) {
      return coexec::stress::runFaultSweep(s.seconds, s.verbose, {s.replay ? s.seed : 0, s.site, s.call});
    }
    return runStress(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stress_ModelStress: %s\n", e.what());
    return 1;
  }
}
