// SPDX-License-Identifier: BSL-1.0
// The pool's list of live timer items and its armed count
// (src/pool/ScheduledItem.h) on their own: the list holds one reference per
// live item and keeps its links through removals, and the armed count
// follows every arming, every successful disarm and every firing, with a
// disarm that loses to the firing changing nothing.

#include <chrono>
#include <cstddef>
#include <vector>

#include "Assertions.h"

#include "coexec/Clock.h"
#include "engine/TimerService.h"
#include "pool/ScheduledItem.h"

using coexec::ManualClock;
using coexec::detail::LiveItems;
using coexec::detail::ScheduledItem;
using coexec::detail::TimerService;
using namespace std::chrono_literals;

namespace {

/// An item that counts the references the list takes and gives back.
class CountedItem final : public ScheduledItem {
 public:
  void retainItem() noexcept override { ++references; }
  void releaseItem() noexcept override { --references; }
  [[nodiscard]] bool isPeriodic() const noexcept override { return false; }
  int references = 0;
};

std::vector<const ScheduledItem*> listed(const LiveItems& items) {
  std::vector<const ScheduledItem*> out;
  for (const ScheduledItem* item = items.firstLocked(); item != nullptr; item = item->next) out.push_back(item);
  return out;
}

}  // namespace

TEST_CASE("LiveItems: the list holds a reference to each live item and keeps its links through removals",
          "[pool][timers]") {
  LiveItems items;
  CountedItem a;
  CountedItem b;
  CountedItem c;
  CHECK_FALSE(items.anyLocked());
  items.addLocked(a);
  items.addLocked(b);
  items.addLocked(c);
  CHECK(items.countLocked() == 3);
  CHECK(a.references == 1);
  CHECK(listed(items) == std::vector<const ScheduledItem*>{&c, &b, &a});  // newest first

  ScheduledItem& removed = items.removeLocked(b);  // from the middle
  CHECK(&removed == &b);
  CHECK(b.references == 1);  // the list's reference is the caller's now
  removed.releaseItem();
  CHECK(b.references == 0);
  CHECK(b.prev == nullptr);
  CHECK(b.next == nullptr);
  CHECK(listed(items) == std::vector<const ScheduledItem*>{&c, &a});
  CHECK(a.prev == &c);

  items.removeLocked(c).releaseItem();  // the head
  CHECK(listed(items) == std::vector<const ScheduledItem*>{&a});
  CHECK(a.prev == nullptr);
  items.removeLocked(a).releaseItem();  // the last
  CHECK_FALSE(items.anyLocked());
  CHECK(items.firstLocked() == nullptr);
  CHECK(a.references == 0);
  CHECK(c.references == 0);
}

namespace {
struct Firing {
  LiveItems* items;
  TimerService* timers;
  CountedItem* item;
  bool disarmedByFiring = true;  // what disarmLocked() said from inside the firing
};
void fire(void* context) noexcept {
  auto& firing = *static_cast<Firing*>(context);
  // A canceller that comes while the timer fires loses: the firing decides.
  firing.disarmedByFiring = firing.items->disarmLocked(*firing.item, *firing.timers);
  firing.items->firedLocked(*firing.item);
}
}  // namespace

TEST_CASE("LiveItems: the armed count follows arming, disarming and firing, and a disarm that loses changes nothing",
          "[pool][timers]") {
  ManualClock clock;
  LiveItems items;
  CountedItem early;
  CountedItem late;
  {
    TimerService timers(clock);
    items.addLocked(early);
    items.addLocked(late);
    Firing firing{&items, &timers, &early};
    const auto now = clock.now();
    items.armLocked(early, timers.schedule(now + 1ms, &fire, &firing), now + 1ms);
    Firing unused{&items, &timers, &late};
    items.armLocked(late, timers.schedule(now + 1h, &fire, &unused), now + 1h);
    CHECK(items.armedLocked() == 2);
    CHECK(early.armed);
    CHECK(early.deadline == now + 1ms);

    CHECK(items.disarmLocked(late, timers));  // cancelled before it fired
    CHECK_FALSE(late.armed);
    CHECK(items.armedLocked() == 1);
    CHECK_FALSE(items.disarmLocked(late, timers));  // not armed any more

    clock.advance(2ms);  // `early` fires
    CHECK_FALSE(firing.disarmedByFiring);
    CHECK_FALSE(early.armed);
    CHECK(items.armedLocked() == 0);
    CHECK_FALSE(items.disarmLocked(early, timers));
    CHECK(items.armedLocked() == 0);
  }
  items.removeLocked(early).releaseItem();
  items.removeLocked(late).releaseItem();
  CHECK_FALSE(items.anyLocked());
}
