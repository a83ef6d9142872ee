// SPDX-License-Identifier: BSL-1.0
#include "model/FaultSweep.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "coexec/detail/FaultInjection.h"
#include "model/GlobalNew.h"
#include "model/Program.h"
#include "model/Runner.h"

namespace coexec::stress {
namespace {

struct SiteTally {
  std::uint64_t programs = 0;  ///< runs with a fault planned
  std::uint64_t injected = 0;  ///< of those, runs in which the fault fired
  std::uint64_t survived = 0;  ///< runs that fired and passed every check
};

/// Where each fault ends up, as docs/reliability.md's fault table says.
const char* reportedAt(FaultSite site) {
  switch (site) {
    case FaultSite::threadFactory: return "uncaught handler; the task goes on to the queue or the policy";
    case FaultSite::beforeExecute: return "the task's Future (or the uncaught handler); counted failed";
    case FaultSite::afterExecute: return "printed and dropped; the task's outcome stands";
    case FaultSite::uncaughtHandler: return "printed and dropped";
    case FaultSite::rejectionHandler: return "thrown to the submitting caller";
    case FaultSite::frameAllocator: return "std::bad_alloc to the caller, the awaiting parent or the Future";
    case FaultSite::globalNew: return "std::bad_alloc to the caller, a worker's to the uncaught handler, or absorbed";
    case FaultSite::none: break;
  }
  return "";
}

/// False for a site this binary cannot fault.
bool available(FaultSite site) {
  if (site == FaultSite::frameAllocator) return detail::FaultInjection::available();
  if (site == FaultSite::globalNew) return impl::globalNewCounters.installed.load();
  return true;
}

/// The N values to try for a site called `calls` times.
std::vector<std::uint64_t> sweepOf(std::uint64_t calls) {
  std::vector<std::uint64_t> ns;
  for (std::uint64_t n = 1; n <= calls && n <= 24; ++n) ns.push_back(n);
  for (std::uint64_t n = 32; n <= calls; n = n * 3 / 2) ns.push_back(n);
  return ns;
}

}  // namespace

int runFaultSweep(double seconds, bool verbose, const SweepFilter& filter) {
  const std::uint64_t onlySeed = filter.seed;
  if (filter.site != nullptr &&
      std::none_of(std::begin(kFaultSites), std::end(kFaultSites),
                   [&](FaultSite site) { return std::string_view(toString(site)) == filter.site; })) {
    std::string names;
    for (const FaultSite site : kFaultSites)
      names += fmt::format("{}{}", names.empty() ? "" : ", ", toString(site));
    throw std::invalid_argument(fmt::format("--site {}: no such fault site ({})", filter.site, names));
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::array<SiteTally, std::size(kFaultSites)> tallies{};
  ProgramShape shape;
  shape.midwayShutdown = false;
  shape.maxOpsPerThread = 24;
  std::uint64_t seed = onlySeed != 0 ? onlySeed : 1;
  bool fullPass = false;
  while (!fullPass || (onlySeed == 0 && std::chrono::duration<double>(Clock::now() - start).count() < seconds)) {
    for (std::size_t s = 0; s < std::size(kFaultSites); ++s) {
      const FaultSite site = kFaultSites[s];
      if (!available(site)) continue;
      if (filter.site != nullptr && std::string_view(toString(site)) != filter.site) continue;
      Program program = generate(seed, shape);
      program.faults = FaultPlan{site, 0, false};
      const RunReport dry = runProgram(program);
      if (!dry.ok()) {
        fmt::print("FAILED without a fault: {}", describe(program));
        for (const auto& v : dry.violations) fmt::print("  violation: {}\n", v);
        fmt::print("replay: stress_ModelStress --faults --seed {}\n", seed);
        return 1;
      }
      for (const std::uint64_t n : sweepOf(dry.siteCalls)) {
        if (filter.nth != 0 && n != filter.nth) continue;
        const bool allocator = site == FaultSite::frameAllocator || site == FaultSite::globalNew;
        program.faults = FaultPlan{site, static_cast<std::uint32_t>(n), !allocator && n % 2 == 0};
        if (verbose) fmt::print("{}", describe(program));
        const RunReport report = runProgram(program);
        SiteTally& t = tallies[s];
        ++t.programs;
        if (report.faultsFired > 0) ++t.injected;
        if (!report.ok()) {
          fmt::print("FAILED: {}", describe(program));
          for (const auto& v : report.violations) fmt::print("  violation: {}\n", v);
          fmt::print("  final stats: {}\n", report.finalStats);
          fmt::print("replay: stress_ModelStress --faults --seed {} --site {} --call {} (the count of calls varies "
                     "with timing: --seed {} alone replays every N)\n",
                     seed, toString(site), n, seed);
          std::fflush(stdout);
          return 1;
        }
        if (report.faultsFired > 0) ++t.survived;
      }
    }
    ++seed;
    fullPass = true;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const std::uint64_t firstSeed = onlySeed != 0 ? onlySeed : 1;
  fmt::print("fault sweep: {} programs (seeds {}..{}) in {:.1f} s\n", seed - firstSeed, firstSeed, seed - 1, elapsed);
  fmt::print("| {:<16} | {:>8} | {:>8} | {:>8} | {}\n", "site", "runs", "injected", "survived", "reported at");
  std::uint64_t runs = 0, injected = 0, survived = 0;
  for (std::size_t s = 0; s < std::size(kFaultSites); ++s) {
    const SiteTally& t = tallies[s];
    fmt::print("| {:<16} | {:>8} | {:>8} | {:>8} | {}\n", toString(kFaultSites[s]), t.programs, t.injected, t.survived,
               reportedAt(kFaultSites[s]));
    runs += t.programs;
    injected += t.injected;
    survived += t.survived;
  }
  if (!available(FaultSite::frameAllocator)) {
    fmt::print("(frameAllocator skipped: this build has no fault points; configure with COEXEC_FAULT_INJECTION=ON)\n");
  }
  if (!available(FaultSite::globalNew)) {
    fmt::print("(globalNew skipped: this binary keeps the standard operator new; link model/GlobalNew.cpp)\n");
  }
  fmt::print("fault sweep: {} runs, {} faults injected, {} survived\n", runs, injected, survived);
  fmt::print("{} passed, 0 failed\n", runs);
  return 0;
}

}  // namespace coexec::stress
