// SPDX-License-Identifier: BSL-1.0
#pragma once

// The fault sweep: for each fault site (model/Program.h, FaultSite) and a few
// programs without a mid-program shutdown, runs the program once to count the
// calls at that site, then again with the N-th call throwing, for N = 1, 2,
// ... (every N up to 24, then a spread of larger ones up to the count), and
// checks each run as every stress program is checked (model/Runner.h), plus:
// the fault was reported where the fault table of docs/reliability.md says,
// and the pool ran new tasks after it.

#include <cstdint>

namespace coexec::stress {

/// Which part of the sweep to run: all of it (the defaults), or, to replay a
/// failure, one seed's program, one site of it, one N.
struct SweepFilter {
  std::uint64_t seed = 0;          ///< 0: every seed from 1 on, for about `seconds`
  const char* site = nullptr;      ///< null: every site; else its name (toString(FaultSite))
  std::uint64_t nth = 0;           ///< 0: every N of the sweep; else that call only
};

/// Sweeps for about `seconds` (at least one pass over every site); prints a
/// table of faults injected and survived per site. 0 if every run passed, 1
/// (after printing the failing program, its violations and the command that
/// replays it) otherwise. With `filter.seed` set, sweeps that seed's program
/// alone, once, whatever `seconds` says; throws std::invalid_argument for a
/// site name that names none.
int runFaultSweep(double seconds, bool verbose, const SweepFilter& filter = {});

}  // namespace coexec::stress
