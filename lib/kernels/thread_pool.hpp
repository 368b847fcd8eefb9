// Worker threads on the host: the CPU backend's, for the operations OpenBLAS does not run
// (cross-entropy over the vocabulary, norms, activations, the optimizer step), and the model's
// parameter initialisation (model/gpt_parameters.cpp). Work is split into contiguous ranges
// of independent items (rows, elements), so results are identical whatever the thread count:
// no item's arithmetic depends on how the range was cut.
//
// Workers sleep on a condition variable between calls rather than spinning, so they leave the
// cores to OpenBLAS's own threads, which run the GEMMs in between.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mgt {

class ThreadPool {
public:
  // threads >= 1 (the calling thread counts as one).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs body(begin, end) over [0, n) cut into at most size() contiguous ranges of at least
  // `grain` items, the caller taking the first; returns when all are done and rethrows the
  // first exception a range threw. A call made while another is running (from a worker, or
  // from a second thread) runs serially in its caller.
  void for_each_range(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex dispatch_;  // one parallel call at a time
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0;
  int chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

// The thread count for the CPU backend: the environment's (core/process_environment.hpp), else
// the cores this process may run on.
int default_cpu_threads();

}  // namespace mgt
