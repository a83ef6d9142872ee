// SPDX-License-Identifier: BSL-1.0
// Part of the Asio bridge, compiled once per flavour (see
// AsioPoolExecutor.ipp, which is included before it): coexec coroutines on
// an Asio executor (an io_context's): spawn(executor, task),
// resumeOn(executor), and sleeps on the executor's timers.

#ifndef COEXEC_DETAIL_BRIDGE_NS
#error "include <coexec/asio.h> (standalone Asio) or <coexec/boost_asio.h> (Boost.Asio), not this file"
#endif

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <type_traits>
#include <utility>

#include "coexec/Future.h"
#include "coexec/PendingTask.h"
#include "coexec/ResumeOn.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/Scheduler.h"

namespace COEXEC_DETAIL_BRIDGE_NS {

namespace detail {
template <class Executor>
class AsioResumeOnAwaiter;
}

/// True for an Asio standard executor (asio::execution::executor): what
/// spawn() and resumeOn() take, such as `ioContext.get_executor()`, a strand
/// or an `asio::any_io_executor`.
template <class E>
concept AsioExecutor = asio::execution::is_executor<E>::value;

/// Runs `task` on the Asio executor `executor` (an io_context's, say) and
/// returns its Future: the coroutine starts in a function posted to
/// `executor`, and after each coexec `co_await` that suspends (a Future, a
/// sleep, a Task's return) it resumes there too, posted to `executor` unless
/// it completes on a thread already running the coroutine's executor;
/// `co_await resumeOn(pool)` hops it to a pool and `co_await
/// resumeOn(executor)` back. Its sleeps (sleepFor, sleepUntil) wait on
/// `asio::steady_timer`s of `executor`, not on a coexec timer thread.
///
/// The Future settles with the Task's value or exception. Its cancel()
/// cancels the Task's token: before the start the Task never runs (the
/// Future settles with OperationCancelled at once); while it runs, a sleep
/// wakes at once with OperationCancelled, an awaited Future's task is
/// cancelled, work it submitted to pools is cancelled, and the Future
/// settles with OperationCancelled when the coroutine ends. The task is not
/// linked to the task that calls spawn() (it is a root, like syncWait's).
///
/// Never blocks. Outstanding work is held on `executor` from the call until
/// the coroutine ends, wherever it runs meanwhile, so `io_context::run()`
/// does not return while a spawned task is unfinished.
/// \throws std::invalid_argument if `task` is empty; std::logic_error if it
/// was already started; std::bad_alloc.
///
/// Thread safety: may be called from any thread, concurrently (as
/// asio::post); the Future is a Future (one consumer).
/// \note The executor's context must run until the coroutine has finished:
/// a coroutine left suspended in a destroyed io_context is never resumed
/// and its frame is never freed. An executor whose context is not an
/// io_context (a thread_pool's, say) works, but sleeps need an io_context's
/// timer service.
template <AsioExecutor Executor, class T>
[[nodiscard]] Future<T> spawn(const Executor& executor, Task<T> task);

/// spawn() onto a pool's Asio executor: `pool.submit(std::move(task))`, the
/// pool's own coroutine support (admission, its timers, its scheduler).
/// \throws as ThreadPoolExecutor::submit().
template <class T>
[[nodiscard]] Future<T> spawn(const AsioPoolExecutor& executor, Task<T> task) {
  return executor.pool().submit(std::move(task));
}

/// `co_await resumeOn(executor)` continues the awaiting coroutine on the Asio
/// executor `executor` (posted there: a hop, also from a thread of that
/// executor), where later coexec awaits resume it and its sleeps use the
/// executor's timers, as for spawn(). Outstanding work is held on `executor`
/// from the hop on while the coroutine runs or waits there.
/// Never blocks; never rejected (an io_context has no admission).
/// \throws std::bad_alloc (from the `co_await`: the coroutine then goes on
/// where it was).
///
/// Thread safety: the awaiter belongs to the awaiting coroutine; `executor`
/// is copied into it.
/// \note The executor's context must run until the coroutine leaves it or
/// finishes.
/// \note After the hop, read the thread's id with coexec::thisThreadId(), not
/// std::this_thread::get_id(): clang at -O1 and above may reuse a get_id()
/// read before the `co_await` and return the old thread's id (ThisThread.h).
template <AsioExecutor Executor>
[[nodiscard]] detail::AsioResumeOnAwaiter<Executor> resumeOn(const Executor& executor) {
  return detail::AsioResumeOnAwaiter<Executor>(executor);
}

/// `co_await resumeOn(asioExecutor(pool))` is `co_await resumeOn(pool)`.
[[nodiscard]] inline detail::ResumeOnAwaiter resumeOn(const AsioPoolExecutor& executor) noexcept {
  return ::coexec::resumeOn(executor.pool());
}

namespace detail {

/// Where coexec coroutines resume when they run on an Asio executor: a
/// reference-counted Scheduler that posts to the executor (holding
/// outstanding work on it while alive), and whose sleep timers are
/// asio::steady_timers of that executor. One is made per spawn() and per
/// resumeOn() hop; the awaiters that suspend the coroutine retain it, so it
/// lives, and holds work, while a coroutine is on or waiting to come back to
/// the executor.
///
/// Thread safety: post(), retain(), release(), hold(), fireNow() from any
/// thread; arm() on a thread running one of its coroutines.
template <class Executor>
class AsioScheduler final : public Scheduler, public SleepTimers {
  using WorkExecutor =
      std::decay_t<typename asio::prefer_result<Executor, asio::execution::outstanding_work_t::tracked_t>::type>;

