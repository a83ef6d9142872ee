// SPDX-License-Identifier: BSL-1.0
// An order-event processor: events for 64 accounts arrive interleaved; each
// account's events must be applied in order, one at a time, while different
// accounts proceed in parallel on a pool of 4 threads. A KeyedExecutor gives
// each account its lane (the "one thread per entity" pattern, with no thread
// per entity), and a TaskLocal request id, bound when an event is submitted,
// is visible in every step of its processing: after each co_await, on
// whatever thread resumes it, and in the fraud check it submits as a child.
// Checks its own results.

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace std::chrono_literals;

namespace {

constexpr int kAccounts = 64;
constexpr int kEventsPerAccount = 200;

const coexec::TaskLocal<std::string> requestId;

struct Event {
  int account;
  int sequence;  // per account, from 0
  long amount;   // cents, may be negative
};

/// Per-account state. Touched only by the account's own lane (one task at a
/// time), so it needs no lock.
struct Account {
  long balance = 0;
  int nextSequence = 0;
  int outOfOrder = 0;
};

struct Ledger {
  std::array<Account, kAccounts> accounts{};
  std::atomic<int> missingRequestId{0};
  std::atomic<int> applied{0};

  void expectRequestId(const std::string& expected) {
    const std::string* id = requestId.get();
    if (id == nullptr || *id != expected) missingRequestId.fetch_add(1);
  }
};

std::string idOf(const Event& e) { return fmt::format("acct{}-evt{}", e.account, e.sequence); }

/// One event: a fraud check on the pool (a child: it inherits the request
/// id), a short pause, then the account is updated.
coexec::Task<void> process(coexec::ThreadPoolExecutor& pool, Ledger& ledger, Event e) {
  const std::string id = idOf(e);
  ledger.expectRequestId(id);
  coexec::Future<bool> fraudCheck = pool.submit([&ledger, id, amount = e.amount] {
    ledger.expectRequestId(id);  // the child sees its parent's binding
    return amount > -1'000'000;
  });
  const bool clean = co_await fraudCheck;
  ledger.expectRequestId(id);
  if (e.sequence % 50 == 0) co_await coexec::sleepFor(1ms);  // the lane stays held: later events wait
  ledger.expectRequestId(id);
  Account& account = ledger.accounts[static_cast<std::size_t>(e.account)];
  if (e.sequence != account.nextSequence) ++account.outOfOrder;
  account.nextSequence = e.sequence + 1;
  if (clean) account.balance += e.amount;
  ledger.applied.fetch_add(1);
}

bool check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  return ok;
}

}  // namespace

int main() {
  coexec::ThreadPoolOptions options;
  options.name = "orders";
  options.corePoolSize = 4;
  options.maximumPoolSize = 4;
  options.workQueue = coexec::WorkQueue::bounded(4096);
  coexec::ThreadPoolExecutor pool(options);
  Ledger ledger;
  std::array<long, kAccounts> expected{};

  {
    coexec::KeyedExecutor byAccount(pool, kAccounts);
    // Events arrive interleaved across accounts, each account's in order.
    for (int sequence = 0; sequence < kEventsPerAccount; ++sequence) {
      for (int account = 0; account < kAccounts; ++account) {
        const Event e{account, sequence, (sequence % 7 == 3 ? -1 : 1) * (account + 1) * 10L};
        expected[static_cast<std::size_t>(account)] += e.amount;
        // Bound while the event is submitted: its task, and everything that
        // task starts, see it.
        coexec::TaskLocal<std::string>::Scope scope(requestId, idOf(e));
        byAccount.execute(account, [&pool, &ledger, e] { return process(pool, ledger, e); });
      }
    }
  }  // the KeyedExecutor's destructor waits until every event has been applied

  bool ok = true;
  int outOfOrder = 0;
  bool balances = true;
  for (int a = 0; a < kAccounts; ++a) {
    const Account& account = ledger.accounts[static_cast<std::size_t>(a)];
    outOfOrder += account.outOfOrder;
    balances = balances && account.balance == expected[static_cast<std::size_t>(a)] &&
               account.nextSequence == kEventsPerAccount;
  }
  ok &= check(ledger.applied.load() == kAccounts * kEventsPerAccount, "every event was applied");
  ok &= check(outOfOrder == 0, "each account's events were applied in order");
  ok &= check(balances, "every balance matches the sequential sum");
  ok &= check(ledger.missingRequestId.load() == 0, "the request id was visible in every step and child");
  ok &= check(requestId.get() == nullptr, "no binding is left on the main thread");
  fmt::print("\n{}\n", pool.stats());
  return ok ? 0 : 1;
}
