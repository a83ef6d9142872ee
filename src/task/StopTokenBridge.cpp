// SPDX-License-Identifier: BSL-1.0
// CancellationToken <-> std::stop_token.
//
// CancellationToken::stopToken(): the state's lazily made std::stop_source
// (CancellationState::stopToken(), requested in CancellationState::request()).
//
// CancellationToken(const std::stop_token&): a StopTokenBridge, a
// CancellationState that holds a std::stop_callback on the outside stop
// token, whose callback requests the state. Lifetime:
// - the callback holds no reference to the state (the outside stop state may
//   live for ever: a reference there would keep the state alive as long);
//   the state is destroyed when its last token or registration goes, and
//   destroying it destroys the std::stop_callback first, which deregisters
//   it, or, if the callback runs on another thread at that moment, waits for
//   it to return (std::stop_callback's destructor);
// - while it runs, the callback holds a reference it takes with
//   tryAddRef(): request() runs the registrations, whose callbacks may drop
//   the other references (a task's link, released when the task settles
//   inside the callback), and the state must outlive request(). If the
//   reference count has reached zero already, the destroyer is waiting in
//   ~stop_callback for this callback: it returns without touching the state
//   further;
// - the callback's own release() may be the last one: the state, and the
//   std::stop_callback inside it, are then destroyed on the thread that runs
//   the callback, inside it. std::stop_callback's destructor does not wait
//   for a callback running on its own thread, and the callback touches
//   nothing after that release().

#include <atomic>
#include <cstddef>
#include <new>
#include <stop_token>

#include "coexec/CancellationToken.h"
#include "task/CancellationState.h"

namespace coexec {
namespace detail {

namespace {

#if defined(COEXEC_FAULT_INJECTION)
// relaxed: counts live bridges for tests; orders nothing.
std::atomic<std::size_t> liveBridges{0};
inline void countBridge(int delta) noexcept {
  liveBridges.fetch_add(static_cast<std::size_t>(delta), std::memory_order_relaxed);
}
#else
inline void countBridge(int /*delta*/) noexcept {}
#endif

}  // namespace

/// A CancellationState requested by a stop request on an outside
/// std::stop_token (see the top of the file).
class StopTokenBridge final : public CancellationState {
 public:
  /// Requests the state at once (inside the std::stop_callback's
  /// constructor) if stop was requested already. \throws nothing itself
  /// (std::stop_callback's constructor does not throw).
  explicit StopTokenBridge(const std::stop_token& stop) noexcept
      : CancellationState(/*bridged=*/true), callback_(stop, Forward(this)) {
    countBridge(1);
  }
  StopTokenBridge(const StopTokenBridge&) = delete;
  StopTokenBridge& operator=(const StopTokenBridge&) = delete;
  /// Deregisters the callback first (the member goes before the base), or
  /// waits for it if it runs on another thread now.
  ~StopTokenBridge() { countBridge(-1); }

 private:
  /// The std::stop_callback's callback, on the thread that requests stop.
  class Forward {
   public:
    explicit Forward(StopTokenBridge* bridge) noexcept : bridge_(bridge) {}
    void operator()() const noexcept {
      StopTokenBridge* const bridge = bridge_;
      if (!bridge->tryAddRef()) return;  // being destroyed: its destroyer waits for this call to return
      (void)bridge->request();
      bridge->release();  // may destroy the bridge and this callback: nothing after it
    }

   private:
    StopTokenBridge* bridge_;
  };

  std::stop_callback<Forward> callback_;
};

void CancellationState::destroy() noexcept {
  if (bridged_) {
    delete static_cast<StopTokenBridge*>(this);
  } else {
    delete this;
  }
}

std::size_t liveStopTokenBridges() noexcept {
#if defined(COEXEC_FAULT_INJECTION)
  return liveBridges.load(std::memory_order_relaxed);
#else
  return 0;
#endif
}

}  // namespace detail

CancellationToken::CancellationToken(const std::stop_token& stop) {
  if (stop.stop_possible()) state_ = new detail::StopTokenBridge(stop);
}

std::stop_token CancellationToken::stopToken() const {
  return state_ != nullptr ? state_->stopToken() : std::stop_token();
}

}  // namespace coexec
