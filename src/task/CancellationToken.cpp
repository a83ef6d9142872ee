// SPDX-License-Identifier: BSL-1.0
#include "coexec/CancellationToken.h"

#include <stdexcept>

#include "coexec/Errors.h"
#include "task/CancellationState.h"

namespace coexec {
namespace detail {

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
