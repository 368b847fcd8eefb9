// --fp8-param-gather (megatron/core/fp8_utils.py quantize_param_shard, megatron/core/distributed/
// param_and_grad_buffer.py with fp8 parameters): the distributed optimizer's all-gather of the
// updated weights moves the FP8 linear layers' weights as FP8 codes, one byte per element, and
// every other parameter in the precision the model computes with.
//
// After the step, each data-parallel rank casts its shard of every FP8 weight straight from the
// fp32 weights with the weight's current delayed-scaling scale (the same on every rank: the
// scales follow amaxes reduced over the ranks), taking the part's amax into the weight's newest
// history entry; the next training forward's reduction (max over the tensor- and data-parallel
// ranks, Fp8Training) makes that the whole weight's amax, as Transformer Engine reduces it. The
// codes are all-gathered into one buffer that holds every FP8 weight in the order of the flat
// parameter buffer (each rank's part of it contiguous, as its shard is), which the layers' FP8
// copies then read in place (Fp8Training::WeightCopy); the transposed copies the backward reads
// are derived from them. The rest of the buffer — embeddings, norms, biases, the output layer,
// layers kept in bf16 — is gathered run by run between the FP8 weights: their compute copy (bf16
// or fp16, which the optimizer's step wrote beside its shard of the weights) where there is one
// and the forward reads nothing else, as Megatron gathers its bf16 parameters, else the fp32
// weights.
//
// The other shards' fp32 values then stay behind (of the FP8 weights; of all weights where the
// compute copy was gathered), and the FP8 copies are pinned (nothing casts them again from the
// stale weights) until catch_up() gathers the fp32 weights, where something reads them (a
// checkpoint, the parameter norm, the end of training).
#pragma once
#include <cstdint>
#include <vector>

#include "dist/buffer_shards.hpp"
#include "dist/communicator.hpp"
#include "model/fp8_training.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

class Fp8ParamGather {
public:
  // The FP8 linear layers of `fp8` whose weights lie in `region` of params' buffer, gathered over
  // `group` (the distributed optimizer's: each rank's shard of the region as data_parallel_shard
  // lays it out). All of them must outlive this.
  Fp8ParamGather(GptParameters& params, Fp8Training& fp8, dist::Communicator& group, BufferShard region);
  Fp8ParamGather(const Fp8ParamGather&) = delete;
  Fp8ParamGather& operator=(const Fp8ParamGather&) = delete;

  // After the optimizer updated this rank's shard of the fp32 weights: casts its part of each FP8
  // weight, all-gathers the codes and derives the transposed copies (the copies are pinned).
  void gather_fp8_weights();
  // Starts the all-gathers of the rest of [begin, end) ∩ the region in `values` (the fp32
  // weights, or their compute copy), into `pending`.
  void start_other_gathers(FloatView values, std::int64_t begin, std::int64_t end,
                           std::vector<dist::PendingCollective>& pending);
  // The whole step's all-gather, without overlap: gather_fp8_weights, then the rest of the
  // compute copy (marked fresh) or of the fp32 weights.
  void gather();
  // The bytes of one element of the rest as the step's gather moves it: 2 for a bf16 or fp16
  // compute copy, 4 for the fp32 weights.
  std::int64_t other_element_bytes() const { return gathers_compute_copy_ ? 2 : 4; }
  // Whether the fp32 values of other ranks' shards are behind on this rank.
  bool behind() const { return behind_; }
  // Gathers the region's fp32 weights (all of them, as the optimizer gathers them without this
  // flag) and unpins the copies: their codes stay those of this step.
  void catch_up();
  // The same, for a caller that gathered the whole region's fp32 weights itself.
  void caught_up();

  // What one step's all-gather moves (every rank's part together): elements of FP8 weights (one
  // byte each) and of the rest of the region.
  std::int64_t fp8_elements() const { return codes_.size(); }
  std::int64_t other_elements() const { return region_.size() - codes_.size(); }
  // Weights gathered in FP8.
  std::int64_t fp8_weights() const { return static_cast<std::int64_t>(weights_.size()); }

private:
  struct Weight {
    std::int64_t linear = 0;       // Fp8Training's index
    std::int64_t offset = 0;       // in the flat buffer
    std::int64_t numel = 0;
    std::int64_t code_offset = 0;  // in codes_
  };
  // counts[r]: the elements of [begin, end) in rank r's shard.
  std::vector<std::int64_t> shard_counts(std::int64_t begin, std::int64_t end) const;

  GptParameters* params_;
  Fp8Training* fp8_;
  dist::Communicator* group_;
  BufferShard region_;
  std::vector<BufferShard> shards_;  // every rank's, in buffer positions
  std::vector<Weight> weights_;      // in buffer order
  std::vector<BufferShard> others_;  // the region's runs between the FP8 weights
  DeviceArray<uint8_t> codes_;
  std::vector<std::int64_t> code_counts_;  // each rank's codes
  bool behind_ = false;
  bool gathers_compute_copy_ = false;
};

}  // namespace mgt
