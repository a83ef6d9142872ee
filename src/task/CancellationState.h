// SPDX-License-Identifier: BSL-1.0
// The state behind CancellationSource, CancellationToken and
// CancellationRegistration (private: src/task/CancellationToken.cpp and
// src/task/StopTokenBridge.cpp).
//
// Invariants:
// - refs_ counts the sources, tokens and registrations that hold the state;
//   the last release() destroys it (destroy(): a StopTokenBridge is deleted
//   as one, see StopTokenBridge.cpp).
// - requested_ goes false -> true once, under mutex_, in request(); readers
//   load it with acquire (isRequested()).
// - mutex_ guards the registration list (head_, tail_), running_,
//   cancellingThread_ and stopSource_.
// - stopSource_ has no state (std::nostopstate) until the first stopToken()
//   creates one, under mutex_, already stopped if requested_ is set; it is
//   never replaced afterwards. request() reads it outside the lock only if it
//   existed when it set requested_ (then nobody writes it again).

#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <thread>

#include "coexec/CancellationToken.h"

namespace coexec::detail {

/// Shared by a CancellationSource, its tokens and registrations.
class CancellationState {
 public:
  CancellationState() noexcept = default;
  CancellationState(const CancellationState&) = delete;
  CancellationState& operator=(const CancellationState&) = delete;

  void addRef() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  /// addRef() unless the last reference is gone already (the state is being
  /// destroyed); false then. For a caller that holds no reference of its own
  /// (a std::stop_callback of a StopTokenBridge).
  bool tryAddRef() noexcept {
    // relaxed: as addRef(); the caller's access to the state is kept alive
    // by the destroyer's wait for it (~stop_callback), not by this order.
    std::uint32_t refs = refs_.load(std::memory_order_relaxed);
    while (refs != 0) {
      if (refs_.compare_exchange_weak(refs, refs + 1, std::memory_order_relaxed)) return true;
    }
    return false;
  }
  void release() noexcept {
    // acq_rel: the last owner must see every other owner's writes before delete.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy();
  }

  bool isRequested() const noexcept {
    // acquire pairs with the release store in request(): a reader that sees
    // true sees what the canceller wrote before requesting.
    return requested_.load(std::memory_order_acquire);
  }

  /// Sets the request, then requests stop on the stop source (if one was
  /// made: its std::stop_callbacks run), then runs the registrations. On the
  /// calling thread, outside the lock. False if requested before.
  bool request() noexcept {
    std::unique_lock lock(mutex_);
    if (requested_.load(std::memory_order_relaxed)) return false;
    requested_.store(true, std::memory_order_release);
    cancellingThread_ = std::this_thread::get_id();
    if (stopSource_.stop_possible()) {
      // Never replaced once made (see the top of the file): read unlocked.
      lock.unlock();
      stopSource_.request_stop();  // runs the std::stop_callbacks on its token
      lock.lock();
    }
    while (CancellationRegistration* reg = head_) {
      unlink(reg);
      running_ = reg;
      lock.unlock();
      reg->callback_();  // noexcept context: a throwing callback terminates, as documented
      lock.lock();
      running_ = nullptr;
      callbackDone_.notify_all();
    }
    return true;
  }

  /// A std::stop_token stop-requested when this state is requested (at once
  /// if it is already). The first call makes the stop source.
  /// \throws std::bad_alloc.
  std::stop_token stopToken() {
    std::lock_guard lock(mutex_);
    if (!stopSource_.stop_possible()) {
      stopSource_ = std::stop_source();  // throws before changing anything
      // No callback can be registered on it yet: nothing runs under the lock.
      if (requested_.load(std::memory_order_relaxed)) stopSource_.request_stop();
    }
    return stopSource_.get_token();
  }

  /// False if cancellation was already requested (the caller runs the callback).
  bool add(CancellationRegistration* reg) {
    std::lock_guard lock(mutex_);
    if (requested_.load(std::memory_order_relaxed)) return false;
    reg->prev_ = tail_;
    reg->next_ = nullptr;
    if (tail_) {
      tail_->next_ = reg;
    } else {
      head_ = reg;
    }
    tail_ = reg;
    return true;
  }

  std::size_t registrations() {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const CancellationRegistration* reg = head_; reg != nullptr; reg = reg->next_)
      ++n;
    return n;
  }

  void remove(CancellationRegistration* reg) {
    std::unique_lock lock(mutex_);
    if (reg == head_ || reg->prev_ != nullptr) {
      unlink(reg);
      return;
    }
    // Not in the list: it already ran, or it is running now. Wait for it unless
    // it is this very thread that runs it (a callback destroying its own
    // registration).
    if (running_ == reg && cancellingThread_ != std::this_thread::get_id()) {
      callbackDone_.wait(lock, [&] { return running_ != reg; });
    }
  }

 protected:
  /// For StopTokenBridge: a state destroyed as one (see destroy()).
  explicit CancellationState(bool bridged) noexcept : bridged_(bridged) {}
  ~CancellationState() = default;

 private:
  /// Deletes the state as what it was made as (defined in
  /// StopTokenBridge.cpp): no virtual destructor, so a plain state carries
  /// no vtable pointer.
  void destroy() noexcept;

  // Requires: mutex_ held.
  void unlink(CancellationRegistration* reg) noexcept {
    if (reg->prev_) {
      reg->prev_->next_ = reg->next_;
    } else {
      head_ = reg->next_;
    }
    if (reg->next_) {
      reg->next_->prev_ = reg->prev_;
    } else {
      tail_ = reg->prev_;
    }
    reg->prev_ = reg->next_ = nullptr;
  }

  std::atomic<std::uint32_t> refs_{1};
  std::atomic<bool> requested_{false};
  const bool bridged_ = false;  // a StopTokenBridge (fills the padding: costs no space)
  std::mutex mutex_;
  std::condition_variable callbackDone_;
  CancellationRegistration* head_ = nullptr;           // guarded by mutex_
  CancellationRegistration* tail_ = nullptr;           // guarded by mutex_
  CancellationRegistration* running_ = nullptr;        // guarded by mutex_
  std::thread::id cancellingThread_;                   // guarded by mutex_
  std::stop_source stopSource_{std::nostopstate};      // guarded by mutex_; see the top of the file
};

}  // namespace coexec::detail