 public:
  /// A scheduler with one reference, the caller's. \throws std::bad_alloc.
  static Ref<AsioScheduler> make(const Executor& executor) {
    return Ref<AsioScheduler>::adopt(new AsioScheduler(executor));
  }

  /// Resumes `handle` on the executor (posted: blocking.never). Never throws:
  /// a continuation that cannot be posted (out of memory) ends the program,
  /// as it would be lost otherwise.
  void post(std::coroutine_handle<> handle) noexcept override {
    try {
      postOrThrow(handle);
    } catch (...) {
      std::fputs("coexec: fatal: a coroutine's continuation could not be posted to its Asio executor\n", stderr);
      std::terminate();
    }
  }
  /// post(), throwing instead. \throws std::bad_alloc.
  void postOrThrow(std::coroutine_handle<> handle) {
    asio::execution::execute(
        asio::prefer(executor_, asio::execution::blocking.never, asio::execution::relationship.continuation),
        Resume(Ref<AsioScheduler>::adopt((addRef(), this)), handle));
  }
  bool retain(const TaskCore* /*awaitingTask*/) noexcept override {
    addRef();
    return true;
  }
  void release() noexcept override {
    // acq_rel: the last owner sees every other owner's use before deleting.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  /// For Ref<>.
  void addRef() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }

  SleepTimers* sleepTimers() noexcept override { return this; }

  void* arm(std::chrono::steady_clock::time_point deadline, Callback callback, void* arg) override {
    auto* timer = new SleepTimer(executor_, deadline, callback, arg, this);
    // The wait's handler holds one hold (and the scheduler, through the
    // timer's executor); the caller has the other.
    timer->steady.async_wait([timer](const auto& /*error: the flavour's error_code*/) {
      timer->scheduler->runHere([timer] { timer->callback(timer->arg); });
      timer->scheduler->release(timer);
    });
    return timer;
  }
  void fireNow(void* handle) noexcept override {
    auto* timer = static_cast<SleepTimer*>(handle);
    hold(timer);
    // The timer is the executor's to touch: cancel it there (its wait then
    // completes at once, with operation_aborted).
    try {
      asio::execution::execute(asio::prefer(executor_, asio::execution::blocking.never), [this, timer] {
        timer->steady.cancel();
        release(timer);
      });
    } catch (...) {
      std::fputs("coexec: fatal: a sleep's cancellation could not be posted to its Asio executor\n", stderr);
      std::terminate();
    }
  }
  void hold(void* handle) noexcept override {
    static_cast<SleepTimer*>(handle)->holds.fetch_add(1, std::memory_order_relaxed);
  }
  void release(void* handle) noexcept override {
    auto* timer = static_cast<SleepTimer*>(handle);
    if (timer->holds.fetch_sub(1, std::memory_order_acq_rel) == 1) delete timer;
  }

  /// Runs `f` on this thread with this scheduler current (and then the
  /// previous one again): how the executor's functions resume coroutines.
  template <class F>
  void runHere(F&& f) noexcept {
    Scheduler* const previous = exchangeCurrentScheduler(this);
    std::forward<F>(f)();
    exchangeCurrentScheduler(previous);
  }

 private:
  explicit AsioScheduler(const Executor& executor)
      : executor_(asio::prefer(executor, asio::execution::outstanding_work.tracked)) {}
  ~AsioScheduler() = default;

  /// The function posted to resume a coroutine; holds the scheduler.
  class Resume {
   public:
    Resume(Ref<AsioScheduler> scheduler, std::coroutine_handle<> handle) noexcept
        : scheduler_(std::move(scheduler)), handle_(handle) {}
    void operator()() {
      AsioScheduler& scheduler = *scheduler_;
      scheduler.runHere([this] { resume(handle_); });
    }

   private:
    // (Dropped unrun, by a destroyed io_context: the coroutine stays
    // suspended; its frame is not ours to destroy.)
    Ref<AsioScheduler> scheduler_;
    std::coroutine_handle<> handle_;
  };

