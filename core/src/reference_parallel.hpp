// SPDX-License-Identifier: GPL-3.0-or-later
// Private to the CPU reference: runs independent work items over a few std::threads.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace twell::reference::detail {

/// The thread count a reference routine uses: `requested`, or the hardware's when 0, never more
/// than there are work items.
inline unsigned effective_threads(unsigned requested, std::size_t work_items) {
  unsigned threads = requested != 0 ? requested : std::max(1u, std::thread::hardware_concurrency());
  if (work_items < threads) threads = static_cast<unsigned>(std::max<std::size_t>(work_items, 1));
  return threads;
}

/// Calls work(item, worker) for every item in [0, items), items dealt dynamically so uneven items
/// balance. `worker` (< threads) lets callers keep per-thread scratch. The first exception thrown
/// by any item is rethrown here once every thread has stopped.
template <typename Work>
void parallel_for(std::size_t items, unsigned threads, Work&& work) {
  threads = effective_threads(threads, items);
  if (threads <= 1) {
    for (std::size_t item = 0; item < items; ++item) work(item, 0u);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto run = [&](unsigned worker) {
    try {
      for (std::size_t item = next++; item < items; item = next++) work(item, worker);
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = items;  // stop handing out work
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (unsigned worker = 1; worker < threads; ++worker) pool.emplace_back(run, worker);
  run(0);
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace twell::reference::detail
