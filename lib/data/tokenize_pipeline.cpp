#include "data/tokenize_pipeline.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/error.hpp"

namespace mgt {

void LineBatch::clear() {
  sequence = 0;
  text.clear();
  lines.clear();
  stream_bytes = 0;
  stored_position = 0;
  failure = nullptr;
  for (auto& e : encoded) e.clear();
  bad_lines.clear();
}

namespace {

// Buffers that once held an unusually long line are given back rather than kept for the run.
void trim_capacity(LineBatch& b, std::size_t batch_bytes) {
  if (b.text.capacity() > 8 * batch_bytes) std::string().swap(b.text);
  for (auto& e : b.encoded)
    if (e.tokens.capacity() > 4 * batch_bytes) std::vector<TokenId>().swap(e.tokens);
}

class Pipeline {
public:
  Pipeline(InputLines& input, std::vector<std::unique_ptr<DocumentEncoder>>& encoders,
           const PipelineSettings& settings)
      : input_(input),
        encoders_(encoders),
        settings_(settings),
        pool_size_(2 * encoders.size() + 2),
        slots_(pool_size_, nullptr) {
    batches_.reserve(pool_size_);
    for (std::size_t i = 0; i < pool_size_; ++i) {
      batches_.push_back(std::make_unique<LineBatch>());
      batches_.back()->encoded.resize(encoders.empty() ? 0 : encoders.front()->key_count());
      free_.push_back(batches_.back().get());
    }
    input_.set_cancel_flag(&stop_);
  }

  ~Pipeline() { input_.set_cancel_flag(nullptr); }

  void run(const std::function<void(const LineBatch&)>& consume) {
    std::vector<std::thread> threads;
    std::exception_ptr failure;
    try {
      threads.emplace_back([this] { read_loop(); });
      for (auto& encoder : encoders_) threads.emplace_back([this, &encoder] { work_loop(*encoder); });
      consume_loop(consume);
    } catch (...) {
      failure = std::current_exception();
    }
    stop();
    for (auto& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
  }

private:
  void stop() {
    std::lock_guard lock(mutex_);
    stop_ = true;
    free_cv_.notify_all();
    work_cv_.notify_all();
    done_cv_.notify_all();
  }

  LineBatch* take_free() {
    std::unique_lock lock(mutex_);
    free_cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
    if (stop_) return nullptr;
    LineBatch* b = free_.back();
    free_.pop_back();
    return b;
  }

  void read_loop() {
    std::uint64_t sequence = 0;
    InputLine line;
    bool end = false;
    while (!end) {
      LineBatch* b = take_free();
      if (b == nullptr) return;
      try {
        for (;;) {
          if (stop_.load(std::memory_order_relaxed)) return;
          if (!input_.next(line)) {
            end = true;
            break;
          }
          b->lines.push_back({b->text.size(), line.text.size(), line.number, line.file_index});
          b->text.append(line.text);
          b->stream_bytes += line.stream_bytes;
          if (b->text.size() >= settings_.batch_bytes || b->lines.size() >= settings_.max_batch_lines)
            break;
        }
      } catch (...) {
        b->failure = std::current_exception();
        end = true;
      }
      b->stored_position = input_.stored_bytes_read();
      std::lock_guard lock(mutex_);
      if (b->lines.empty() && !b->failure) {
        free_.push_back(b);
      } else {
        b->sequence = sequence++;
        work_.push_back(b);
        work_cv_.notify_one();
      }
      if (end) {
        batch_count_ = sequence;
        reader_done_ = true;
        work_cv_.notify_all();
        done_cv_.notify_all();
      }
    }
  }

  void work_loop(DocumentEncoder& encoder) {
    for (;;) {
      LineBatch* b = nullptr;
      {
        std::unique_lock lock(mutex_);
        work_cv_.wait(lock, [&] { return stop_ || !work_.empty() || reader_done_; });
        if (stop_ || work_.empty()) return;
        b = work_.front();
        work_.pop_front();
      }
      if (!b->failure) {
        try {
          encode(encoder, *b);
        } catch (...) {
          b->failure = std::current_exception();
        }
      }
      std::lock_guard lock(mutex_);
      slots_[b->sequence % pool_size_] = b;
      done_cv_.notify_all();
    }
  }

  void encode(DocumentEncoder& encoder, LineBatch& b) {
    for (std::size_t i = 0; i < b.lines.size(); ++i) {
      try {
        encoder.encode(b.line_text(i), b.encoded);
      } catch (const Error& e) {
        b.bad_lines.push_back({i, e.what()});
        if (settings_.stop_at_bad_line) return;
      }
    }
  }

  void consume_loop(const std::function<void(const LineBatch&)>& consume) {
    for (std::uint64_t next = 0;; ++next) {
      if (settings_.poll) settings_.poll();
      LineBatch* b = nullptr;
      {
        std::unique_lock lock(mutex_);
        std::size_t slot = next % pool_size_;
        auto ready = [&] {
          return stop_ || slots_[slot] != nullptr || (reader_done_ && next >= batch_count_);
        };
        if (!settings_.poll) {
          done_cv_.wait(lock, ready);
        } else {
          while (!done_cv_.wait_for(lock, settings_.poll_interval, ready)) {
            lock.unlock();
            settings_.poll();
            lock.lock();
          }
        }
        if (stop_) throw Error("tokenization stopped");
        if (slots_[slot] == nullptr) return;  // every batch consumed
        b = slots_[slot];
        slots_[slot] = nullptr;
      }
      if (b->failure) std::rethrow_exception(b->failure);
      consume(*b);
      b->clear();
      trim_capacity(*b, settings_.batch_bytes);
      std::lock_guard lock(mutex_);
      free_.push_back(b);
      free_cv_.notify_one();
    }
  }

  InputLines& input_;
  std::vector<std::unique_ptr<DocumentEncoder>>& encoders_;
  PipelineSettings settings_;
  std::size_t pool_size_;
  std::vector<std::unique_ptr<LineBatch>> batches_;

  std::mutex mutex_;
  std::condition_variable free_cv_, work_cv_, done_cv_;
  std::vector<LineBatch*> free_;
  std::deque<LineBatch*> work_;
  std::vector<LineBatch*> slots_;  // finished batches, at sequence % pool_size_
  std::atomic<bool> stop_{false};
  bool reader_done_ = false;
  std::uint64_t batch_count_ = 0;
};

}  // namespace

void run_tokenize_pipeline(InputLines& input, std::vector<std::unique_ptr<DocumentEncoder>>& encoders,
                           const PipelineSettings& settings,
                           const std::function<void(const LineBatch&)>& consume) {
  if (encoders.empty()) throw Error("internal error: no encoder for the tokenize pipeline");
  Pipeline(input, encoders, settings).run(consume);
}

}  // namespace mgt
