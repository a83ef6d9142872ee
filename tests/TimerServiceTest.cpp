// SPDX-License-Identifier: BSL-1.0
#include "engine/TimerService.h"

// The timer service (internal, src/engine/): callbacks run once when due,
// in deadline order (ties in scheduling order); cancel() removes a timer at
// once and frees its slot; a cancel racing the firing has exactly one
// winner. On a ManualClock the timers fire inside advance() (the contract in
// Clock.h); on the steady clock, on the service's own thread.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "Assertions.h"

#include "TestSupport.h"
#include "coexec/Clock.h"

using coexec::Clock;
using coexec::ManualClock;
using coexec::steadyClock;
using coexec::detail::steadyTimerService;
using coexec::detail::TimerId;
using coexec::detail::TimerService;
using coexec::test::Counter;
using coexec::test::kLong;
using coexec::test::stressSize;
using namespace std::chrono_literals;

namespace {

const Clock::time_point kZero{};

/// What a firing saw: which timer, at what time, on which thread.
struct Firing {
  int label;
  Clock::time_point at;
  std::thread::id thread;
};

/// Records firings; each timer's context is one Entry.
struct Log {
  std::mutex mutex;
  std::vector<Firing> firings;
  Counter fired;

  std::vector<int> labels() {
    std::lock_guard lock(mutex);
    std::vector<int> out;
    for (const Firing& f : firings)
      out.push_back(f.label);
    return out;
  }
};

struct Entry {
  Log* log;
  int label;
  Clock* clock;
};

void record(void* context) noexcept {
  auto* entry = static_cast<Entry*>(context);
  {
    std::lock_guard lock(entry->log->mutex);
    entry->log->firings.push_back(Firing{entry->label, entry->clock->now(), std::this_thread::get_id()});
  }
  entry->log->fired.arrive();
}

void countFiring(void* context) noexcept { static_cast<std::atomic<int>*>(context)->fetch_add(1); }

}  // namespace

TEST_CASE("on a manual clock, advance fires due timers on its own thread in deadline order, ties in schedule order",
          "[timer][manual]") {
  ManualClock clock;
  TimerService service(clock);
  Log log;
  std::vector<Entry> entries;
  entries.reserve(6);
  const std::pair<int, Clock::duration> plan[] = {{1, 30ms}, {2, 10ms}, {3, 20ms}, {4, 10ms}, {5, 50ms}, {6, 20ms}};
  for (const auto& [label, delay] : plan) {
    entries.push_back(Entry{&log, label, &clock});
    service.schedule(kZero + delay, &record, &entries.back());
  }
  CHECK(service.pendingCount() == 6);

  clock.advance(9ms);
  CHECK(log.labels().empty());

  clock.advance(21ms);  // to 30ms: everything but the 50ms timer
  CHECK(log.labels() == std::vector<int>{2, 4, 3, 6, 1});
  CHECK(service.pendingCount() == 1);
  {
    std::lock_guard lock(log.mutex);
    // Each callback saw the clock at its own deadline, on the advancing thread.
    const Clock::duration seen[] = {10ms, 10ms, 20ms, 20ms, 30ms};
    for (std::size_t i = 0; i < 5; ++i) {
      CHECK(log.firings[i].at == kZero + seen[i]);
      CHECK(log.firings[i].thread == std::this_thread::get_id());
    }
  }
  CHECK(clock.now() == kZero + 30ms);

  clock.advance(1h);
  CHECK(log.labels() == std::vector<int>{2, 4, 3, 6, 1, 5});
  CHECK(service.pendingCount() == 0);
  CHECK(clock.now() == kZero + 30ms + 1h);
}

TEST_CASE("a timer that a callback schedules within the advanced span fires in the same advance", "[timer][manual]") {
  ManualClock clock;
  TimerService service(clock);
  struct Chain {
    TimerService* service;
    ManualClock* clock;
    std::vector<Clock::time_point> firedAt;
    static void fire(void* self) noexcept {
      auto* chain = static_cast<Chain*>(self);
      chain->firedAt.push_back(chain->clock->now());
      if (chain->firedAt.size() < 5) chain->service->schedule(chain->clock->now() + 10ms, &Chain::fire, chain);
    }
  } chain{&service, &clock, {}};
  service.schedule(kZero + 10ms, &Chain::fire, &chain);
  clock.advance(35ms);
  CHECK(chain.firedAt == std::vector<Clock::time_point>{kZero + 10ms, kZero + 20ms, kZero + 30ms});
  clock.advance(100ms);
  CHECK(chain.firedAt.size() == 5);
  CHECK(chain.firedAt.back() == kZero + 50ms);
}

