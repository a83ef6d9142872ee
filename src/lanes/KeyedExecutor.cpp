// SPDX-License-Identifier: BSL-1.0
// KeyedExecutor: a fixed array of SerialExecutors on one pool; a key's lane
// is chosen by a mixed hash (KeyedExecutor.h). No state of its own beyond
// the array, which is never resized: lane() needs no lock.

#include "coexec/KeyedExecutor.h"

#include <stdexcept>

namespace coexec {

KeyedExecutor::KeyedExecutor(ThreadPoolExecutor& pool, std::size_t lanes) : pool_(pool) {
  if (lanes == 0) {
    throw std::invalid_argument(
        "coexec::KeyedExecutor: lanes is 0; a keyed executor needs at least one lane (use more lanes than the pool "
        "has threads, e.g. 4 to 16 per thread)");
  }
  lanes_.reserve(lanes);
  for (std::size_t i = 0; i < lanes; ++i)
    lanes_.push_back(std::make_unique<SerialExecutor>(pool));
}

KeyedExecutor::~KeyedExecutor() = default;  // each lane's destructor waits for its tasks

}  // namespace coexec
