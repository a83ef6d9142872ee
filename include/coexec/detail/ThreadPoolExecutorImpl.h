// SPDX-License-Identifier: BSL-1.0
#pragma once

// The bodies of ThreadPoolExecutor's member templates (declared, with their
// contracts, in ThreadPoolExecutor.h, which includes this file at its end and
// is the only file that does): the task a callable or a Task becomes, and the
// periodic body. Each is `inline`, as if defined in the class: GCC weighs the
// keyword when it decides what to inline.

#include <type_traits>
#include <utility>

#include "coexec/detail/OwningCallableFuture.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/StandardLibrary.h"

namespace coexec {

namespace detail {

/// The body of a periodic schedule: the user's callable, run once per period.
/// Its schedule holds the only reference.
class PeriodicBody : public RefCounted {
 public:
  virtual void run(const CancellationToken& token) = 0;
};

template <class F>
class PeriodicBodyOf final : public PeriodicBody {
 public:
  explicit PeriodicBodyOf(F&& fn) : fn_(std::move(fn)) {}
  void run(const CancellationToken& token) override {
    if constexpr (kTakesToken<F>) {
      (void)fn_(tokenArgument<F>(token));
    } else {
      (void)fn_();
    }
  }

 private:
  F fn_;
};

}  // namespace detail

inline PendingTask ThreadPoolExecutor::adoptTask(detail::TaskCore* core) noexcept {
  return detail::PendingTaskAccess::make(detail::Ref<detail::TaskCore>::adopt(core));
}

constexpr std::string_view ThreadPoolExecutor::scopeOf(std::string_view operation) noexcept {
  return operation.find(':') == std::string_view::npos ? std::string_view("ThreadPoolExecutor::")
                                                       : std::string_view();
}

inline void ThreadPoolExecutor::nameTask(PendingTask& task, std::string_view name) {
  if (!name.empty()) detail::PendingTaskAccess::core(task)->setNameId(detail::internTaskName(name));
}

template <class R>
inline detail::Ref<detail::ResultCore<R>> ThreadPoolExecutor::resultCoreOf(const PendingTask& task) noexcept {
  return detail::PendingTaskAccess::core(task).template copyAs<detail::ResultCore<R>>();
}

template <class R>
inline Future<R> ThreadPoolExecutor::unpublishedFutureOf(PendingTask& task) noexcept {
  return Future<R>(detail::PendingTaskAccess::core(task).template copyUnpublishedAs<detail::ResultCore<R>>());
}

template <class R>
inline detail::ResultCore<R>* ThreadPoolExecutor::coreOf(const Future<R>& future) noexcept {
  return future.core_.get();
}

template <class R>
inline Future<R> ThreadPoolExecutor::futureOf(detail::Ref<detail::ResultCore<R>> core) noexcept {
  return Future<R>(std::move(core));
}

template <class F>
inline void ThreadPoolExecutor::execute(F&& f, int priority) {
  admit(makeTask<false>(std::forward<F>(f), priority, "execute"));
}

template <class F>
inline void ThreadPoolExecutor::execute(F&& f, const CancellationToken& token, int priority) {
  admit(makeTask<false>(std::forward<F>(f), priority, "execute"), &token);
}

template <class F>
inline void ThreadPoolExecutor::execute(F&& f, const TaskOptions& options) {
  PendingTask task = makeTask<false>(std::forward<F>(f), options.priority, "execute");
  nameTask(task, options.name);
  admit(std::move(task));
}

template <class F>
inline auto ThreadPoolExecutor::submit(F&& f, int priority) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  PendingTask task = makeTask<true>(std::forward<F>(f), priority, "submit");
  detail::SubmittedFuture<F, Future<R>> future{unpublishedFutureOf<R>(task)};
  admit(std::move(task));
  return future;
}

template <class F>
inline auto ThreadPoolExecutor::submit(F&& f, const CancellationToken& token, int priority) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  PendingTask task = makeTask<true>(std::forward<F>(f), priority, "submit");
  detail::SubmittedFuture<F, Future<R>> future{unpublishedFutureOf<R>(task)};
  admit(std::move(task), &token);
  return future;
}

template <class F>
inline auto ThreadPoolExecutor::submit(F&& f, const TaskOptions& options) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  PendingTask task = makeTask<true>(std::forward<F>(f), options.priority, "submit");
  nameTask(task, options.name);
  detail::SubmittedFuture<F, Future<R>> future{unpublishedFutureOf<R>(task)};
  admit(std::move(task));
  return future;
}

template <class F, class Rep, class Period>
inline auto ThreadPoolExecutor::schedule(F&& f, std::chrono::duration<Rep, Period> delay) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  PendingTask task = makeTask<true>(std::forward<F>(f), 0, "schedule");
  Future<R> future = unpublishedFutureOf<R>(task);
  const Clock::time_point now = clock().now();
  const Clock::time_point deadline = scheduleTask(task, detail::deadlineOn(now, delay), now);
  return detail::submittedFuture<F>(ScheduledFuture<R>(std::move(future), deadline, clock()));
}

template <class F, class Rep1, class Period1, class Rep2, class Period2>
inline PeriodicHandle ThreadPoolExecutor::scheduleAtFixedRate(F&& f, std::chrono::duration<Rep1, Period1> initialDelay,
                                                       std::chrono::duration<Rep2, Period2> period,
                                                       PeriodicOptions options) {
  const Clock::duration every = positiveInterval(period, "scheduleAtFixedRate", "period");
  const Clock::time_point now = clock().now();
  return schedulePeriodic(makePeriodicBody(std::forward<F>(f), "scheduleAtFixedRate"),
                          detail::deadlineOn(now, initialDelay), now, every, /*fixedRate=*/true, options);
}

