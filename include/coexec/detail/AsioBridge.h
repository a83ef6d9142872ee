// SPDX-License-Identifier: BSL-1.0
#pragma once

// The parts of the Asio bridge that do not depend on Asio, shared by both
// flavours (<coexec/asio.h>, standalone Asio, and <coexec/boost_asio.h>,
// Boost.Asio): how a function handed to a pool by an AsioPoolExecutor
// behaves when the pool does not run it, and asyncWait()'s signature and
// state. The flavour-dependent bodies are include/coexec/asio/impl/*.ipp,
// compiled once per flavour (coexec/asio/impl/Flavour.h says how).
// This header includes no Asio header.

#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "coexec/Future.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/detail/CombinatorAccess.h"
#include "coexec/detail/Ref.h"
#include "coexec/detail/ResultCore.h"
#include "coexec/detail/RunSegments.h"

namespace coexec::detail {

/// True on a thread while it destroys a function that an AsioPoolExecutor
/// (of either flavour) handed to a pool and that never ran (refused,
/// discarded, dropped).
inline thread_local bool tlsDestroyingUnrun = false;

/// Where a function refused inside one AsioPoolExecutor::execute() call
/// goes instead of being destroyed, so that a dispatch can run it in the
/// caller: set on the calling thread for the length of the call. `call`
/// tells that call from any other (a function dropped later, by another
/// call, does not match).
struct Rescue {
  void* storage;  // a std::optional<F>
  std::uint64_t call;
};
inline thread_local Rescue* tlsRescue = nullptr;
inline thread_local std::uint64_t tlsRescueCalls = 0;

/// A function object given to AsioPoolExecutor::execute(), as the pool runs
/// it: invoked once, as an rvalue, and never taken for a callable expecting
/// a CancellationToken. Destroyed unrun inside the execute() call that made
/// it, it moves the function into that call's Rescue; destroyed unrun
/// elsewhere, it destroys the function with tlsDestroyingUnrun set.
template <class F>
class PoolFunction {
 public:
  PoolFunction(F&& f, Rescue* rescue) : fn_(std::in_place, std::move(f)), rescue_(rescue), call_(rescue->call) {}
  PoolFunction(PoolFunction&& other) noexcept(std::is_nothrow_move_constructible_v<F>)
      : fn_(std::move(other.fn_)), rescue_(other.rescue_), call_(other.call_) {
    other.fn_.reset();
  }
  PoolFunction& operator=(PoolFunction&&) = delete;
  ~PoolFunction() {
    if (!fn_) return;
    if (tlsRescue == rescue_ && rescue_->call == call_) {
      static_cast<std::optional<F>*>(rescue_->storage)->emplace(std::move(*fn_));
      fn_.reset();  // a moved-from function: nothing left to post
      return;
    }
    const bool outer = std::exchange(tlsDestroyingUnrun, true);
    fn_.reset();
    tlsDestroyingUnrun = outer;
  }
  void operator()() {
    F f(std::move(*fn_));
    fn_.reset();
    std::move(f)();
  }

 private:
  std::optional<F> fn_;
  Rescue* rescue_;
  std::uint64_t call_;
};

/// asyncWait()'s completion signature for a Future<R>.
template <class R>
struct AsyncWaitSignature {
  using type = void(std::exception_ptr, R);
};
template <>
struct AsyncWaitSignature<void> {
  using type = void(std::exception_ptr);
};

/// A reference to `future`'s state, for asyncWait().
/// \throws std::logic_error if `future` is empty.
template <class R>
Ref<ResultCore<R>> asyncWaitCore(const Future<R>& future) {
  ResultCore<R>* const core = CombinatorAccess::core(future);
  if (core == nullptr) {
    throw std::logic_error("coexec::asyncWait: the Future is empty (default-constructed or moved from)");
  }
  core->addRef();
  return Ref<ResultCore<R>>::adopt(core);
}

}  // namespace coexec::detail
