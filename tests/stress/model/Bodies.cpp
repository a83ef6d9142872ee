// The task bodies of a stress program (callables and coroutines that are
// quick, throw, spin on their token, sleep or spawn children) and the
// coroutines that drive its combinators; each records what it did for the
// checks (Checks.cpp).

#include <algorithm>
#include <atomic>
#include <chrono>
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

const char* toString(Role role) {
  switch (role) {
    case Role::top: return "a producer's task";
    case Role::child: return "an awaited child";
    case Role::detachedSubmit: return "a submitted child whose Future was dropped";
    case Role::detachedExecute: return "an executed child";
    case Role::member: return "a combinator's task";
    case Role::driver: return "a combinator's driver";
    case Role::periodic: return "a periodic schedule";
    case Role::keyed: return "a keyed task";
  }
  return "?";
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
Op childOp(const Op& parent, std::uint32_t id) {
  const std::uint64_t h = mix(id + 0x9e3779b97f4a7c15ULL * (parent.depth + 1));
  static constexpr Body kBodies[] = {Body::quick, Body::throws, Body::spin, Body::sleep, Body::children};
  Op op;
  op.kind = OpKind::submitCoroutine;
  op.body = kBodies[h % (parent.depth > 0 ? 5 : 4)];
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

int callableBody(Run& run, std::uint32_t id, const Op& op, const CancellationToken& token) {
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
  }
  r.end = End::returned;
  return valueOf(id);
}

Task<int> coroBody(Run* run, std::uint32_t id, Op op) {
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
  }
  r.end = End::returned;
  co_return valueOf(id);
}

Task<void> fireAndForgetBody(Run* run, std::uint32_t id, Op op, bool outside) {
  try {
    (void)co_await coroBody(run, id, op);
  } catch (const std::bad_alloc&) {
    // Run by PendingTask::run(), the coroutine's failure is printed to
    // stderr (as documented), where the checks cannot count it: counted
    // here. A pool's uncaught handler counts the others.
    if (outside) run->badAllocSeen("a fire-and-forget coroutine run by PendingTask::run() (printed to stderr)");
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

Task<int> invokeDriver(Run* run, std::uint32_t id, Op op, bool any) {
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