template <class F, class Rep1, class Period1, class Rep2, class Period2>
inline PeriodicHandle ThreadPoolExecutor::scheduleWithFixedDelay(F&& f, std::chrono::duration<Rep1, Period1> initialDelay,
                                                          std::chrono::duration<Rep2, Period2> delay,
                                                          PeriodicOptions options) {
  const Clock::duration gap = positiveInterval(delay, "scheduleWithFixedDelay", "delay");
  const Clock::time_point now = clock().now();
  return schedulePeriodic(makePeriodicBody(std::forward<F>(f), "scheduleWithFixedDelay"),
                          detail::deadlineOn(now, initialDelay), now, gap, /*fixedRate=*/false, options);
}

template <class F>
inline bool ThreadPoolExecutor::tryExecute(F&& f, int priority) {
  PendingTask task = makeTask<false>(std::forward<F>(f), priority, "tryExecute");
  return !linkToCaller(task, nullptr) || tryAdmit(task);
}

template <class F>
inline auto ThreadPoolExecutor::submitWhenRoom(F&& f, int priority) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  PendingTask task = makeTask<true>(std::forward<F>(f), priority, "submitWhenRoom");
  Future<R> future = unpublishedFutureOf<R>(task);
  return detail::SubmitWhenRoomAwaitable<R, detail::kOwningTemporary<F>>(*this, std::move(task), std::move(future),
                                                                         nullptr, {}, false);
}

template <class F>
inline auto ThreadPoolExecutor::submitWhenRoom(F&& f, const CancellationToken& token, int priority) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  PendingTask task = makeTask<true>(std::forward<F>(f), priority, "submitWhenRoom");
  Future<R> future = unpublishedFutureOf<R>(task);
  return detail::SubmitWhenRoomAwaitable<R, detail::kOwningTemporary<F>>(*this, std::move(task), std::move(future),
                                                                         &token, {}, false);
}

template <class F>
inline auto ThreadPoolExecutor::submitWhenRoom(F&& f, const TaskOptions& options) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  PendingTask task = makeTask<true>(std::forward<F>(f), options.priority, "submitWhenRoom");
  nameTask(task, options.name);
  Future<R> future = unpublishedFutureOf<R>(task);
  return detail::SubmitWhenRoomAwaitable<R, detail::kOwningTemporary<F>>(*this, std::move(task), std::move(future),
                                                                         nullptr, {}, false);
}

template <class F, class Rep, class Period>
inline auto ThreadPoolExecutor::submitWhenRoom(F&& f, std::chrono::duration<Rep, Period> timeout) {
  using R = detail::SubmitResult<std::decay_t<F>>;
  PendingTask task = makeTask<true>(std::forward<F>(f), 0, "submitWhenRoom");
  Future<R> future = unpublishedFutureOf<R>(task);
  return detail::SubmitWhenRoomAwaitable<R, detail::kOwningTemporary<F>>(
      *this, std::move(task), std::move(future), nullptr, detail::saturatedDuration(timeout), true);
}

template <bool HasFuture, class F>
inline PendingTask ThreadPoolExecutor::makeTask(F&& f, int priority, const char* operation) {
  using Fn = std::decay_t<F>;
  if constexpr (detail::IsTask<Fn>::value) {
    static_assert(!std::is_lvalue_reference_v<F>, "coexec: pass a Task by value: pool.submit(std::move(task))");
    (void)detail::startableHandle(f, scopeOf(operation), operation);  // before the pool takes it
    return adoptTask(new detail::CoroutineTask<typename Fn::value_type, Fn>(std::move(f), HasFuture, priority));
  } else {
    static_assert(std::is_invocable_v<Fn&> || detail::kTakesToken<Fn>,
                  "coexec: the task must be callable as f(), f(CancellationToken) or f(std::stop_token), or be a "
                  "Task<T>");
    if constexpr (detail::kMayBeEmpty<Fn>) {
      if (!f) throwEmptyCallable(operation);
    }
    using Result = detail::CallableResult<Fn>;
    if constexpr (detail::IsTask<Result>::value) {
      return adoptTask(
          new detail::CoroutineTask<typename Result::value_type, Fn>(Fn(static_cast<F&&>(f)), HasFuture, priority));
    } else {
      return adoptTask(new detail::CallableTask<Result, Fn>(Fn(static_cast<F&&>(f)), HasFuture, priority));
    }
  }
}

template <class F>
inline detail::Ref<detail::PeriodicBody> ThreadPoolExecutor::makePeriodicBody(F&& f, const char* operation) {
  using Fn = std::decay_t<F>;
  static_assert(std::is_invocable_v<Fn&> || detail::kTakesToken<Fn>,
                "coexec: a periodic task must be callable as f(), f(CancellationToken) or f(std::stop_token)");
  static_assert(
      !detail::IsTask<Fn>::value && !detail::IsTask<detail::CallableResult<Fn>>::value,
      "coexec: a periodic task must be a plain callable, not a coroutine (from it, submit() the coroutine)");
  if constexpr (detail::kMayBeEmpty<Fn>) {
    if (!f) throwEmptyCallable(operation);
  }
  return detail::Ref<detail::PeriodicBody>::adopt(new detail::PeriodicBodyOf<Fn>(Fn(std::forward<F>(f))));
}

template <class Rep, class Period>
inline Clock::duration ThreadPoolExecutor::positiveInterval(std::chrono::duration<Rep, Period> d, const char* operation,
                                                     const char* what) {
  if (d <= d.zero()) throwNotPositive(operation, what, std::chrono::duration<double>(d).count());
  return detail::saturatedDuration(d);
}

}  // namespace coexec
