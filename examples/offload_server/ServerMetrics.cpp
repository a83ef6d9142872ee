// SPDX-License-Identifier: BSL-1.0
#include "ServerMetrics.h"

#include <cstddef>
#include <iterator>

#include <fmt/format.h>

#include <coexec/Prometheus.h>

namespace offload {
namespace {

std::size_t slotOf(int status) noexcept {
  for (std::size_t i = 0; i < ServerMetrics::kStatusCodes.size(); ++i) {
    if (ServerMetrics::kStatusCodes[i] == status) return i;
  }
  return ServerMetrics::kStatusCodes.size();
}

// Appends one metric family: HELP and TYPE, then one sample.
template <class Value>
void family(std::string& out, std::string_view name, std::string_view type, std::string_view help,
            std::string_view labels, Value value) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  if (labels.empty()) {
    fmt::format_to(std::back_inserter(out), "{} {}\n", name, value);
  } else {
    fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, value);
  }
}

}  // namespace

void ServerMetrics::countResponse(int status) noexcept {
  responses_[slotOf(status)].fetch_add(1, std::memory_order_relaxed);
}

void ServerMetrics::connectionOpened() noexcept {
  connectionsOpen_.fetch_add(1, std::memory_order_relaxed);
  connectionsAccepted_.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t ServerMetrics::responses(int status) const noexcept {
  return responses_[slotOf(status)].load(std::memory_order_relaxed);
}

std::uint64_t ServerMetrics::totalResponses() const noexcept {
  std::uint64_t total = 0;
  for (const auto& counter : responses_)
    total += counter.load(std::memory_order_relaxed);
  return total;
}

std::string ServerMetrics::renderPrometheus(const coexec::PoolStats& pool) const {
  std::string out;
  coexec::writePrometheus(out, pool);  // every field, labelled pool="<name>"
  out += "# HELP offload_http_responses_total HTTP responses sent, by status code.\n";
  out += "# TYPE offload_http_responses_total counter\n";
  for (std::size_t i = 0; i < kStatusCodes.size(); ++i) {
    fmt::format_to(std::back_inserter(out), "offload_http_responses_total{{code=\"{}\"}} {}\n", kStatusCodes[i],
                   responses_[i].load(std::memory_order_relaxed));
  }
  fmt::format_to(std::back_inserter(out), "offload_http_responses_total{{code=\"other\"}} {}\n",
                 responses_[kOther].load(std::memory_order_relaxed));
  family(out, "offload_http_rejected_total", "counter", "/work requests the pool refused (answered 503).", "",
         rejected());
  family(out, "offload_http_requests_in_flight", "gauge", "Requests parsed and not yet answered.", "", inFlight());
  family(out, "offload_http_connections_open", "gauge", "Client connections open now.", "", connectionsOpen());
  family(out, "offload_http_connections_total", "counter", "Client connections accepted.", "",
         connectionsAccepted_.load(std::memory_order_relaxed));
  return out;
}

}  // namespace offload
