// SPDX-License-Identifier: BSL-1.0
// The process-wide table of task names. Writers (internTaskName) take
// mutex_; readers (taskNameAt) load an entry without a lock: an entry is
// published (release) after its string is built, and never changes or goes
// away afterwards, so a reader that sees the pointer sees the whole string.

#include "coexec/detail/TaskNames.h"

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "coexec/TaskOptions.h"
#include "foundation/NoDestructor.h"

namespace coexec::detail {
namespace {

constexpr std::uint32_t kCapacity = TaskOptions::kMaxTaskNames;
constexpr std::string_view kOverflowName = "(too many task names)";

struct NameTable {
  std::mutex mutex;
  std::unordered_map<std::string_view, std::uint32_t> index;  // keys view the strings below; guarded by mutex
  std::uint32_t used = 1;                                     // entry 0 is the empty name; guarded by mutex
  std::uint32_t overflow = 0;                                 // the index of kOverflowName, once full
  std::array<std::atomic<const std::string*>, kCapacity + 2> entries{};  // +1: index 0, +1: kOverflowName
};

NameTable& table() {
  static NoDestructor<NameTable> instance;  // never destroyed: names outlive every pool
  return instance.get();
}

std::uint32_t addLocked(NameTable& t, std::string_view name) {
  const auto* stored = new std::string(name);
  const std::uint32_t index = t.used;
  try {
    t.index.emplace(*stored, index);
  } catch (...) {
    delete stored;
    throw;
  }
  ++t.used;
  t.entries[index].store(stored, std::memory_order_release);
  return index;
}

}  // namespace

std::uint32_t internTaskName(std::string_view name) {
  if (name.empty()) return 0;
  // A producer usually names one kind of task in a row.
  thread_local std::uint32_t last = 0;
  if (last != 0 && taskNameAt(last) == name) return last;
  NameTable& t = table();
  std::lock_guard lock(t.mutex);
  if (const auto it = t.index.find(name); it != t.index.end()) return last = it->second;
  if (t.used <= kCapacity) return last = addLocked(t, name);
  if (t.overflow == 0) t.overflow = addLocked(t, kOverflowName);
  return t.overflow;
}

std::string_view taskNameAt(std::uint32_t index) noexcept {
  if (index == 0 || index >= kCapacity + 2) return {};
  const std::string* name = table().entries[index].load(std::memory_order_acquire);
  return name != nullptr ? std::string_view(*name) : std::string_view();
}

}  // namespace coexec::detail
