// SPDX-License-Identifier: BSL-1.0
// libFuzzer target: the bytes are decoded into a stress program (a pool
// configuration and operations on up to two producer threads, see
// tests/stress/model/Program.h: any bytes make a valid program), which runs
// on a fresh pool and is checked as every program of the model-based stress
// driver is (tests/stress/model/Runner.h). A broken promise prints the
// program and the violations and aborts, which libFuzzer reports as a crash
// and saves the input: `build/fuzz/tests/fuzz/fuzz_Program <file>` replays
// it.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "model/Program.h"
#include "model/Runner.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  coexec::stress::ProgramShape shape;
  shape.maxThreads = 2;
  shape.maxOpsPerThread = 16;
  const coexec::stress::Program program = coexec::stress::decode(data, size, shape);
  coexec::stress::RunOptions options;
  options.watchdogSeconds = 60;
  const coexec::stress::RunReport report = coexec::stress::runProgram(program, options);
  if (!report.ok()) {
    std::fprintf(stderr, "ProgramFuzz: a program broke a promise:\n%s", coexec::stress::describe(program).c_str());
    for (const auto& v : report.violations) std::fprintf(stderr, "  violation: %s\n", v.c_str());
    std::fprintf(stderr, "  final stats: %s\n", report.finalStats.c_str());
    std::fflush(stderr);
    std::abort();
  }
  return 0;
}
