// SPDX-License-Identifier: BSL-1.0
#include "coexec/detail/NoInlineResumption.h"

namespace coexec::detail {
namespace {
// How many NoInlineResumption guards are alive on this thread.
constinit thread_local unsigned tlsNoInlineDepth = 0;
}  // namespace

NoInlineResumption::NoInlineResumption() noexcept { ++tlsNoInlineDepth; }
NoInlineResumption::~NoInlineResumption() { --tlsNoInlineDepth; }
bool NoInlineResumption::active() noexcept { return tlsNoInlineDepth != 0; }

}  // namespace coexec::detail
