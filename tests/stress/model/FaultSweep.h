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

/// Sweeps for about `seconds` (at least one pass over every site); prints a
/// table of faults injected and survived per site. 0 if every run passed, 1
/// (after printing the failing program, its violations and the command that
/// replays it) otherwise. With `onlySeed` non-zero, sweeps that seed's program
/// alone, once, whatever `seconds` says (the replay of a failure).
int runFaultSweep(double seconds, bool verbose, std::uint64_t onlySeed = 0);

}  // namespace coexec::stress
