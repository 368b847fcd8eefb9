// The three arrays of Megatron's GPTDataset (spec/megatron.md §4.2–4.6), as pure functions:
// how many epochs a request needs, the shuffled document index, the sample index of
// (document-index position, token offset) rows, and the shuffled sample order.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/npy.hpp"
#include "data/numpy_random.hpp"

namespace mgt {

struct EpochPlan {
  std::int64_t num_epochs = 1;
  bool separate_final_epoch = false;
  // Samples in all epochs but the last; meaningful when separate_final_epoch.
  std::int64_t samples_sans_final_epoch = 0;
};

// Smallest number of epochs whose tokens cover num_samples * seq_length + add_extra (one epoch
// when num_samples is absent), and whether the final epoch is shuffled on its own (it is when it
// contributes fewer than int(0.8 * samples per epoch) samples). tokens_per_epoch must be > 0.
EpochPlan plan_epochs(std::int64_t tokens_per_epoch, std::optional<std::int64_t> num_samples,
                      std::int64_t seq_length, int add_extra_token);

// Refuses (UsageError) a plan whose arrays, at their wider dtypes (an int32 document id per
// document and epoch, the sample index's pairs, the shuffle permutation), need more memory than
// this process may allocate, naming `what` ("the train split of PREFIX") and the flags that size
// it: otherwise the build fails with "out of memory" naming nothing, or the kernel kills it.
void check_index_memory(const std::string& what, std::int64_t documents,
                        std::int64_t tokens_per_epoch, const EpochPlan& plan,
                        std::int64_t seq_length);

// num_epochs copies of `documents` (epoch-major), shuffled as one array; with a separate final
// epoch, the first num_epochs - 1 copies and the last one are shuffled apart, in that order.
std::vector<std::int32_t> build_document_index(std::span<const std::int32_t> documents,
                                               std::int64_t num_epochs, bool separate_final_epoch,
                                               NumpyRandomState& random);

// helpers.cpp build_sample_idx: [num_samples + 1, 2] of int32, or int64 when
// max(len(document_index), max(sizes)) exceeds int32. `sizes` are the lengths of all the
// dataset's sequences.
NpyArray build_sample_index(std::span<const std::int32_t> sizes,
                            std::span<const std::int32_t> document_index, std::int64_t seq_length,
                            std::int64_t num_epochs, std::int64_t tokens_per_epoch,
                            bool drop_last_partial_sequence, int add_extra_token);

// _build_shuffle_index: arange(num_samples) shuffled, then arange(num_samples, total_size)
// shuffled, concatenated; uint32 unless total_size >= 2^32 - 2, then int64.
NpyArray build_shuffle_index(std::int64_t num_samples, std::int64_t total_size,
                             NumpyRandomState& random);

}  // namespace mgt
