// SPDX-License-Identifier: BSL-1.0
// The task bodies of a stress program (callables and coroutines that are
// quick, throw, spin on their token, sleep, spawn children, start a coroutine
// foreign to coexec, or carry over-aligned payloads) and the coroutines that
// drive its combinators; each records what it did for the checks
// (Checks.cpp). Every body is harness code for the globalNew fault site
// (model/GlobalNew.h): a body that a producer's call runs inline allocates
// outside the site's count.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "coexec/coexec.h"
#include "model/Run.h"

namespace coexec::stress::impl {

using namespace std::chrono_literals;

// ---- task bodies --------------------------------------------------------

void begin(Run& run, std::uint32_t id, Body body, bool coroutine) {
  Record& r = run.records()[id];
  r.body = body;
  r.coroutine = coroutine;
  if (r.starts.fetch_add(1) != 0) run.violation(fmt::format("task {} ran twice", id));
  if (r.combinatorReturned.load()) {
    run.violation(fmt::format("task {} started after its combinator ({}) returned{}", id, r.memberOf,
                              tlsProducer ? ", on a producer thread" : ""));
  }
  if (tlsProducer) r.ranOnProducer = true;
  if (tlsRunningPending) r.ranAsPendingTask = true;
}

/// Spins for `micros`, watching `token`; true if cancellation was seen.
bool spin(std::uint32_t micros, const CancellationToken& token) {
  const auto until = Clock::now() + std::chrono::microseconds(micros);
  while (Clock::now() < until) {
    if (token.isCancellationRequested()) return true;
    std::this_thread::yield();
  }
  return false;
}

/// The body of a child: derived from its id, so that it needs no storage.
/// Only a parent of depth > 0 has children that spawn children of their own
/// (children, foreign, aligned): nesting ends at depth 0.
Op childOp(const Op& parent, std::uint32_t id) {
  const std::uint64_t h = mix(id + 0x9e3779b97f4a7c15ULL * (parent.depth + 1));
  static constexpr Body kBodies[] = {Body::quick,    Body::throws,  Body::spin,   Body::sleep,
                                     Body::children, Body::foreign, Body::aligned};
  Op op;
  op.kind = OpKind::submitCoroutine;
  op.body = kBodies[h % (parent.depth > 0 ? 7 : 4)];
  op.micros = static_cast<std::uint32_t>((h >> 8) % 300);
  op.fanout = 1 + static_cast<std::uint32_t>((h >> 20) % 3);
  op.arg = static_cast<std::uint32_t>((h >> 28) % 8);
  op.depth = parent.depth > 0 ? parent.depth - 1 : 0;
  return op;
}

/// Submits `op.fanout` children whose Futures are dropped, and executes one
/// more: their errors reach the uncaught handler (unobserved failures).
/// `token`: the submitting task's.
void spawnDetached(Run& run, const Op& op, const CancellationToken& token) {
  for (std::uint32_t k = 0; k <= op.fanout; ++k) {
    const std::uint32_t cid = run.records().add(k < op.fanout ? Role::detachedSubmit : Role::detachedExecute);
    run.records()[cid].parentToken = token;
    const Op child = childOp(op, cid);
    try {
      if (k < op.fanout) {
        (void)run.pool().submit(coroBody(&run, cid, child));
      } else {
        run.pool().execute([&run, cid, child](const CancellationToken& token) { (void)callableBody(run, cid, child, token); });
      }
    } catch (...) {
      run.classify(std::current_exception(), "a task submitting a detached child");
    }
  }
}

/// Marks the members of a combinator as returned-from, and checks that each
/// has settled (or never started).
void combinatorReturned(Run& run, const std::vector<std::uint32_t>& ids, const char* what) {
  for (std::uint32_t cid : ids) {
    Record& m = run.records()[cid];
    m.combinatorReturned = true;
    if (m.starts.load() != 0 && m.end.load() == End::none) {
      run.violation(fmt::format("{} returned while its task {} was still running (a {} {})", what, cid,
                                m.coroutine.load() ? "coroutine" : "callable", toString(m.body.load())));
    }
  }
}

// ---- foreign coroutines and over-aligned payloads --------------------------

/// A coroutine type of the user's own, foreign to coexec: it starts at once,
/// never suspends at its end (its frame frees itself), and hands what escapes
/// it to the run (Run::foreignEnded). coexec knows nothing of its promise.
struct Foreign {
  struct promise_type {
    template <class... Rest>
    explicit promise_type(Run* run, std::uint32_t id, Rest&... /*rest*/) noexcept : run(run), id(id) {}
    Foreign get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { run->foreignEnded(id, std::current_exception(), nullptr); }
    Run* run;
    std::uint32_t id;
  };
};

/// Foreign coroutine `id`: sleeps a little (unless `op.micros` is a multiple
/// of 3), then awaits `future` (if valid) directly or through whenAll.
Foreign foreignCoroutine(Run* run, std::uint32_t id, Op op, Future<int> future) {
  HarnessCode harness;
  run->foreignStarted(id);
  Record& r = run->records()[id];
  if (op.micros % 3 != 0) {
    r.sleeping = true;
    auto nap = sleepFor(std::chrono::microseconds(op.micros % 300));
    co_await nap;
    r.sleeping = false;
  }
  int value = 0;
  if (future.valid()) {
    if ((op.arg & 2U) != 0) {
      auto all = whenAll(future);
      auto [v] = co_await all;
      value = v;
    } else {
      value = co_await future;
    }
  }
  run->foreignEnded(id, nullptr, future.valid() ? &value : nullptr);
}

/// Submits a child and starts a foreign coroutine that awaits its Future; the
/// coroutine outlives the calling body. `token`: the calling task's.
void startForeign(Run& run, const Op& op, const CancellationToken& token) {
  const std::uint32_t fid = run.records().add(Role::foreign);
  const std::uint32_t cid = run.records().add(Role::foreignAwaited);
  Record& f = run.records()[fid];
  f.awaits = cid;
  f.parentToken = token;
  run.records()[cid].parentToken = token;
  Future<int> future;
  try {
    future = run.pool().submit(coroBody(&run, cid, childOp(op, cid)));
  } catch (...) {
    run.classify(std::current_exception(), "a task submitting a foreign coroutine's task");
  }
  try {
    foreignCoroutine(&run, fid, childOp(op, fid), std::move(future));
  } catch (...) {  // no memory for its frame: it never started
    run.classify(std::current_exception(), "the start of a foreign coroutine");
  }
}

/// Executes an over-aligned callable (its Wide64 result dropped).
/// `token`: the calling task's.
void spawnAligned(Run& run, const Op& op, const CancellationToken& token) {
  const std::uint32_t cid = run.records().add(Role::detachedExecute);
  run.records()[cid].parentToken = token;
  const Op child = childOp(op, cid);
  try {
    run.pool().execute([&run, cid, child, pad = padOf(cid)](const CancellationToken& token) {
      (void)alignedCallableBody(run, cid, child, token, pad);
    });
  } catch (...) {
    run.classify(std::current_exception(), "a task executing an over-aligned child");
  }
}

Wide64 alignedCallableBody(Run& run, std::uint32_t id, const Op& op, const CancellationToken& token, const Pad32& pad) {
  HarnessCode harness;
  begin(run, id, Body::aligned, false);
  Record& r = run.records()[id];
  checkPad(run, id, pad, "in its running body");
  if ((op.arg & 3U) == 1U) {
    r.end = End::threw;
    throw StressError(id);
  }
  if (spin(op.micros % 300, token) && (op.arg & 1U) != 0) {
    r.end = End::cancelled;
    throw OperationCancelled();
  }
  r.end = End::returned;
  return wideOf(id);
}

Task<Wide64> alignedCoroBody(Run* run, std::uint32_t id, Op op) {
  HarnessCode harness;
  begin(*run, id, Body::aligned, true);
  Record& r = run->records()[id];
  const Pad32 pad = padOf(id);  // held across the sleep: in the frame
  checkPad(*run, id, pad, "in its coroutine frame");
  if ((op.arg & 3U) == 1U) {
    r.end = End::threw;
    throw StressError(id);
  }
  if (op.micros % 300 != 0) {
    bool cancelled = false;
    try {
      co_await sleepFor(std::chrono::microseconds(op.micros % 300));
    } catch (const OperationCancelled&) {
      cancelled = true;
    }
    if (cancelled) {
      r.end = End::cancelled;
      throw OperationCancelled();
    }
    checkPad(*run, id, pad, "in its coroutine frame after a sleep");
  }
  r.end = End::returned;
  co_return wideOf(id);
}

int callableBody(Run& run, std::uint32_t id, const Op& op, const CancellationToken& token) {
  HarnessCode harness;
  begin(run, id, op.body, false);
  Record& r = run.records()[id];
  switch (op.body) {
    case Body::quick:
    case Body::children: break;
    case Body::throws: r.end = End::threw; throw StressError(id);
    case Body::spin:
    case Body::sleep:
      if (spin(op.micros, token) && (op.arg & 1U) != 0) {
        r.end = End::cancelled;
        throw OperationCancelled();
      }
      break;
    case Body::detached: spawnDetached(run, op, token); break;
    case Body::foreign: startForeign(run, op, token); break;
    case Body::aligned: spawnAligned(run, op, token); break;
  }
  r.end = End::returned;
  return valueOf(id);
}

Task<int> coroBody(Run* run, std::uint32_t id, Op op) {
  HarnessCode harness;
  begin(*run, id, op.body, true);
  Record& r = run->records()[id];
  switch (op.body) {
    case Body::quick: break;
    case Body::throws: r.end = End::threw; throw StressError(id);
    case Body::spin: {
      const CancellationToken token = co_await currentToken();
      if (spin(op.micros, token) && (op.arg & 1U) != 0) {
        r.end = End::cancelled;
        throw OperationCancelled();
      }
      break;
    }
    case Body::sleep: {
      bool cancelled = false;
      try {
        co_await sleepFor(std::chrono::microseconds(op.micros));
      } catch (const OperationCancelled&) {
        cancelled = true;
      }
      if (cancelled) {
        r.end = End::cancelled;
        throw OperationCancelled();
      }
      break;
    }
    case Body::children: {
      std::vector<std::pair<std::uint32_t, Future<int>>> kids;
      for (std::uint32_t k = 0; k < op.fanout; ++k) {
        const std::uint32_t cid = run->records().add(Role::child);
        try {
          kids.emplace_back(cid, run->pool().submit(coroBody(run, cid, childOp(op, cid))));
        } catch (...) {
          run->classify(std::current_exception(), "a task submitting a child");
        }
      }
      for (auto& [cid, kid] : kids) {
        std::exception_ptr error;
        bool cancelled = false;
        try {
          const int v = co_await kid;
          if (v != valueOf(cid)) run->violation(fmt::format("child {} returned {}, not its value", cid, v));
          if (run->records()[cid].end.load() != End::returned) {
            run->violation(fmt::format("child {}'s Future has a value, but its body did not return", cid));
          }
        } catch (const OperationCancelled&) {
          cancelled = true;
        } catch (...) {
          error = std::current_exception();
        }
        if (error) run->classify(error, "a parent awaiting its child");
        if (cancelled) {
          // The child's Future reports its cancellation instead of what its
          // body did: a task cancelled while it runs settles with
          // OperationCancelled when it ends, whatever it threw or returned
          // (Future::cancel(); docs/cancellation.md, "What cancels a task"),
          // as a tracked Future may (checkFuture).
          Record& c = run->records()[cid];
          c.cancelReported = true;
          // Unless its body threw OperationCancelled itself (its token seen
          // cancelled), something cancelled the child. It has no token of
          // its own: only this task's cancellation reaches it ("down, never
          // up"), and that cancels this task's token too (or a token created
          // afterwards is born cancelled); or shutdownNow(), which cancels
          // the children of the tasks running on the pool's threads.
          if (c.end.load() != End::cancelled) {
            bool parentCancelled = run->anyShutdownNow();
            try {
              const CancellationToken token = co_await currentToken();  // may create it (std::bad_alloc)
              parentCancelled = parentCancelled || token.isCancellationRequested();
            } catch (...) {
              run->classify(std::current_exception(), "a parent awaiting its child");
              parentCancelled = true;  // not known
            }
            if (!parentCancelled) {
              run->violation(fmt::format(
                  "child {}'s Future reports a cancellation, but its parent {} was not cancelled", cid, id));
            }
          }
        }
      }
      break;
    }
    case Body::detached: {
      CancellationToken token;
      try {
        token = co_await currentToken();  // may create it (std::bad_alloc)
      } catch (...) {
        run->classify(std::current_exception(), "a task submitting a detached child");
      }
      spawnDetached(*run, op, token);
      break;
    }
    case Body::foreign: {
      CancellationToken token;
      try {
        token = co_await currentToken();  // may create it (std::bad_alloc)
      } catch (...) {
        run->classify(std::current_exception(), "a task starting a foreign coroutine");
      }
      startForeign(*run, op, token);
      break;
    }
    case Body::aligned: {
      // Two children whose results are alignas(64), a callable whose
      // capture is alignas(32) and a coroutine, awaited through whenAll or
      // one by one: members of this fan-out, which may absorb a failure.
      const std::uint32_t a = run->records().add(Role::member);
      const std::uint32_t b = run->records().add(Role::member);
      run->records()[a].memberOf = run->records()[b].memberOf = "an over-aligned fan-out";
      Future<Wide64> fa, fb;
      try {
        fa = run->pool().submit([run, a, first = childOp(op, a), pad = padOf(a)](const CancellationToken& token) {
          return alignedCallableBody(*run, a, first, token, pad);
        });
        fb = run->pool().submit(alignedCoroBody(run, b, childOp(op, b)));
      } catch (...) {
        run->classify(std::current_exception(), "a task submitting an over-aligned child");
      }
      if (fa.valid() && fb.valid() && (op.arg & 2U) != 0) {
        std::exception_ptr error;
        try {
          auto both = whenAll(fa, fb);
          auto [x, y] = co_await both;
          checkWide(*run, a, x, "whenAll's result");
          checkWide(*run, b, y, "whenAll's result");
        } catch (...) {
          error = std::current_exception();
        }
        if (error) run->classify(error, "whenAll of over-aligned results");
      } else {
        std::array<std::pair<std::uint32_t, Future<Wide64>*>, 2> kids{{{a, &fa}, {b, &fb}}};
        for (auto& [cid, kid] : kids) {
          if (!kid->valid()) continue;
          std::exception_ptr error;
          try {
            const Wide64 result = co_await *kid;
            checkWide(*run, cid, result, "the co_await of its Future");
          } catch (...) {
            error = std::current_exception();
          }
          if (error) run->classify(error, "a parent awaiting an over-aligned child");
        }
      }
      combinatorReturned(*run, {a, b}, "an over-aligned fan-out");
      break;
    }
  }
  r.end = End::returned;
  co_return valueOf(id);
}

/// Executed coroutine task `id` of Body::aligned: awaits an over-aligned
/// child as a Task (its failure rethrown as this task's, so its record is a
/// producer's task), checks its result where it reads it; counts a
/// std::bad_alloc if `outside` (see startFireAndForget()), setting `*counted`.
Task<void> alignedReader(Run* run, std::uint32_t id, Op op, bool outside, bool* counted) {
  HarnessCode harness;
  begin(*run, id, Body::aligned, true);
  Record& r = run->records()[id];
  const std::uint32_t cid = run->records().add(Role::top);
  std::exception_ptr error;
  try {
    const Wide64 result = co_await alignedCoroBody(run, cid, childOp(op, cid));
    checkWide(*run, cid, result, "the co_await of its Task");
  } catch (const std::bad_alloc&) {
    error = std::current_exception();
    if (outside) {
      run->badAllocSeen("a fire-and-forget coroutine run by PendingTask::run() (printed to stderr)");
      *counted = true;
    }
  } catch (...) {
    error = std::current_exception();
  }
  r.end = End::returned;  // last: the run may end once every started record has (see foreignEnded())
  if (error) std::rethrow_exception(error);
}

Task<void> fireAndForgetBody(Run* run, std::uint32_t id, Op op, bool outside) {
  HarnessCode harness;
  bool counted = false;
  try {
    if (op.body == Body::aligned) {
      co_await alignedReader(run, id, op, outside, &counted);
    } else {
      (void)co_await coroBody(run, id, op);
    }
  } catch (const std::bad_alloc&) {
    // Run by PendingTask::run(), the coroutine's failure is printed to
    // stderr (as documented), where the checks cannot count it: counted
    // here. A pool's uncaught handler counts the others.
    if (outside && !counted)
      run->badAllocSeen("a fire-and-forget coroutine run by PendingTask::run() (printed to stderr)");
    throw;
  }
}

Task<void> startFireAndForget(Run& run, std::uint32_t id, const Op& op) {
  const bool outside = tlsRunningPending;
  try {
    return fireAndForgetBody(&run, id, op, outside);
  } catch (const std::bad_alloc&) {  // no memory for its frame: the start fails, reported as above
    if (outside) run.badAllocSeen("the start of a fire-and-forget coroutine run by PendingTask::run() (printed to stderr)");
    throw;
  }
}

Task<int> invokeDriver(Run* run, std::uint32_t id, Op op, bool any) {
  HarnessCode harness;
  begin(*run, id, Body::children, true);
  std::vector<std::function<Task<int>()>> tasks;
  std::vector<std::uint32_t> ids;
  for (std::uint32_t k = 0; k < op.fanout; ++k) {
    const std::uint32_t cid = run->records().add(Role::member);
    run->records()[cid].memberOf = any ? "invokeAny" : "invokeAll";
    ids.push_back(cid);
    const Op member = childOp(op, cid);
    tasks.emplace_back([run, cid, member] { return coroBody(run, cid, member); });
  }
  const bool timed = op.arg % 3 == 0;
  const auto timeout = std::chrono::microseconds(200 + op.micros);
  std::exception_ptr error;
  try {
    if (!any) {
      std::vector<int> values;
      if (timed) {
        auto all = run->pool().invokeAll(tasks, timeout);
        values = co_await all;
      } else {
        auto all = run->pool().invokeAll(tasks);
        values = co_await all;
      }
      if (values.size() != ids.size()) run->violation("invokeAll returned a vector of the wrong size");
      for (std::size_t i = 0; i < values.size() && i < ids.size(); ++i) {
        if (values[i] != valueOf(ids[i])) run->violation(fmt::format("invokeAll result {} is not task {}'s", i, ids[i]));
        if (run->records()[ids[i]].end.load() != End::returned) {
          run->violation(fmt::format("invokeAll returned a value for task {}, whose body did not return", ids[i]));
        }
      }
    } else {
      int value = 0;
      if (timed) {
        auto first = run->pool().invokeAny(tasks, timeout);
        value = co_await first;
      } else {
        auto first = run->pool().invokeAny(tasks);
        value = co_await first;
      }
      const auto winner = std::find_if(ids.begin(), ids.end(), [&](std::uint32_t cid) { return valueOf(cid) == value; });
      if (winner == ids.end() || run->records()[*winner].end.load() != End::returned) {
        run->violation(fmt::format("invokeAny returned {}, which no task of it returned", value));
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  combinatorReturned(*run, ids, any ? "invokeAny" : "invokeAll");
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const AllFailed& failed) {
      if (!any) run->violation("invokeAll threw AllFailed");
      if (failed.errors().size() != ids.size()) run->violation("AllFailed does not hold one error per task");
      for (const auto& e : failed.errors()) run->classify(e, "AllFailed");
    } catch (const TimeoutError&) {
      if (!timed) run->violation("a combinator without a timeout threw TimeoutError");
    } catch (...) {
      run->classify(std::current_exception(), any ? "invokeAny" : "invokeAll");
    }
  }
  run->records()[id].end = End::returned;
  co_return valueOf(id);
}

Task<int> whenAllDriver(Run* run, std::uint32_t id, Op op) {
  HarnessCode harness;
  begin(*run, id, Body::children, true);
  const std::uint32_t a = run->records().add(Role::member);
  const std::uint32_t b = run->records().add(Role::member);
  run->records()[a].memberOf = run->records()[b].memberOf = "whenAll";
  std::exception_ptr error;
  bool awaited = false;  // a refused second submission leaves the first to run on its own
  try {
    auto first = run->pool().submit(coroBody(run, a, childOp(op, a)));
    const Op second = childOp(op, b);
    auto other = run->pool().submit([run, b, second](const CancellationToken& token) { return callableBody(*run, b, second, token); });
    awaited = true;
    auto [x, y] = co_await whenAll(first, other);
    if (x != valueOf(a) || y != valueOf(b)) run->violation("whenAll returned values that are not its tasks'");
  } catch (...) {
    error = std::current_exception();
  }
  if (awaited) combinatorReturned(*run, {a, b}, "whenAll");
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      if (awaited && run->records()[a].combinatorReturned && run->records()[b].starts.load() + run->records()[a].starts.load() > 0 &&
          ((run->records()[a].starts.load() != 0 && run->records()[a].end.load() == End::none) ||
           (run->records()[b].starts.load() != 0 && run->records()[b].end.load() == End::none))) {
        run->violation(fmt::format("whenAll threw '{}' with a task still running", e.what()));
      }
    } catch (...) {
    }
    run->classify(error, "whenAll");
  }
  run->records()[id].end = End::returned;
  co_return valueOf(id);
}

