#include "data/gpt_index_arrays.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

#include "core/available_memory.hpp"
#include "core/error.hpp"

namespace mgt {

void check_index_memory(const std::string& what, std::int64_t documents,
                        std::int64_t tokens_per_epoch, const EpochPlan& plan,
                        std::int64_t seq_length) {
  auto available = available_host_memory();
  if (!available) return;
  double epochs = static_cast<double>(plan.num_epochs);
  double samples = epochs * static_cast<double>(tokens_per_epoch) / static_cast<double>(seq_length) + 1;
  double bytes = static_cast<double>(documents) * epochs * 4 + (samples + 1) * 16 + samples * 8;
  if (bytes <= static_cast<double>(available->bytes)) return;
  char count[32];
  std::snprintf(count, sizeof count, "%.0f", samples);
  throw UsageError(what + ": " + count + " samples of " + std::to_string(seq_length) +
                   " tokens over " + std::to_string(plan.num_epochs) + " epochs need " +
                   format_bytes(bytes) + " of indices, more than the " +
                   format_bytes(static_cast<double>(available->bytes)) +
                   " this process may allocate (" + available->source +
                   "): check --train-iters or --train-samples, --global-batch-size, --eval-iters "
                   "and --eval-interval");
}

EpochPlan plan_epochs(std::int64_t tokens_per_epoch, std::optional<std::int64_t> num_samples,
                      std::int64_t seq_length, int add_extra_token) {
  if (tokens_per_epoch <= 0) throw Error("cannot plan epochs over zero tokens");
  if (seq_length <= 0) throw Error("sequence length must be positive");
  EpochPlan plan;
  if (!num_samples) return plan;
  if (*num_samples < 0) throw Error("negative number of samples requested");
  if (*num_samples > (std::numeric_limits<std::int64_t>::max() - 1) / seq_length - 1)
    throw Error(std::to_string(*num_samples) + " samples of " + std::to_string(seq_length) +
                " tokens overflow a 64-bit token count");
  std::int64_t requested = *num_samples * seq_length + add_extra_token;
  std::int64_t epochs = requested / tokens_per_epoch + (requested % tokens_per_epoch != 0);
  // Megatron passes the epoch count to its C++ helper as int32.
  if (epochs > std::numeric_limits<std::int32_t>::max())
    throw Error(std::to_string(*num_samples) + " samples of " + std::to_string(seq_length) +
                " tokens need more than 2^31 epochs of " + std::to_string(tokens_per_epoch) +
                " tokens");
  plan.num_epochs = std::max<std::int64_t>(1, epochs);
  if (plan.num_epochs == 1) return plan;
  std::int64_t sans = ((plan.num_epochs - 1) * tokens_per_epoch - add_extra_token) / seq_length;
  std::int64_t from_final = *num_samples - sans;
  std::int64_t per_epoch = (tokens_per_epoch - add_extra_token) / seq_length;
  auto threshold = static_cast<std::int64_t>(0.80 * static_cast<double>(per_epoch));
  plan.separate_final_epoch = from_final < threshold;
  plan.samples_sans_final_epoch = sans;
  return plan;
}

namespace {

void append_shuffled_epochs(std::vector<std::int32_t>& out, std::span<const std::int32_t> documents,
                            std::int64_t epochs, NumpyRandomState& random) {
  std::size_t start = out.size();
  for (std::int64_t e = 0; e < epochs; ++e) out.insert(out.end(), documents.begin(), documents.end());
  random.shuffle(std::span<std::int32_t>(out.data() + start, out.size() - start));
}

}  // namespace

std::vector<std::int32_t> build_document_index(std::span<const std::int32_t> documents,
                                               std::int64_t num_epochs, bool separate_final_epoch,
                                               NumpyRandomState& random) {
  std::vector<std::int32_t> out;
  out.reserve(documents.size() * static_cast<std::size_t>(num_epochs));
  if (!separate_final_epoch || num_epochs == 1) {
    append_shuffled_epochs(out, documents, num_epochs, random);
  } else {
    append_shuffled_epochs(out, documents, num_epochs - 1, random);
    append_shuffled_epochs(out, documents, 1, random);
  }
  return out;
}

namespace {

template <typename T>
NpyArray sample_index_of_type(std::span<const std::int32_t> sizes,
                              std::span<const std::int32_t> document_index, std::int64_t seq_length,
                              std::int64_t num_samples, int add_extra_token) {
  std::vector<T> rows(2 * static_cast<std::size_t>(num_samples + 1));
  std::size_t doc_pos = 0;   // position in document_index
  std::int64_t offset = 0;   // token offset in that sequence
  auto length_at = [&](std::size_t pos) -> std::int64_t {
    auto seq = document_index[pos];
    if (seq < 0 || static_cast<std::size_t>(seq) >= sizes.size())
      throw Error("document index names sequence " + std::to_string(seq) + " of " +
                  std::to_string(sizes.size()));
    return sizes[static_cast<std::size_t>(seq)];
  };
  rows[0] = 0;
  rows[1] = 0;
  for (std::int64_t sample = 1; sample <= num_samples; ++sample) {
    std::int64_t remaining = seq_length + add_extra_token;
    while (remaining != 0) {
      if (doc_pos >= document_index.size()) throw Error("internal error: sample index ran past the document index");
      std::int64_t length = length_at(doc_pos) - offset;
      remaining -= length;
      if (remaining <= 0) {
        // The sample ends inside this sequence; the next one starts add_extra tokens earlier,
        // so consecutive samples share their boundary token.
        offset += remaining + length - add_extra_token;
        remaining = 0;
      } else if (doc_pos + 1 == document_index.size()) {
        offset = length_at(doc_pos) - add_extra_token;
        break;
      } else {
        ++doc_pos;
        offset = 0;
      }
    }
    rows[2 * static_cast<std::size_t>(sample)] = static_cast<T>(doc_pos);
    rows[2 * static_cast<std::size_t>(sample) + 1] = static_cast<T>(offset);
  }
  return NpyArray::from_vector(std::move(rows), {static_cast<std::size_t>(num_samples + 1), 2});
}

}  // namespace

NpyArray build_sample_index(std::span<const std::int32_t> sizes,
                            std::span<const std::int32_t> document_index, std::int64_t seq_length,
                            std::int64_t num_epochs, std::int64_t tokens_per_epoch,
                            bool drop_last_partial_sequence, int add_extra_token) {
  if (seq_length <= 0 || seq_length > std::numeric_limits<std::int32_t>::max() - 1)
    throw Error("sequence length " + std::to_string(seq_length) + " out of range");
  if (sizes.empty()) throw Error("cannot index a dataset without sequences");
  std::int64_t tokens = num_epochs * tokens_per_epoch - add_extra_token;
  std::int64_t num_samples;
  if (drop_last_partial_sequence) {
    num_samples = tokens / seq_length;
  } else {
    // Megatron computes this in single precision.
    num_samples = static_cast<std::int64_t>(
        std::ceil(static_cast<float>(tokens) / static_cast<float>(seq_length)));
  }
  if (num_samples < 0) num_samples = 0;
  std::int64_t largest = std::max<std::int64_t>(static_cast<std::int64_t>(document_index.size()),
                                                *std::max_element(sizes.begin(), sizes.end()));
  if (largest <= std::numeric_limits<std::int32_t>::max())
    return sample_index_of_type<std::int32_t>(sizes, document_index, seq_length, num_samples,
                                              add_extra_token);
  return sample_index_of_type<std::int64_t>(sizes, document_index, seq_length, num_samples,
                                            add_extra_token);
}

namespace {

template <typename T>
NpyArray shuffle_index_of_type(std::int64_t num_samples, std::int64_t total_size,
                               NumpyRandomState& random) {
  std::vector<T> values(static_cast<std::size_t>(total_size));
  std::iota(values.begin(), values.end(), T{0});
  std::span<T> all(values);
  random.shuffle(all.first(static_cast<std::size_t>(num_samples)));
  if (num_samples != total_size) random.shuffle(all.subspan(static_cast<std::size_t>(num_samples)));
  return NpyArray::from_vector(std::move(values), {static_cast<std::size_t>(total_size)});
}

}  // namespace

NpyArray build_shuffle_index(std::int64_t num_samples, std::int64_t total_size,
                             NumpyRandomState& random) {
  if (num_samples < 0 || num_samples > total_size)
    throw Error("internal error: shuffle range [0, " + std::to_string(num_samples) + ") outside [0, " +
                std::to_string(total_size) + ")");
  if (total_size >= static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()) - 1)
    return shuffle_index_of_type<std::int64_t>(num_samples, total_size, random);
  return shuffle_index_of_type<std::uint32_t>(num_samples, total_size, random);
}

}  // namespace mgt
