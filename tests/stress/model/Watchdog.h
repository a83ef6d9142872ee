// SPDX-License-Identifier: BSL-1.0
#pragma once

// The stress driver's watchdog (model/Runner.h): a hang is a failure too.
// Header-only: fuzz_Program builds the model from its four sources
// (Program.cpp, Runner.cpp, Bodies.cpp, Checks.cpp), so a part split out of
// them lives in a header.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "model/Program.h"

namespace coexec::stress::impl {

/// Aborts the process, printing the program, if a run takes longer than its
/// limit (a hang is a failure too). One thread for the whole process, armed
/// for each program: a thread started and joined per program could still be
/// counted in /proc/self/status when the next program counts its threads
/// (join() returns once the thread has finished, a moment before the kernel
/// drops it from the count), and that program would see one thread fewer
/// after it than before.
class Watchdog {
 public:
  /// The process's watchdog; its thread starts on first use.
  static Watchdog& instance() {
    static Watchdog watchdog;
    return watchdog;
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Watches `program` (which must outlive disarm()) for `seconds`.
  void arm(const Program& program, std::uint32_t seconds) {
    {
      std::lock_guard lock(mutex_);
      program_ = &program;
      seconds_ = seconds;
      deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
      ++generation_;
    }
    cv_.notify_all();
  }
  void disarm() {
    {
      std::lock_guard lock(mutex_);
      program_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
  }

 private:
  Watchdog() : thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (program_ == nullptr) {
        cv_.wait(lock);
        continue;
      }
      const std::uint64_t watched = generation_;
      const std::chrono::steady_clock::time_point deadline = deadline_;
      if (cv_.wait_until(lock, deadline, [&] { return stopping_ || generation_ != watched; })) continue;
      std::fprintf(stderr, "stress: the program did not end within %u s (a hang):\n%s", seconds_,
                   describe(*program_).c_str());
      std::fflush(stderr);
      std::abort();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  const Program* program_ = nullptr;                // guarded by mutex_: the program watched, or none
  std::uint32_t seconds_ = 0;                       // guarded by mutex_
  std::chrono::steady_clock::time_point deadline_;  // guarded by mutex_
  std::uint64_t generation_ = 0;                    // guarded by mutex_: counts arm() and disarm() calls
  bool stopping_ = false;                           // guarded by mutex_
  std::thread thread_;
};

}  // namespace coexec::stress::impl
