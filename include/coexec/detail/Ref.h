// SPDX-License-Identifier: BSL-1.0
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace coexec::detail {

/// Base of intrusively reference-counted objects. Starts at one reference.
class RefCounted {
 public:
  RefCounted() noexcept = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;

  void addRef() noexcept {
    // Relaxed is enough: a new reference is made from an existing one, which
    // already keeps the object alive.
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  /// addRef() for an object no other thread can reach yet (being built and
  /// not published): a plain increment, no read-modify-write.
  void addRefUnpublished() noexcept { refs_.store(refs_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  /// Destroys the object and returns true if the caller holds its only
  /// reference; otherwise returns false and changes nothing (the caller
  /// still holds its reference).
  bool releaseIfSole() noexcept {
    // acquire: as in release().
    if (refs_.load(std::memory_order_acquire) != 1) return false;
    delete this;
    return true;
  }
  void release() noexcept {
    // The only reference left (ours): nobody else can make or drop one, so
    // no read-modify-write is needed. acquire: pairs with the acq_rel
    // decrements of the other owners, whose writes we must see before the
    // delete.
    if (refs_.load(std::memory_order_acquire) == 1) {
      delete this;
      return;
    }
    // acq_rel: the last release must see every write made through the other
    // references before it destroys the object.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 protected:
  virtual ~RefCounted() = default;

 private:
  std::atomic<std::uint32_t> refs_{1};
};

/// Owning pointer to a RefCounted object.
template <class T>
class Ref {
 public:
  Ref() noexcept = default;
  /// Adopts the reference the caller holds.
  static Ref adopt(T* p) noexcept {
    Ref r;
    r.p_ = p;
    return r;
  }
  Ref(const Ref& o) noexcept : p_(o.p_) {
    if (p_) p_->addRef();
  }
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <class U>
  Ref(Ref<U>&& o) noexcept : p_(o.detach()) {}  // NOLINT(google-explicit-constructor)
  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() {
    if (p_) p_->release();
  }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  T* detach() noexcept { return std::exchange(p_, nullptr); }
  /// A new reference to the same object, as a `U` (which the object must be).
  template <class U>
  Ref<U> copyAs() const noexcept {
    if (p_) p_->addRef();
    return Ref<U>::adopt(static_cast<U*>(p_));
  }
  /// copyAs() for an object no other thread can reach yet (being built and
  /// not published): a plain increment (RefCounted::addRefUnpublished()).
  template <class U>
  Ref<U> copyUnpublishedAs() const noexcept {
    if (p_) p_->addRefUnpublished();
    return Ref<U>::adopt(static_cast<U*>(p_));
  }

 private:
  T* p_ = nullptr;
};

}  // namespace coexec::detail