  /// A sleep's timer: freed when its wait's handler and its armer have both
  /// let go (holds).
  struct SleepTimer {
    SleepTimer(const WorkExecutor& executor, std::chrono::steady_clock::time_point deadline, Callback fn, void* a,
               AsioScheduler* owner)
        : steady(executor, deadline),
          callback(fn),
          arg(a),
          scheduler(Ref<AsioScheduler>::adopt((owner->addRef(), owner))) {}
    asio::steady_timer steady;
    Callback callback;
    void* arg;
    Ref<AsioScheduler> scheduler;
    std::atomic<int> holds{2};  // the wait's handler, the armer
  };

  WorkExecutor executor_;
  std::atomic<std::uint32_t> refs_{1};
};

template <class Executor>
class AsioResumeOnAwaiter {
 public:
  explicit AsioResumeOnAwaiter(const Executor& executor) : executor_(executor) {}
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  void await_suspend(std::coroutine_handle<Promise> awaiting) {
    task_ = taskOf(taskContextOf(awaiting));
    // May throw (not suspended: the exception comes out of the co_await).
    suspendingSegment(task_, [&] { AsioScheduler<Executor>::make(executor_)->postOrThrow(awaiting); });
  }
  /// Makes the coroutine's task the thread's current task again, in a new
  /// run segment.
  void await_resume() const noexcept {
    setCurrentTask(task_);
    segmentGoesOn(task_);
  }

 private:
  Executor executor_;
  TaskCore* task_ = nullptr;
};

/// Holds outstanding work on a spawned task's executor until the task's
/// coroutine finishes, wherever it runs meanwhile; told by the task.
template <class Executor>
class AsioSpawnObserver final : public CoroutineObserver {
  using WorkExecutor =
      std::decay_t<typename asio::prefer_result<Executor, asio::execution::outstanding_work_t::tracked_t>::type>;

 public:
  explicit AsioSpawnObserver(const Executor& executor)
      : work_(asio::prefer(executor, asio::execution::outstanding_work.tracked)) {}
  void coroutineEnded(TaskCore& task, std::exception_ptr error) noexcept override {
    (void)task.settleCoroutine(std::move(error));  // the failure is the Future's
    drop(task);
  }
  /// Drops the task's reference, handed over with the call, and this.
  void drop(TaskCore& task) noexcept {
    task.release();
    delete this;
  }
  void coroutineTokenCreated(TaskCore& /*task*/) override {}

 private:
  ~AsioSpawnObserver() = default;
  WorkExecutor work_;
};

/// The function posted by spawn(): starts the task with the scheduler
/// current. Dropped unrun (a destroyed io_context), the task settles with
/// BrokenPromise.
template <class Executor>
class AsioSpawnStart {
 public:
  AsioSpawnStart(Ref<AsioScheduler<Executor>> scheduler, PendingTask task, Ref<TaskCore> core, const Executor& executor)
      : scheduler_(std::move(scheduler)), task_(std::move(task)), core_(std::move(core)), executor_(executor) {}
  void operator()() {
    // Made first: if it cannot be, this throws out of the executor's run
    // and the dropped task settles with BrokenPromise.
    auto* observer = new AsioSpawnObserver<Executor>(executor_);
    if (!core_->tryStart()) {                                     // cancelled before it started: settled already
      observer->drop(*core_.detach());  // drops our reference and deletes it
      return;
    }
    // Hands our reference over; returns at the first suspension. The
    // task's exception goes to its Future.
    scheduler_->runHere([this, observer]() noexcept { core_.detach()->startCoroutine(observer); });
  }

 private:
  Ref<AsioScheduler<Executor>> scheduler_;
  PendingTask task_;  // settles the task with BrokenPromise if this is dropped unrun
  Ref<TaskCore> core_;
  Executor executor_;
};

}  // namespace detail

template <AsioExecutor Executor, class T>
Future<T> spawn(const Executor& executor, Task<T> task) {
  (void)detail::startableHandle(task, "", "spawn");
  PendingTask pending = detail::CombinatorAccess::makeTask(std::move(task), "spawn");
  Future<T> future = detail::CombinatorAccess::future(detail::CombinatorAccess::resultCore<T>(pending));
  detail::Ref<detail::TaskCore> core = detail::CombinatorAccess::resultCore<T>(pending);
  auto scheduler = detail::AsioScheduler<Executor>::make(executor);
  const auto tracked = asio::prefer(executor, asio::execution::outstanding_work.tracked);
  asio::execution::execute(
      asio::prefer(tracked, asio::execution::blocking.never),
      detail::AsioSpawnStart<Executor>(std::move(scheduler), std::move(pending), std::move(core), executor));
  return future;
}

}  // namespace COEXEC_DETAIL_BRIDGE_NS