TEST_CASE("a manual clock fires the timers of all its services in one deadline order", "[timer][manual]") {
  ManualClock clock;
  TimerService first(clock);
  TimerService second(clock);
  Log log;
  Entry a{&log, 1, &clock}, b{&log, 2, &clock}, c{&log, 3, &clock}, d{&log, 4, &clock};
  first.schedule(kZero + 20ms, &record, &a);
  second.schedule(kZero + 10ms, &record, &b);
  second.schedule(kZero + 20ms, &record, &c);  // ties with `a`, scheduled after it
  first.schedule(kZero + 5ms, &record, &d);
  clock.advance(1s);
  CHECK(log.labels() == std::vector<int>{4, 2, 1, 3});
}

TEST_CASE("a timer cancelled before it is due never runs and frees its entry at once", "[timer][cancel]") {
  ManualClock clock;
  TimerService service(clock);
  std::atomic<int> fired{0};
  const TimerId kept = service.schedule(kZero + 20ms, &countFiring, &fired);
  const TimerId cancelled = service.schedule(kZero + 10ms, &countFiring, &fired);
  CHECK(service.pendingCount() == 2);
  CHECK(service.cancel(cancelled));
  CHECK(service.pendingCount() == 1);
  CHECK_FALSE(service.cancel(cancelled));  // a second cancel finds nothing

  // The freed slot is reused; the stale id must not cancel its new timer.
  const TimerId reused = service.schedule(kZero + 30ms, &countFiring, &fired);
  CHECK(reused.slot == cancelled.slot);
  CHECK(service.slotCount() == 2);
  CHECK_FALSE(service.cancel(cancelled));
  CHECK(service.pendingCount() == 2);

  clock.advance(1s);
  CHECK(fired.load() == 2);           // `kept` and `reused`
  CHECK_FALSE(service.cancel(kept));  // already fired
  CHECK_FALSE(service.cancel(TimerId{}));
  CHECK(service.pendingCount() == 0);
}

TEST_CASE("a million timers scheduled an hour ahead and cancelled leave nothing behind", "[timer][cancel][memory]") {
  TimerService service(steadyClock());
  std::atomic<int> fired{0};
  const std::size_t n = stressSize(1'000'000, 10);
  for (std::size_t i = 0; i < n; ++i) {
    const TimerId id = service.schedule(steadyClock().now() + 1h, &countFiring, &fired);
    REQUIRE(service.cancel(id));
  }
  CHECK(service.pendingCount() == 0);
  CHECK(service.slotCount() == 1);  // every cancel freed the one slot for the next timer
  CHECK(fired.load() == 0);
}

TEST_CASE("a burst of timers gives its tables back once the last one is gone, and old ids never match new timers",
          "[timer][cancel][memory]") {
  ManualClock clock;
  TimerService service(clock);
  std::atomic<int> fired{0};
  const std::size_t n = 4 * TimerService::kSlotsKept;
  std::vector<TimerId> ids;
  for (std::size_t i = 0; i < n; ++i)
    ids.push_back(service.schedule(kZero + 1h, &countFiring, &fired));
  CHECK(service.slotCount() == n);
  // All but one cancelled: the tables stay while a timer is pending.
  for (std::size_t i = 1; i < n; ++i)
    REQUIRE(service.cancel(ids[i]));
  CHECK(service.slotCount() == n);
  CHECK(service.pendingCount() == 1);
  // The last one fires: nothing pending, the tables go.
  clock.advance(2h);
  CHECK(fired.load() == 1);
  CHECK(service.slotCount() == 0);
  // New timers take slots 0, 1, ... again; no old id (the fired one's, the
  // cancelled ones') matches them, and each new id cancels its own timer.
  std::vector<TimerId> fresh;
  for (std::size_t i = 0; i < 8; ++i)
    fresh.push_back(service.schedule(kZero + 3h, &countFiring, &fired));
  CHECK(fresh[0].slot == ids[0].slot);
  for (const TimerId& old : ids)
    CHECK_FALSE(service.cancel(old));
  CHECK(service.pendingCount() == fresh.size());
  for (const TimerId& id : fresh)
    CHECK(service.cancel(id));
  CHECK(service.pendingCount() == 0);
  CHECK(fired.load() == 1);
}

