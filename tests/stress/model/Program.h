// SPDX-License-Identifier: BSL-1.0
#pragma once

// The model-based stress driver's programs: a random pool configuration and,
// for each of a few producer threads, a list of operations on that pool
// (submit and execute of callables and coroutine tasks, cancel, resize,
// schedule*, the combinators, TaskGroup, KeyedExecutor, shutdown,
// shutdownNow, awaitTermination, ...). A program is built from a stream of
// choices: a seeded generator (generate(), for the stress runs and the soak)
// or a byte string (decode(), for the fuzzer), so that one builder serves
// both and a failing program is replayed from its seed or its bytes.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace coexec::stress {

enum class QueueKind : std::uint8_t { bounded, unbounded, synchronous, priority };
enum class PolicyKind : std::uint8_t { abort, callerRuns, discard, discardOldest, block, newThreadRuns, custom };

/// Where the fault plan makes the n-th call throw (docs/reliability.md, "Faults").
enum class FaultSite : std::uint8_t {
  none,
  threadFactory,     ///< ThreadPoolOptions::threadFactory
  beforeExecute,     ///< Hooks::beforeExecute
  afterExecute,      ///< Hooks::afterExecute
  uncaughtHandler,   ///< ThreadPoolOptions::uncaughtExceptionHandler
  rejectionHandler,  ///< a user RejectionPolicy
  frameAllocator,    ///< FrameAllocator::allocate() (std::bad_alloc; COEXEC_FAULT_INJECTION builds)
  globalNew,         ///< the global operator new inside a producer's pool API call (std::bad_alloc, or null
                     ///< from the nothrow forms; binaries that link model/GlobalNew.cpp)
};
inline constexpr FaultSite kFaultSites[] = {
    FaultSite::threadFactory,    FaultSite::beforeExecute,  FaultSite::afterExecute, FaultSite::uncaughtHandler,
    FaultSite::rejectionHandler, FaultSite::frameAllocator, FaultSite::globalNew};
const char* toString(FaultSite site);

struct FaultPlan {
  FaultSite site = FaultSite::none;
  std::uint32_t nth = 0;       ///< the call that throws (1 = the first); 0: none
  bool badAlloc = false;       ///< throw std::bad_alloc instead of FaultError (user-code sites)
};

struct PoolConfig {
  std::uint32_t core = 1;
  std::uint32_t max = 1;
  std::uint32_t keepAliveMicros = 0;
  bool coreTimeout = false;
  QueueKind queue = QueueKind::bounded;
  std::uint32_t capacity = 16;  ///< bounded and priority
  PolicyKind policy = PolicyKind::abort;
  std::uint32_t blockMicros = 1000;   ///< block()
  std::uint32_t temporaryThreads = 1; ///< newThreadRuns()
  bool hooks = false;
  bool runDelayedAfterShutdown = true;
  bool continuePeriodicAfterShutdown = false;
  std::uint32_t keyedLanes = 0;  ///< 0: no KeyedExecutor
};

/// What a task body does.
enum class Body : std::uint8_t {
  quick,     ///< returns its value
  throws,    ///< throws StressError naming its task
  spin,      ///< busy for `micros`, watching its token; returns (or, if told to, throws OperationCancelled)
  sleep,     ///< coroutines: co_await sleepFor(micros); callables: spin
  children,  ///< coroutines: submits `fanout` children and awaits them; callables: quick
  detached,  ///< coroutines and callables: submits `fanout` children and drops their Futures, executes one more
  foreign,   ///< coroutines and callables: submits a child and starts a coroutine of a type foreign to coexec
             ///< that awaits it (after a sleep, through whenAll, or directly) and outlives the task
  aligned,   ///< a producer's submit, execute or schedule: the task's result is alignas(64) and its capture
             ///< alignas(32); in a coroutine: awaits two such children; in a callable: executes one
};

enum class OpKind : std::uint8_t {
  submitCallable,
  executeCallable,
  submitCoroutine,
  executeCoroutine,
  submitWithToken,
  cancelRecent,
  cancelSource,
  resize,
  schedule,
  scheduleAtFixedRate,
  scheduleWithFixedDelay,
  cancelPeriodic,
  invokeAll,
  invokeAny,
  whenAll,
  taskGroup,
  keyed,
  purge,
  prestart,
  awaitTermination,
  pause,
  shutdown,     ///< mid-program
  shutdownNow,  ///< mid-program
};

struct Op {
  OpKind kind = OpKind::pause;
  Body body = Body::quick;
  std::uint32_t micros = 0;   ///< spin, sleep, delays, periods, pauses
  std::uint32_t fanout = 0;   ///< children, combinator width
  std::uint32_t arg = 0;      ///< priority, index of a source or a key, a size, a flag
  std::uint32_t depth = 0;    ///< how deep children may nest
};

enum class Ending : std::uint8_t { shutdown, shutdownNow, close };

struct Program {
  std::uint64_t seed = 0;     ///< the generator's seed (0 for a decoded program)
  PoolConfig config;
  std::vector<std::vector<Op>> threads;  ///< one list per producer thread
  Ending ending = Ending::shutdown;
  FaultPlan faults;
};

/// Readable names, for describe() and the driver's messages.
const char* toString(QueueKind queue);
const char* toString(PolicyKind policy);
const char* toString(Body body);
const char* toString(OpKind kind);
const char* toString(Ending ending);

/// Limits on what a program may hold.
struct ProgramShape {
  std::size_t maxThreads = 3;
  std::size_t maxOpsPerThread = 40;
  bool midwayShutdown = true;  ///< may contain shutdown / shutdownNow ops
};

/// The program of `seed`. Same seed, same program.
Program generate(std::uint64_t seed, const ProgramShape& shape = {});
/// The program `size` bytes describe (any bytes make a valid program).
Program decode(const std::uint8_t* data, std::size_t size, const ProgramShape& shape = {});
/// The program as readable lines: the configuration, then each thread's ops.
std::string describe(const Program& program);

}  // namespace coexec::stress
