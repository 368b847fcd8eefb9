// The hand-over between the server's HTTP threads and the one thread that owns the model: an
// HTTP thread queues a request and waits on its future; the model's thread takes every request
// waiting at once (up to a number of prompts), so requests that arrive while a batch runs are
// generated together in the next one.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "generate/server_request.hpp"

namespace mgt {

struct ServerReply {
  int status = 200;
  std::string body;  // JSON
  int64_t batch_requests = 0;  // requests generated in the same batch, this one included (for the log)
};

struct PendingRequest {
  ServerRequest request;
  uint64_t number = 0;  // 0, 1, … in order of arrival
  std::promise<ServerReply> reply;
};

class RequestQueue {
public:
  // max_prompts: a batch takes more requests only while their prompts stay within it.
  explicit RequestQueue(int64_t max_prompts);
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;

  // After close(), the future holds a 503 reply at once.
  std::future<ServerReply> submit(ServerRequest request);

  // Blocks until a request waits or the queue is closed. Returns the oldest waiting request and
  // those after it while the prompts fit in max_prompts (the first always comes, however many
  // prompts it has); empty once the queue is closed and nothing waits.
  std::vector<PendingRequest> next_batch();

  // No more requests are taken; those waiting are still handed out by next_batch.
  void close();

private:
  const int64_t max_prompts_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<PendingRequest> waiting_;
  uint64_t next_number_ = 0;
  bool closed_ = false;
};

}  // namespace mgt