TEST_CASE("a pool's bulk of cancelled timers leaves no timer table behind", "[timer][cancel][memory]") {
  // What a pool keeps after its timers are gone (W6 of make bench: a million
  // scheduled an hour ahead, then cancelled): tables of at most kSlotsKept.
  ManualClock clock;
  TimerService service(clock);
  std::atomic<int> fired{0};
  const std::size_t n = stressSize(1'000'000, 10);
  std::vector<TimerId> ids;
  ids.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    ids.push_back(service.schedule(kZero + 1h, &countFiring, &fired));
  for (const TimerId& id : ids)
    REQUIRE(service.cancel(id));
  CHECK(service.pendingCount() == 0);
  CHECK(service.slotCount() == 0);
  CHECK(fired.load() == 0);
}

TEST_CASE("cancel racing the firing has exactly one winner, and both outcomes occur", "[timer][cancel][race]") {
  TimerService service(steadyClock());
  std::size_t cancelWon = 0;
  std::size_t firingWon = 0;
  const std::size_t rounds = stressSize(20'000, 10);
  for (std::size_t i = 0; i < rounds || cancelWon == 0 || firingWon == 0; ++i) {
    REQUIRE(i < 50 * rounds);  // both outcomes must show up well before this
    std::atomic<int> fired{0};
    const TimerId id = service.schedule(steadyClock().now(), &countFiring, &fired);  // due at once
    // Vary how long the canceller lets the service thread run first.
    for (std::size_t spin = 0; spin < i % 64; ++spin)
      std::this_thread::yield();
    if (service.cancel(id)) {
      ++cancelWon;
    } else {
      ++firingWon;
      // The firing won: the callback runs exactly once.
      const auto deadline = std::chrono::steady_clock::now() + kLong;
      while (fired.load() == 0) {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        std::this_thread::yield();
      }
    }
    // Either way the entry is gone and nothing fires later.
    REQUIRE(service.pendingCount() == 0);
    REQUIRE_FALSE(service.cancel(id));
    REQUIRE(fired.load() <= 1);
  }
  INFO("cancel won " << cancelWon << ", firing won " << firingWon);
  CHECK(cancelWon > 0);
  CHECK(firingWon > 0);
}

TEST_CASE("on the steady clock, the service thread fires due timers in deadline order, not before", "[timer][steady]") {
  TimerService service(steadyClock());
  Clock& clock = steadyClock();
  Log log;
  const auto start = clock.now();
  Entry late{&log, 3, &clock}, early{&log, 1, &clock}, middle{&log, 2, &clock};
  service.schedule(start + 30ms, &record, &late);
  service.schedule(start + 10ms, &record, &early);
  service.schedule(start + 20ms, &record, &middle);
  REQUIRE(log.fired.waitFor(3));
  CHECK(log.labels() == std::vector<int>{1, 2, 3});
  std::lock_guard lock(log.mutex);
  const Clock::duration deadlines[] = {10ms, 20ms, 30ms};
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(log.firings[i].at >= start + deadlines[i]);
    CHECK(log.firings[i].thread != std::this_thread::get_id());
  }
}

TEST_CASE("an earlier timer wakes a service thread that sleeps until a later deadline", "[timer][steady]") {
  TimerService service(steadyClock());
  std::atomic<int> fired{0};
  const TimerId far = service.schedule(steadyClock().now() + 1h, &countFiring, &fired);
  Log log;
  Clock& clock = steadyClock();
  Entry soon{&log, 1, &clock};
  service.schedule(clock.now() + 5ms, &record, &soon);
  REQUIRE(log.fired.waitFor(1));  // within kLong, not an hour
  CHECK(service.cancel(far));
  CHECK(fired.load() == 0);
}

TEST_CASE("a service destroyed with timers pending stops promptly without running them", "[timer][steady]") {
  std::atomic<int> fired{0};
  const auto start = std::chrono::steady_clock::now();
  {
    TimerService service(steadyClock());
    service.schedule(steadyClock().now() + 1h, &countFiring, &fired);
    service.schedule(Clock::time_point::max(), &countFiring, &fired);
  }
  CHECK(std::chrono::steady_clock::now() - start < kLong);
  CHECK(fired.load() == 0);
}

