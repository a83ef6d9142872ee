// SPDX-License-Identifier: BSL-1.0
#pragma once

// `offload_server demo`: the server in-process, driven by its own load
// generator, with a bounded and then an unbounded pool queue.

namespace offload {

/// Runs the demo (calibration, then three load phases against each
/// configuration) and prints the comparison table. Blocks for under a
/// minute. Returns the process exit code: 0 if every phase ran.
/// \throws std::system_error if the server cannot listen on loopback.
int runDemo();

}  // namespace offload
