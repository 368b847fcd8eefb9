#include "train/batch_prefetcher.hpp"

#include "core/error.hpp"

namespace mgt {

MicroBatch HostMicroBatch::view() const {
  MicroBatch b;
  b.batch_size = batch_size;
  b.seq_length = seq_length;
  b.tokens = tokens;
  b.labels = labels;
  b.position_ids = position_ids;
  b.loss_mask = loss_mask;
  return b;
}

HostMicroBatch read_samples(const SplitSampleReader& reader, const std::vector<std::int64_t>& indices) {
  HostMicroBatch out;
  out.first_sample = indices.empty() ? 0 : indices.front();
  out.batch_size = static_cast<std::int64_t>(indices.size());
  for (const std::int64_t index : indices) {
    GptSample sample = reader.get(static_cast<std::size_t>(index));
    if (out.tokens.empty()) out.seq_length = static_cast<std::int64_t>(sample.tokens.size());
    out.tokens.insert(out.tokens.end(), sample.tokens.begin(), sample.tokens.end());
    out.labels.insert(out.labels.end(), sample.labels.begin(), sample.labels.end());
    out.position_ids.insert(out.position_ids.end(), sample.position_ids.begin(), sample.position_ids.end());
    out.loss_mask.insert(out.loss_mask.end(), sample.loss_mask.begin(), sample.loss_mask.end());
  }
  return out;
}

HostMicroBatch read_micro_batch(const SplitSampleReader& reader, std::int64_t first, std::int64_t batch_size,
                                bool wrap, const std::string& split_name) {
  SampleOrderSettings s;
  s.split_samples = static_cast<std::int64_t>(reader.size());
  s.micro_batch_size = batch_size;
  s.wrap = wrap;
  s.split_name = split_name;
  return read_samples(reader, SampleOrder(s).micro_batch(first));
}

namespace {

SampleOrderSettings sample_order_settings(const SplitSampleReader* reader, const BatchPrefetcher::Settings& p) {
  if (!reader) throw Error("internal error: a batch prefetcher without a sample reader");
  SampleOrderSettings s;
  s.split_samples = static_cast<std::int64_t>(reader->size());
  s.micro_batch_size = p.micro_batch_size;
  s.data_parallel_size = p.data_parallel_size;
  s.data_parallel_rank = p.data_parallel_rank;
  s.cyclic = p.cyclic;
  s.data_sharding = p.data_sharding;
  s.wrap = p.wrap;
  s.split_name = p.split_name;
  return s;
}

}  // namespace

BatchPrefetcher::BatchPrefetcher(std::shared_ptr<const SplitSampleReader> reader, Settings settings)
    : reader_(std::move(reader)),
      settings_(std::move(settings)),
      order_(sample_order_settings(reader_.get(), settings_)) {
  if (settings_.capacity == 0 || settings_.start_sample < 0)
    throw Error("internal error: bad batch prefetcher settings");
  thread_ = std::jthread([this](std::stop_token stop) { produce(stop); });
}

BatchPrefetcher::~BatchPrefetcher() {
  thread_.request_stop();
  changed_.notify_all();
}

void BatchPrefetcher::produce(std::stop_token stop) {
  const std::int64_t chunk = settings_.micro_batch_size * settings_.data_parallel_size;
  std::int64_t consumed = settings_.start_sample;
  while (!stop.stop_requested()) {
    HostMicroBatch batch;
    try {
      batch = read_samples(*reader_, order_.micro_batch(consumed));
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    consumed += chunk;
    std::unique_lock lock(mutex_);
    if (!changed_.wait(lock, stop, [&] { return queue_.size() < settings_.capacity; })) return;
    queue_.push_back(std::move(batch));
    changed_.notify_all();
  }
}

HostMicroBatch BatchPrefetcher::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !queue_.empty() || error_; });
  if (queue_.empty()) std::rethrow_exception(error_);
  HostMicroBatch batch = std::move(queue_.front());
  queue_.pop_front();
  changed_.notify_all();
  return batch;
}

}  // namespace mgt
