// SPDX-License-Identifier: BSL-1.0
// The admission front's thread starts on their own
// (src/admission/ThreadStarts.h): worker numbers in the order of the tries,
// the retry's back-off from 1 ms doubling up to 1 s and back, and the
// temporary threads' places under their cap.

#include <chrono>
#include <cstddef>

#include "Assertions.h"

#include "admission/ThreadStarts.h"

using coexec::detail::ThreadStarts;
using namespace std::chrono_literals;

TEST_CASE("ThreadStarts: workers are numbered in the order their starts were tried", "[pool][threads]") {
  ThreadStarts starts;
  CHECK(starts.nextWorkerNumberLocked() == 1);
  CHECK(starts.takeWorkerNumberLocked() == 1);
  CHECK(starts.takeWorkerNumberLocked() == 2);  // a start that fails keeps its number
  CHECK(starts.nextWorkerNumberLocked() == 3);
}

TEST_CASE("ThreadStarts: the retry waits 1 ms, doubles up to 1 s while starts fail, and resets", "[pool][threads]") {
  ThreadStarts starts;
  CHECK_FALSE(starts.retryArmedLocked());
  CHECK(starts.retryDelayLocked() == 1ms);
  starts.noteRetryArmedLocked();
  CHECK(starts.retryArmedLocked());
  starts.noteRetryFiredLocked();
  CHECK_FALSE(starts.retryArmedLocked());
  std::chrono::nanoseconds expected = 1ms;
  for (int failure = 0; failure < 20; ++failure) {
    starts.backOffRetryLocked();
    expected = std::min<std::chrono::nanoseconds>(expected * 2, 1s);
    CHECK(starts.retryDelayLocked() == expected);
  }
  CHECK(starts.retryDelayLocked() == 1s);  // capped
  starts.resetRetryLocked();
  CHECK(starts.retryDelayLocked() == 1ms);
}

TEST_CASE("ThreadStarts: temporary threads take places under the cap, and a start that fails is not counted",
          "[pool][threads]") {
  ThreadStarts starts;
  CHECK(starts.reserveTemporaryLocked(2) == 1);
  CHECK(starts.reserveTemporaryLocked(2) == 2);
  CHECK(starts.reserveTemporaryLocked(2) == 0);  // at the cap
  CHECK(starts.temporaryAliveLocked() == 2);
  CHECK(starts.temporaryRunsLocked() == 2);

  starts.temporaryEndedLocked();
  CHECK(starts.temporaryAliveLocked() == 1);
  CHECK(starts.temporaryRunsLocked() == 2);  // it ran

  CHECK(starts.reserveTemporaryLocked(2) == 3);  // names stay distinct
  starts.unreserveTemporaryLocked();             // its thread could not be started
  CHECK(starts.temporaryAliveLocked() == 1);
  CHECK(starts.temporaryRunsLocked() == 2);

  starts.temporaryEndedLocked();
  CHECK(starts.temporaryAliveLocked() == 0);
}
