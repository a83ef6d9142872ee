// SPDX-License-Identifier: BSL-1.0
#include "Primes.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace offload {

std::uint64_t countPrimesBelow(std::uint64_t n, const coexec::CancellationToken& token) {
  if (n > kMaxPrimeLimit) {
    throw std::invalid_argument("countPrimesBelow: n = " + std::to_string(n) + " is above " +
                                std::to_string(kMaxPrimeLimit));
  }
  if (n <= 2) return 0;
  // Odd numbers only: index i stands for 2i + 1. The base primes up to
  // sqrt(n) come from a small plain sieve.
  std::uint64_t root = 1;
  while (root * root < n)
    ++root;
  std::vector<bool> small(root + 1, true);
  std::vector<std::uint64_t> basePrimes;
  for (std::uint64_t p = 3; p <= root; p += 2) {
    if (!small[p]) continue;
    basePrimes.push_back(p);
    for (std::uint64_t m = p * p; m <= root; m += 2 * p)
      small[m] = false;
  }

  constexpr std::uint64_t kSegment = 32 * 1024;  // odd numbers per segment
  std::vector<char> composite(kSegment);
  std::uint64_t count = 1;           // 2
  const std::uint64_t odds = n / 2;  // odd numbers below n: 1, 3, ..., (2 odds - 1)
  for (std::uint64_t low = 0; low < odds; low += kSegment) {
    token.throwIfCancellationRequested();
    const std::uint64_t high = std::min(low + kSegment, odds);
    std::fill(composite.begin(), composite.begin() + static_cast<std::ptrdiff_t>(high - low), 0);
    for (const std::uint64_t p : basePrimes) {
      // The first odd multiple of p that is >= max(p * p, 2 low + 1).
      std::uint64_t first = p * p;
      const std::uint64_t lowValue = 2 * low + 1;
      if (first < lowValue) {
        first = (lowValue + p - 1) / p * p;
        if (first % 2 == 0) first += p;
      }
      for (std::uint64_t index = (first - 1) / 2; index < high; index += p)
        composite[index - low] = 1;
    }
    for (std::uint64_t index = low; index < high; ++index) {
      if (index != 0 && composite[index - low] == 0) ++count;  // index 0 is 1, not a prime
    }
  }
  return count;
}

}  // namespace offload