Task<int> groupDriver(Run* run, std::uint32_t id, Op op) {
  HarnessCode harness;
  begin(*run, id, Body::children, true);
  std::vector<std::uint32_t> ids;
  std::vector<Future<int>> kids;
  std::exception_ptr error;
  {
    TaskGroup group(run->pool());
    for (std::uint32_t k = 0; k < op.fanout; ++k) {
      const std::uint32_t cid = run->records().add(Role::member);
      run->records()[cid].memberOf = "TaskGroup";
      try {
        kids.push_back(group.spawn(coroBody(run, cid, childOp(op, cid))));
        ids.push_back(cid);
      } catch (...) {
        run->classify(std::current_exception(), "TaskGroup::spawn");
      }
    }
    if ((op.arg & 3U) == 3U) group.cancel();
    try {
      co_await group.join();
    } catch (...) {
      error = std::current_exception();
    }
    if (group.running() != 0) run->violation("TaskGroup::join returned with children running");
  }
  combinatorReturned(*run, ids, "TaskGroup::join");
  for (auto& kid : kids) {
    if (!kid.isDone()) run->violation("a TaskGroup child's Future was not settled after join");
  }
  if (error) run->classify(error, "TaskGroup::join");
  run->records()[id].end = End::returned;
  co_return valueOf(id);
}

}  // namespace coexec::stress::impl
