// SPDX-License-Identifier: BSL-1.0
// The core headers do not bring in Asio, standalone or Boost's: only
// <coexec/asio.h> and <coexec/boost_asio.h> do. The
// umbrella header includes every public header (and through them the
// detail headers they use); had any of them included Asio, its version
// macro would be defined here.
#include "coexec/coexec.h"

#if defined(ASIO_VERSION) || defined(ASIO_HPP)
#error "coexec/coexec.h includes Asio: only coexec/asio.h may"
#endif
#if defined(BOOST_ASIO_VERSION) || defined(BOOST_ASIO_HPP)
#error "coexec/coexec.h includes Boost.Asio: only coexec/boost_asio.h may"
#endif

#include "Assertions.h"

namespace {
#if defined(ASIO_VERSION) || defined(BOOST_ASIO_VERSION)
constexpr bool kAsioIncluded = true;
#else
constexpr bool kAsioIncluded = false;
#endif
}  // namespace

TEST_CASE("coexec.h and the core headers compile without Asio and do not include it", "[asio][layers]") {
  STATIC_REQUIRE_FALSE(kAsioIncluded);
  coexec::ThreadPoolExecutor pool(1, 1, std::chrono::seconds(1), coexec::WorkQueue::bounded(1));
  auto f = pool.submit([] { return 1; });
  REQUIRE(f.get() == 1);
}
