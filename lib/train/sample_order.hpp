// Which samples of a split each data-parallel rank reads, micro-batch by micro-batch, as
// Megatron's samplers choose them (megatron/training/datasets/data_samplers.py), from the
// samples all ranks have consumed so far: so a resumed run reads what the uninterrupted one would.
//   single (MegatronPretrainingSampler): the split in order, in chunks of micro_batch × data-
//     parallel size; rank r takes samples [r·micro, (r+1)·micro) of each chunk.
//   cyclic (MegatronPretrainingRandomSampler, read again and again as Megatron's cyclic_iter
//     does): epoch e covers the split's first `active` samples' worth of micro-batches (the split
//     less its remainder modulo micro × data-parallel size) in an order drawn with
//     torch.randperm seeded by e (data/torch_randperm.hpp). With data sharding (Megatron's
//     default) rank r shuffles its own contiguous share, samples [r·share, (r+1)·share) with share
//     = active / data-parallel size, and reads it in that order; without, one order over the
//     split's whole micro-batches is dealt to the ranks in turn, element by element.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mgt {

struct SampleOrderSettings {
  std::int64_t split_samples = 0;  // the split's samples (len(dataset))
  std::int64_t micro_batch_size = 1;
  std::int64_t data_parallel_size = 1;
  std::int64_t data_parallel_rank = 0;
  bool cyclic = false;         // --dataloader-type cyclic
  bool data_sharding = true;   // not --no-data-sharding (cyclic only)
  bool wrap = false;           // single: an index past the end reads from sample 0 again
  std::string split_name = "train";  // for messages
};

class SampleOrder {
public:
  explicit SampleOrder(SampleOrderSettings settings);

  // This rank's micro-batch after `consumed` samples of every rank (a multiple of micro × data-
  // parallel size): its samples' indices in the split. mgt::Error naming the split when a single
  // order without wrap runs out, or a cyclic one has less than one micro-batch per rank.
  std::vector<std::int64_t> micro_batch(std::int64_t consumed);

private:
  std::vector<std::int64_t> single(std::int64_t consumed) const;
  std::vector<std::int64_t> cyclic(std::int64_t consumed);

  SampleOrderSettings s_;
  std::int64_t epoch_ = -1;                 // of permutation_
  std::vector<std::int64_t> permutation_;  // the epoch's order (this rank's share's, when sharded)
};

}  // namespace mgt
