// The model's side of the server: answers a batch of queued requests with one generator. Each
// request's prompts become rows with the request's own settings, so requests with different
// sampling parameters share the model's passes; the rows run in chunks of at most
// max_batch_rows (the --micro-batch-size the memory check allowed for). A request that cannot
// be generated (a prompt too long for the model's positions, a top_k above the vocabulary) gets
// its own 400 answer and leaves the others alone.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "generate/generator.hpp"
#include "generate/request_queue.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

class BatchAnswerer {
public:
  // seed: the random stream of a request without random_seed is fixed by this seed and the
  // request's number, so a server run answers the same requests the same way.
  BatchAnswerer(Generator& generator, const Tokenizer& tokenizer, uint64_t seed, int64_t max_batch_rows);

  // Sets every request's reply; never throws (a failure of the model becomes a 500 reply).
  void answer(std::span<PendingRequest> batch);

private:
  Generator* generator_;
  const Tokenizer* tokenizer_;
  uint64_t seed_;
  int64_t max_batch_rows_;
};

}  // namespace mgt
