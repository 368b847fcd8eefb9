#include "generate/request_queue.hpp"

#include "generate/server_response.hpp"

namespace mgt {

RequestQueue::RequestQueue(int64_t max_prompts) : max_prompts_(max_prompts < 1 ? 1 : max_prompts) {}

std::future<ServerReply> RequestQueue::submit(ServerRequest request) {
  PendingRequest pending;
  pending.request = std::move(request);
  std::future<ServerReply> reply = pending.reply.get_future();
  {
    std::lock_guard lock(mutex_);
    if (closed_) {
      pending.reply.set_value({503, server_error_json("the server is shutting down")});
      return reply;
    }
    pending.number = next_number_++;
    waiting_.push_back(std::move(pending));
  }
  ready_.notify_one();
  return reply;
}

std::vector<PendingRequest> RequestQueue::next_batch() {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [&] { return closed_ || !waiting_.empty(); });
  std::vector<PendingRequest> batch;
  int64_t prompts = 0;
  while (!waiting_.empty()) {
    const auto size = static_cast<int64_t>(waiting_.front().request.prompts.size());
    if (!batch.empty() && prompts + size > max_prompts_) break;
    prompts += size;
    batch.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return batch;
}

void RequestQueue::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  ready_.notify_all();
}

}  // namespace mgt
