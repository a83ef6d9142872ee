// SPDX-License-Identifier: BSL-1.0
#pragma once

// The CPU work the server offloads: counting primes with a segmented sieve,
// whose cost grows with n (about n log log n) and whose memory does not.

#include <cstdint>

#include <coexec/CancellationToken.h>

namespace offload {

/// The largest n /work accepts.
inline constexpr std::uint64_t kMaxPrimeLimit = 100'000'000;

/// The number of primes p with p < n (countPrimesBelow(100) == 25). Runs on
/// the calling thread (never blocks otherwise): about 1 ms per 3 million on
/// one core in a release build; memory O(sqrt(n)). Checks `token` between segments of 32 KiB.
/// \throws coexec::OperationCancelled once `token` is cancelled;
/// std::invalid_argument if n > kMaxPrimeLimit; std::bad_alloc.
/// Thread safety: a pure function.
std::uint64_t countPrimesBelow(std::uint64_t n, const coexec::CancellationToken& token = {});

}  // namespace offload