TEST_CASE("the process-wide steady service is one instance and fires timers", "[timer][steady]") {
  TimerService& service = steadyTimerService();
  CHECK(&service == &steadyTimerService());
  CHECK(&service.clock() == &steadyClock());
  Log log;
  Clock& clock = steadyClock();
  Entry entry{&log, 7, &clock};
  service.schedule(clock.now() + 1ms, &record, &entry);
  REQUIRE(log.fired.waitFor(1));
  CHECK(log.labels() == std::vector<int>{7});
}

TEST_CASE("many timers with random deadlines, some cancelled, fire in deadline order and the rest never",
          "[timer][manual][cancel]") {
  ManualClock clock;
  TimerService service(clock);
  const std::size_t n = stressSize(200'000, 10);
  struct Timer {
    Clock::time_point deadline;
    std::size_t index;
    bool cancelled = false;
    int fired = 0;
    std::vector<std::size_t>* order;
  };
  std::vector<std::size_t> order;
  order.reserve(n);
  std::vector<Timer> timers(n);
  std::vector<TimerId> ids(n);
  std::uint64_t state = 12345;  // a fixed linear congruential sequence: the same run every time
  const auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  const auto fire = [](void* self) noexcept {
    auto* timer = static_cast<Timer*>(self);
    ++timer->fired;
    timer->order->push_back(timer->index);
  };
  for (std::size_t i = 0; i < n; ++i) {
    timers[i].deadline = kZero + std::chrono::milliseconds(next() % 10'000);
    timers[i].index = i;
    timers[i].order = &order;
    ids[i] = service.schedule(timers[i].deadline, fire, &timers[i]);
  }
  std::size_t cancelled = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (next() % 3 == 0) {
      REQUIRE(service.cancel(ids[i]));
      timers[i].cancelled = true;
      ++cancelled;
    }
  }
  REQUIRE(service.pendingCount() == n - cancelled);
  clock.advance(5s);  // half of them, then the rest
  clock.advance(5s);
  REQUIRE(order.size() == n - cancelled);
  CHECK(service.pendingCount() == 0);
  for (std::size_t k = 1; k < order.size(); ++k) {
    const Timer& before = timers[order[k - 1]];
    const Timer& after = timers[order[k]];
    // Deadline order; equal deadlines in schedule order (= index order here).
    REQUIRE((before.deadline < after.deadline || (before.deadline == after.deadline && before.index < after.index)));
  }
  for (const Timer& timer : timers)
    REQUIRE(timer.fired == (timer.cancelled ? 0 : 1));
}

TEST_CASE("an idle service thread does not wake, and a later timer does not wake it", "[timer][steady][idle]") {
  // What the thread waits for is read from the service (no sleeps): a new
  // service has no thread; its first timer starts one, which, once that timer
  // has fired, waits with no timeout; with an hour-away timer it waits for
  // that deadline, and a later timer leaves that wait alone. A polling thread,
  // or one woken per schedule, fails these checks.
  TimerService service(steadyClock());
  CHECK(service.sleepingUntil() == Clock::time_point::min());  // no thread yet: nothing waits
  std::atomic<int> firedAtOnce{0};
  service.schedule(steadyClock().now(), &countFiring, &firedAtOnce);
  REQUIRE(coexec::test::eventually([&] { return service.sleepingUntil() == Clock::time_point::max(); }));
  CHECK(firedAtOnce.load() == 1);
  CHECK(service.wakeUpCount() == 0);  // nothing pending: it waits without a timeout
  std::atomic<int> fired{0};
  const Clock::time_point firstDeadline = steadyClock().now() + 1h;
  const TimerId first = service.schedule(firstDeadline, &countFiring, &fired);
  // Woken once: the new timer is earlier than "never".
  REQUIRE(coexec::test::eventually([&] { return service.sleepingUntil() == firstDeadline; }));
  const std::uint64_t wakeUps = service.wakeUpCount();
  const TimerId later = service.schedule(steadyClock().now() + 2h, &countFiring, &fired);
  const TimerId latest = service.schedule(steadyClock().now() + 3h, &countFiring, &fired);
  CHECK(service.sleepingUntil() == firstDeadline);  // later timers wake no one
  CHECK(service.wakeUpCount() == wakeUps);
  CHECK(service.cancel(first));
  CHECK(service.cancel(later));
  CHECK(service.cancel(latest));
  CHECK(fired.load() == 0);
}
