#include "coexec/CancellationToken.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "coexec/Errors.h"

namespace coexec {
namespace detail {

/// Shared by a CancellationSource, its tokens and registrations.
class CancellationState {
 public:
  void addRef() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    // acq_rel: the last owner must see every other owner's writes before delete.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  bool isRequested() const noexcept {
    // acquire pairs with the release store in request(): a reader that sees
    // true sees what the canceller wrote before requesting.
    return requested_.load(std::memory_order_acquire);
  }

  bool request() noexcept {
    std::unique_lock lock(mutex_);
    if (requested_.load(std::memory_order_relaxed)) return false;
    requested_.store(true, std::memory_order_release);
    cancellingThread_ = std::this_thread::get_id();
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

 private:
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
  std::mutex mutex_;
  std::condition_variable callbackDone_;
  CancellationRegistration* head_ = nullptr;     // guarded by mutex_
  CancellationRegistration* tail_ = nullptr;     // guarded by mutex_
  CancellationRegistration* running_ = nullptr;  // guarded by mutex_
  std::thread::id cancellingThread_;             // guarded by mutex_
};

std::size_t registrationCount(const CancellationToken& token) noexcept {
  return token.state_ != nullptr ? token.state_->registrations() : 0;
}

}  // namespace detail

// ---- CancellationToken -------------------------------------------------------

CancellationToken::CancellationToken(detail::CancellationState* state) noexcept : state_(state) {}
CancellationToken::CancellationToken(const CancellationToken& other) noexcept : state_(other.state_) {
  if (state_) state_->addRef();
}
CancellationToken::CancellationToken(CancellationToken&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)) {}
CancellationToken& CancellationToken::operator=(CancellationToken other) noexcept {
  std::swap(state_, other.state_);
  return *this;
}
CancellationToken::~CancellationToken() {
  if (state_) state_->release();
}

bool CancellationToken::isCancellationRequested() const noexcept { return state_ && state_->isRequested(); }

void CancellationToken::throwIfCancellationRequested() const {
  if (isCancellationRequested()) throw OperationCancelled();
}

// ---- CancellationSource ------------------------------------------------------

CancellationSource::CancellationSource() : state_(new detail::CancellationState) {}
CancellationSource::CancellationSource(detail::CancellationState* state) noexcept : state_(state) {}
CancellationSource::CancellationSource(const CancellationSource& other) noexcept : state_(other.state_) {
  if (state_) state_->addRef();
}
CancellationSource::CancellationSource(CancellationSource&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)) {}
CancellationSource& CancellationSource::operator=(CancellationSource other) noexcept {
  std::swap(state_, other.state_);
  return *this;
}
CancellationSource::~CancellationSource() {
  if (state_) state_->release();
}

CancellationToken CancellationSource::token() const noexcept {
  if (state_) state_->addRef();
  return CancellationToken(state_);
}

bool CancellationSource::requestCancellation() noexcept { return state_ && state_->request(); }

bool CancellationSource::isCancellationRequested() const noexcept { return state_ && state_->isRequested(); }

// ---- CancellationRegistration -----------------------------------------------

CancellationRegistration::CancellationRegistration(const CancellationToken& token, std::function<void()> callback)
    : callback_(std::move(callback)) {
  if (!callback_) throw std::invalid_argument("coexec::CancellationRegistration: the callback is empty");
  if (!token.state_) return;  // never cancelled: nothing to register
  if (token.state_->add(this)) {
    state_ = token.state_;
    state_->addRef();
  } else {
    callback_();  // already cancelled: run inline, as documented
  }
}

CancellationRegistration::~CancellationRegistration() {
  if (!state_) return;
  state_->remove(this);
  state_->release();
}

}  // namespace coexec
