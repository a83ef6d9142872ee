// SPDX-License-Identifier: BSL-1.0
#include "model/Program.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

namespace coexec::stress {
namespace {

/// A stream of choices: from a seeded generator or from bytes.
class Choices {
 public:
  virtual ~Choices() = default;
  /// A value in [0, n), n >= 1.
  virtual std::uint32_t below(std::uint32_t n) = 0;
  bool chance(std::uint32_t percent) { return below(100) < percent; }
};

class SeededChoices final : public Choices {
 public:
  explicit SeededChoices(std::uint64_t seed) : rng_(seed) {}
  std::uint32_t below(std::uint32_t n) override { return static_cast<std::uint32_t>(rng_() % n); }

 private:
  std::mt19937_64 rng_;
};

/// Reads one byte per choice (two for wide ranges); zeros once exhausted, so
/// any input, even empty, is a whole program.
class ByteChoices final : public Choices {
 public:
  ByteChoices(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint32_t below(std::uint32_t n) override {
    std::uint32_t v = next();
    if (n > 256) v = (v << 8) | next();
    return v % n;
  }
  bool exhausted() const { return at_ >= size_; }

 private:
  std::uint32_t next() { return at_ < size_ ? data_[at_++] : 0; }
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

PoolConfig buildConfig(Choices& c) {
  PoolConfig p;
  p.max = 1 + c.below(4);
  p.core = std::min<std::uint32_t>(c.below(4), p.max);
  static constexpr std::uint32_t kKeepAlive[] = {0, 200, 5000, 60'000'000};
  p.keepAliveMicros = kKeepAlive[c.below(4)];
  p.coreTimeout = c.chance(20);
  p.queue = static_cast<QueueKind>(c.below(4));
  static constexpr std::uint32_t kCapacity[] = {1, 2, 4, 16, 256};
  p.capacity = kCapacity[c.below(5)];
  p.policy = static_cast<PolicyKind>(c.below(7));
  p.blockMicros = 200 + c.below(3000);
  p.temporaryThreads = 1 + c.below(2);
  p.hooks = c.chance(40);
  p.runDelayedAfterShutdown = c.chance(70);
  p.continuePeriodicAfterShutdown = c.chance(20);
  p.keyedLanes = c.chance(30) ? 1 + c.below(4) : 0;
  return p;
}

Body buildBody(Choices& c) {
  static constexpr Body kBodies[] = {Body::quick,    Body::quick,    Body::throws,  Body::spin,   Body::sleep,
                                     Body::children, Body::detached, Body::foreign, Body::aligned};
  return kBodies[c.below(9)];
}

Op buildOp(Choices& c, const ProgramShape& shape, std::uint32_t sources) {
  Op op;
  // Weights: plain submissions dominate; lifecycle operations are rare.
  const std::uint32_t roll = c.below(100);
  if (roll < 14) op.kind = OpKind::submitCallable;
  else if (roll < 24) op.kind = OpKind::executeCallable;
  else if (roll < 36) op.kind = OpKind::submitCoroutine;
  else if (roll < 42) op.kind = OpKind::executeCoroutine;
  else if (roll < 48) op.kind = OpKind::submitWithToken;
  else if (roll < 54) op.kind = OpKind::cancelRecent;
  else if (roll < 56) op.kind = OpKind::cancelSource;
  else if (roll < 59) op.kind = OpKind::resize;
  else if (roll < 63) op.kind = OpKind::schedule;
  else if (roll < 65) op.kind = OpKind::scheduleAtFixedRate;
  else if (roll < 67) op.kind = OpKind::scheduleWithFixedDelay;
  else if (roll < 69) op.kind = OpKind::cancelPeriodic;
  else if (roll < 73) op.kind = OpKind::invokeAll;
  else if (roll < 76) op.kind = OpKind::invokeAny;
  else if (roll < 79) op.kind = OpKind::whenAll;
  else if (roll < 82) op.kind = OpKind::taskGroup;
  else if (roll < 87) op.kind = OpKind::keyed;
  else if (roll < 88) op.kind = OpKind::purge;
  else if (roll < 90) op.kind = OpKind::prestart;
  else if (roll < 91) op.kind = OpKind::awaitTermination;
  else if (roll < 98 || !shape.midwayShutdown) op.kind = OpKind::pause;
  else if (roll < 99) op.kind = OpKind::shutdown;
  else op.kind = OpKind::shutdownNow;
  op.body = buildBody(c);
  static constexpr std::uint32_t kMicros[] = {0, 20, 100, 300, 1000, 3000};
  op.micros = kMicros[c.below(6)];
  op.fanout = 1 + c.below(4);
  op.arg = c.below(std::max<std::uint32_t>(sources, 8));
  op.depth = c.below(3);
  return op;
}

Program build(Choices& c, const ProgramShape& shape) {
  Program program;
  program.config = buildConfig(c);
  const std::size_t threads = 1 + c.below(static_cast<std::uint32_t>(std::max<std::size_t>(shape.maxThreads, 1)));
  program.threads.resize(threads);
  for (auto& ops : program.threads) {
    const std::size_t n = 1 + c.below(static_cast<std::uint32_t>(std::max<std::size_t>(shape.maxOpsPerThread, 1)));
    ops.reserve(n);
    for (std::size_t i = 0; i < n; ++i) ops.push_back(buildOp(c, shape, 4));
  }
  program.ending = static_cast<Ending>(c.below(3));
  return program;
}

}  // namespace

const char* toString(QueueKind q) {
  switch (q) {
    case QueueKind::bounded: return "bounded";
    case QueueKind::unbounded: return "unbounded";
    case QueueKind::synchronous: return "synchronous";
    case QueueKind::priority: return "priority";
  }
  return "?";
}

const char* toString(PolicyKind p) {
  switch (p) {
    case PolicyKind::abort: return "abort";
    case PolicyKind::callerRuns: return "callerRuns";
    case PolicyKind::discard: return "discard";
    case PolicyKind::discardOldest: return "discardOldest";
    case PolicyKind::block: return "block";
    case PolicyKind::newThreadRuns: return "newThreadRuns";
    case PolicyKind::custom: return "custom";
  }
  return "?";
}

const char* toString(Body b) {
  switch (b) {
    case Body::quick: return "quick";
    case Body::throws: return "throws";
    case Body::spin: return "spin";
    case Body::sleep: return "sleep";
    case Body::children: return "children";
    case Body::detached: return "detached";
    case Body::foreign: return "foreign";
    case Body::aligned: return "aligned";
  }
  return "?";
}

const char* toString(OpKind k) {
  switch (k) {
    case OpKind::submitCallable: return "submitCallable";
    case OpKind::executeCallable: return "executeCallable";
    case OpKind::submitCoroutine: return "submitCoroutine";
    case OpKind::executeCoroutine: return "executeCoroutine";
    case OpKind::submitWithToken: return "submitWithToken";
    case OpKind::cancelRecent: return "cancelRecent";
    case OpKind::cancelSource: return "cancelSource";
    case OpKind::resize: return "resize";
    case OpKind::schedule: return "schedule";
    case OpKind::scheduleAtFixedRate: return "scheduleAtFixedRate";
    case OpKind::scheduleWithFixedDelay: return "scheduleWithFixedDelay";
    case OpKind::cancelPeriodic: return "cancelPeriodic";
    case OpKind::invokeAll: return "invokeAll";
    case OpKind::invokeAny: return "invokeAny";
    case OpKind::whenAll: return "whenAll";
    case OpKind::taskGroup: return "taskGroup";
    case OpKind::keyed: return "keyed";
    case OpKind::purge: return "purge";
    case OpKind::prestart: return "prestart";
    case OpKind::awaitTermination: return "awaitTermination";
    case OpKind::pause: return "pause";
    case OpKind::shutdown: return "shutdown";
    case OpKind::shutdownNow: return "shutdownNow";
  }
  return "?";
}

const char* toString(Ending e) {
  switch (e) {
    case Ending::shutdown: return "shutdown";
    case Ending::shutdownNow: return "shutdownNow";
    case Ending::close: return "close";
  }
  return "?";
}

const char* toString(FaultSite site) {
  switch (site) {
    case FaultSite::none: return "none";
    case FaultSite::threadFactory: return "threadFactory";
    case FaultSite::beforeExecute: return "beforeExecute";
    case FaultSite::afterExecute: return "afterExecute";
    case FaultSite::uncaughtHandler: return "uncaughtHandler";
    case FaultSite::rejectionHandler: return "rejectionHandler";
    case FaultSite::frameAllocator: return "frameAllocator";
    case FaultSite::globalNew: return "globalNew";
  }
  return "?";
}

Program generate(std::uint64_t seed, const ProgramShape& shape) {
  SeededChoices choices(seed);
  Program program = build(choices, shape);
  program.seed = seed;
  return program;
}

Program decode(const std::uint8_t* data, std::size_t size, const ProgramShape& shape) {
  ByteChoices choices(data, size);
  return build(choices, shape);
}

std::string describe(const Program& program) {
  const PoolConfig& p = program.config;
  std::string out = fmt::format(
      "program seed {}: core {} max {} keepAlive {} us{} queue {}({}) policy {}{}{}{}{}{}, lanes {}, ending {}",
      program.seed, p.core, p.max, p.keepAliveMicros, p.coreTimeout ? " (core times out)" : "", toString(p.queue),
      p.capacity, toString(p.policy), p.policy == PolicyKind::block ? fmt::format(" {} us", p.blockMicros) : "",
      p.policy == PolicyKind::newThreadRuns ? fmt::format(" {} threads", p.temporaryThreads) : "",
      p.hooks ? ", hooks" : "", p.runDelayedAfterShutdown ? "" : ", delayed tasks cancelled at shutdown",
      p.continuePeriodicAfterShutdown ? ", periodic go on after shutdown" : "", p.keyedLanes, toString(program.ending));
  if (program.faults.site != FaultSite::none) {
    out += fmt::format(", fault: call {} of {} throws {}", program.faults.nth, toString(program.faults.site),
                       program.faults.badAlloc || program.faults.site == FaultSite::frameAllocator ||
                               program.faults.site == FaultSite::globalNew
                           ? "std::bad_alloc"
                           : "FaultError");
  }
  out += '\n';
  for (std::size_t t = 0; t < program.threads.size(); ++t) {
    out += fmt::format("  thread {}:", t);
    for (const Op& op : program.threads[t]) {
      out += fmt::format(" {}({} {}us x{} a{} d{})", toString(op.kind), toString(op.body), op.micros, op.fanout, op.arg,
                         op.depth);
    }
    out += '\n';
  }
  return out;
}

}  // namespace coexec::stress
