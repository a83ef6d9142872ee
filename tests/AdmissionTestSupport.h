// SPDX-License-Identifier: BSL-1.0
#pragma once

// Helpers shared by the admission tests (routing, work queues, rejection
// policies): pool options in one line, blocking tasks, guards that keep a
// failing assertion from hanging the pool's destructor, and a probe that
// records what one execute()/submit() did.

#include <array>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/ThreadPoolExecutor.h"

namespace coexec::test {

/// Options for a pool named `name` (keep it short: it prefixes thread names).
inline ThreadPoolOptions poolOptions(std::string name, std::size_t core, std::size_t max, WorkQueue queue,
                                     RejectionPolicy policy = RejectionPolicy::abort()) {
  ThreadPoolOptions options;
  options.name = std::move(name);
  options.corePoolSize = core;
  options.maximumPoolSize = max;
  options.workQueue = queue;
  options.rejectionPolicy = std::move(policy);
  return options;
}

/// Calls shutdownNow() if the scope is left by an exception (a failed
/// REQUIRE), so that tasks stuck in a queue no thread serves cannot hang the
/// pool's destructor. Declare it after the pool.
class StopOnFailure {
 public:
  explicit StopOnFailure(ThreadPoolExecutor& pool) : pool_(pool), exceptions_(std::uncaught_exceptions()) {}
  StopOnFailure(const StopOnFailure&) = delete;
  StopOnFailure& operator=(const StopOnFailure&) = delete;
  ~StopOnFailure() {
    if (std::uncaught_exceptions() > exceptions_) (void)pool_.shutdownNow();
  }

 private:
  ThreadPoolExecutor& pool_;
  int exceptions_;
};

/// A task that reports its start, then blocks until the gate opens.
inline auto blockingTask(Gate& gate, Counter& started) {
  return [&gate, &started] {
    started.arrive();
    gate.wait();
  };
}

/// The distinct threads that ran some tasks. Thread-safe.
class ThreadSet {
 public:
  void addCurrent() {
    std::lock_guard lock(mutex_);
    ids_.insert(std::this_thread::get_id());
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return ids_.size();
  }
  bool contains(std::thread::id id) const {
    std::lock_guard lock(mutex_);
    return ids_.count(id) != 0;
  }

 private:
  mutable std::mutex mutex_;
  std::set<std::thread::id> ids_;
};

/// True if `error` holds an `E` (or a type derived from it).
template <class E>
bool holds(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

/// `what()` of the exception in `error`; empty if none or not a std::exception.
inline std::string whatOf(const std::exception_ptr& error) {
  if (!error) return {};
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return {};
  }
}

/// The snapshot of the RejectedExecution in `error`, if it holds one.
inline std::optional<PoolStats> snapshotOf(const std::exception_ptr& error) {
  if (!error) return std::nullopt;
  try {
    std::rethrow_exception(error);
  } catch (const RejectedExecution& e) {
    return e.snapshot();
  } catch (...) {
    return std::nullopt;
  }
}

/// What `f()` throws (null if it returns).
template <class F>
std::exception_ptr thrownBy(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

/// The three ways to hand a task to a pool (Java's execute(r), submit(r),
/// submit(callable)).
enum class Form { execute, submitVoid, submitValue };
inline constexpr std::array kForms{Form::execute, Form::submitVoid, Form::submitValue};

inline std::string_view formName(Form form) {
  switch (form) {
    case Form::execute: return "execute";
    case Form::submitVoid: return "submit(void())";
    case Form::submitValue: return "submit(int())";
  }
  return "?";
}

/// Records whether (and where) a probe task ran.
struct Probe {
  std::atomic<bool> ran{false};
  std::atomic<bool> ranOnSubmitter{false};
};

/// The value a submitValue probe returns.
inline constexpr int kProbeValue = 42;

/// What one submission did, observed as soon as the call returned.
struct Submission {
  Form form = Form::execute;
  std::exception_ptr thrown;       ///< what execute()/submit() threw
  bool futureDone = false;         ///< submit forms: the Future had settled on return
  std::exception_ptr futureError;  ///< submit forms, settled: what get() threw
  std::optional<int> value;        ///< submitValue, settled without error

  template <class R>
  void observe(Future<R> future) {
    futureDone = future.isDone();
    if (!futureDone) return;
    try {
      if constexpr (std::is_void_v<R>) {
        future.get();
      } else {
        value = future.get();
      }
    } catch (...) {
      futureError = std::current_exception();
    }
  }
};

/// Hands a probe task to `pool` in the given form, with `priority` (which
/// also tags the task for a custom handler), and records what happened.
inline Submission submitProbe(ThreadPoolExecutor& pool, Form form, Probe& probe, int priority = 0) {
  const std::thread::id submitter = std::this_thread::get_id();
  auto body = [&probe, submitter] {
    probe.ranOnSubmitter = std::this_thread::get_id() == submitter;
    probe.ran = true;
  };
  Submission s;
  s.form = form;
  try {
    switch (form) {
      case Form::execute: pool.execute(body, priority); break;
      case Form::submitVoid: s.observe(pool.submit(body, priority)); break;
      case Form::submitValue:
        s.observe(pool.submit(
            [body] {
              body();
              return kProbeValue;
            },
            priority));
        break;
    }
  } catch (...) {
    s.thrown = std::current_exception();
  }
  return s;
}

}  // namespace coexec::test
