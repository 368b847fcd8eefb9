#include "kernels/thread_pool.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/process_environment.hpp"

namespace mgt {

namespace {

// Range c of `chunks` near-equal ranges of [0, n).
std::pair<int64_t, int64_t> range_of(int64_t n, int chunks, int c) {
  return {n * c / chunks, n * (c + 1) / chunks};
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::for_each_range(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  const int chunks = static_cast<int>(std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1))));
  std::unique_lock<std::mutex> dispatch(dispatch_, std::try_to_lock);
  if (chunks == 1 || !dispatch.owns_lock()) {
    body(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    n_ = n;
    chunks_ = chunks;
    pending_ = chunks - 1;
    error_ = nullptr;
    ++generation_;
  }
  work_ready_.notify_all();
  std::exception_ptr mine;
  try {
    const auto [begin, end] = range_of(n, chunks, 0);
    body(begin, end);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return pending_ == 0; });
  body_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    if (index >= chunks_) continue;  // this call uses fewer ranges than there are workers
    const auto* body = body_;
    const auto [begin, end] = range_of(n_, chunks_, index);
    lock.unlock();
    std::exception_ptr failure;
    try {
      (*body)(begin, end);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    if (failure && !error_) error_ = failure;
    if (--pending_ == 0) work_done_.notify_one();
  }
}

int default_cpu_threads() {
  if (const std::optional<int> threads = thread_count_from_environment()) return *threads;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace mgt
