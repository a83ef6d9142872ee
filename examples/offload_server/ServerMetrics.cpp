#include "ServerMetrics.h"

#include <cstddef>
#include <iterator>

#include <fmt/format.h>

#include <coexec/WorkQueue.h>

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
  const std::string label = fmt::format("pool=\"{}\"", pool.name);
  const auto gauge = [&](std::string_view name, std::string_view help, auto value) {
    family(out, name, "gauge", help, label, value);
  };
  const auto counter = [&](std::string_view name, std::string_view help, auto value) {
    family(out, name, "counter", help, label, value);
  };
  // One sample per lifecycle state, 1 for the current one.
  out += "# HELP coexec_pool_state The pool's lifecycle state (1 for the current one).\n";
  out += "# TYPE coexec_pool_state gauge\n";
  for (const coexec::PoolState state : {coexec::PoolState::running, coexec::PoolState::shutdown,
                                        coexec::PoolState::stop, coexec::PoolState::terminated}) {
    fmt::format_to(std::back_inserter(out), "coexec_pool_state{{{},state=\"{}\"}} {}\n", label, state,
                   state == pool.state ? 1 : 0);
  }
  gauge("coexec_pool_core_size", "corePoolSize: threads kept when idle.", pool.corePoolSize);
  gauge("coexec_pool_maximum_size", "maximumPoolSize: the upper bound on threads.", pool.maximumPoolSize);
  gauge("coexec_pool_size", "Live worker threads.", pool.poolSize);
  gauge("coexec_pool_active_threads", "Threads running a task now.", pool.activeCount);
  gauge("coexec_pool_largest_size", "The most threads the pool has had at once.", pool.largestPoolSize);
  counter("coexec_pool_tasks_total", "Tasks admitted (taskCount).", pool.taskCount);
  counter("coexec_pool_completed_tasks_total", "Admitted tasks that returned normally.", pool.completedTaskCount);
  gauge("coexec_pool_queue_size", "Tasks waiting in the work queue.", pool.queueSize);
  gauge("coexec_pool_local_queue_size", "Tasks waiting in the workers' local queues.", pool.localQueueSize);
  if (pool.queueCapacity == coexec::WorkQueue::kUnboundedCapacity) {
    gauge("coexec_pool_queue_capacity", "The work queue's capacity (+Inf: unbounded).", "+Inf");
  } else {
    gauge("coexec_pool_queue_capacity", "The work queue's capacity (+Inf: unbounded).", pool.queueCapacity);
  }
  counter("coexec_pool_rejected_tasks_total", "Tasks that reached the rejection policy.", pool.rejectedCount);
  counter("coexec_pool_failed_tasks_total", "Admitted tasks that threw.", pool.failedCount);
  counter("coexec_pool_cancelled_tasks_total", "Tasks cancelled.", pool.cancelledCount);
  counter("coexec_pool_discarded_tasks_total", "Tasks evicted from the queue by discardOldest.", pool.discardedCount);
  counter("coexec_pool_drained_tasks_total", "Tasks returned unrun by shutdownNow.", pool.drainedCount);
  gauge("coexec_pool_scheduled_tasks", "Timers pending (scheduled and periodic tasks).", pool.scheduledCount);

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
