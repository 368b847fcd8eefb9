// Micro-batches read ahead on a background thread, so that the training loop never waits on
// the dataset: each rank's micro-batches in the order of Megatron's sampler (train/sample_order.hpp),
// from the consumed-samples count, produced into a bounded queue. With the single sampler, and with
// the cyclic one without data sharding, the ranks' micro-batches together are the one-rank run's.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/gpt_sample.hpp"
#include "model/gpt_model.hpp"
#include "train/sample_order.hpp"

namespace mgt {

// One micro-batch in host memory, batch-major ([b, s] each), owning what MicroBatch views.
struct HostMicroBatch {
  std::int64_t first_sample = 0;  // split index of its first sample
  std::int64_t batch_size = 0;
  std::int64_t seq_length = 0;
  std::vector<std::int64_t> tokens;
  std::vector<std::int64_t> labels;
  std::vector<std::int64_t> position_ids;
  std::vector<float> loss_mask;

  MicroBatch view() const;
};

// The samples of `reader` at `indices`, one micro-batch.
HostMicroBatch read_samples(const SplitSampleReader& reader, const std::vector<std::int64_t>& indices);
// Samples [first, first + batch_size) of `reader`. With `wrap` an index past the end starts over
// from sample 0; without it, running out is an mgt::Error naming `split_name`.
HostMicroBatch read_micro_batch(const SplitSampleReader& reader, std::int64_t first, std::int64_t batch_size,
                                bool wrap, const std::string& split_name);

class BatchPrefetcher {
public:
  struct Settings {
    std::int64_t start_sample = 0;      // consumed samples of the split so far
    std::int64_t micro_batch_size = 1;
    std::int64_t data_parallel_size = 1;
    std::int64_t data_parallel_rank = 0;
    std::size_t capacity = 4;           // micro-batches read ahead
    bool wrap = false;                  // see read_micro_batch (the single sampler)
    bool cyclic = false;                // --dataloader-type cyclic
    bool data_sharding = true;          // not --no-data-sharding
    std::string split_name = "train";   // for messages
  };

  BatchPrefetcher(std::shared_ptr<const SplitSampleReader> reader, Settings settings);
  ~BatchPrefetcher();  // stops and joins the reader thread
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next micro-batch in sampler order; waits only if the reader thread is behind. An error
  // met by the reader is rethrown here when its micro-batch is reached.
  HostMicroBatch next();

private:
  void produce(std::stop_token stop);

  std::shared_ptr<const SplitSampleReader> reader_;
  Settings settings_;
  SampleOrder order_;  // used by the reader thread only
  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<HostMicroBatch> queue_;
  std::exception_ptr error_;
  std::jthread thread_;  // last: started once everything it uses exists
};

}  // namespace mgt
