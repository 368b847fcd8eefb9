// --fp8-param-gather (megatron/core/fp8_utils.py quantize_param_shard, megatron/core/distributed/
// param_and_grad_buffer.py with fp8 parameters): the distributed optimizer's all-gather of the
// updated weights moves the FP8 linear layers' weights as FP8 codes, one byte per element, and
// every other parameter in the precision the model computes with.
//
// After the step, each data-parallel rank casts its shard of every FP8 weight straight from the
// fp32 weights (Transformer Engine's cast_master_weights_to_fp8,
// transformer_engine/pytorch/tensor/utils.py), with the scale of the whole weight:
//  - delayed scaling (_cast_master_weights_to_fp8_delayed_scaling): the weight's current scale,
//    the same on every rank (the scales follow amaxes reduced over the ranks), taking the part's
//    amax into the weight's newest history entry; the next training forward's reduction (max
//    over the tensor- and data-parallel ranks, Fp8Training) makes that the whole weight's amax,
//    as Transformer Engine reduces it;
//  - current scaling, --fp8-recipe tensorwise (_cast_master_weights_to_fp8_current_scaling):
//    each rank takes the amax of its part of every weight (0 where it holds none), the amaxes are
//    max-all-reduced over the group in one collective, so that every rank holds each whole
//    weight's amax, and the scale follows from it as a current-scaling cast of the whole weight
//    derives it; every rank then casts its part with that scale. The codes are those of a cast of
//    the whole weight on one rank, byte for byte.
// The codes are all-gathered into one buffer that holds every FP8 weight in the order of the flat
// parameter buffer (each rank's part of it contiguous, as its shard is), which the layers' FP8
// copies then read in place (Fp8Training::WeightCopy); the transposed copies the backward reads
// are derived from them once a weight's codes have all arrived (Transformer Engine's
// post_all_gather_processing, which Megatron calls as it finishes a bucket's gather). The codes
// of any range of the buffer can be gathered on their own, so that --overlap-param-gather moves
// them bucket by bucket beside the bucket's other parameters (train/overlapped_data_parallel.hpp).
// The rest of the buffer — embeddings, norms, biases, the output layer, layers kept in bf16 — is
// gathered run by run between the FP8 weights: their compute copy (bf16 or fp16, which the
// optimizer's step wrote beside its shard of the weights) where there is one and the forward
// reads nothing else, as Megatron gathers its bf16 parameters, else the fp32 weights.
//
// The other shards' fp32 values then stay behind (of the FP8 weights; of all weights where the
// compute copy was gathered), and the FP8 copies are pinned (nothing casts them again from the
// stale weights) until catch_up() gathers the fp32 weights, where something reads them (a
// checkpoint, the parameter norm, the end of training).
#pragma once
#include <cstdint>
#include <initializer_list>
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
  // weight (under current scaling after the amaxes' all-reduce) and pins the copies; their codes
  // are whole once start_code_gathers' gathers over the region completed.
  void cast_shard();
  // Starts the all-gathers of the FP8 codes of the weights' elements in [begin, end) (any range;
  // it may cut weights), into `pending`.
  void start_code_gathers(std::int64_t begin, std::int64_t end, std::vector<dist::PendingCollective>& pending);
  // The gathers of every code of the weights lying within [begin, end) completed: derives their
  // transposed copies (of those not derived since cast_shard).
  void codes_arrived(std::int64_t begin, std::int64_t end);
  // FP8 weights whose codes cast_shard cast and codes_arrived has not seen complete yet.
  std::int64_t weights_in_flight() const { return in_flight_; }
  // cast_shard, the gathers of the whole region's codes, waited for, and codes_arrived.
  void gather_fp8_weights();
  // Starts the all-gathers of the rest of [begin, end) ∩ the region in `values` (the fp32
  // weights, or their compute copy), into `pending`.
  void start_other_gathers(FloatView values, std::int64_t begin, std::int64_t end,
                           std::vector<dist::PendingCollective>& pending);
  // The whole step's all-gather, without overlap: gather_fp8_weights, then the rest of the
  // compute copy (marked fresh) or of the fp32 weights.
  void gather();
  // After a checkpoint was loaded (the fp32 weights whole on every rank): each rank casts every
  // whole FP8 weight itself from the fp32 weights, to the codes a cast of the shards and their
  // gather would give (and the amax the next forward reduces), so that a resumed run computes
  // with the codes the uninterrupted one gathered after the step it saved at (a layer would cast
  // the bf16 compute copy instead, which on a GPU can round a code the other way). No
  // collective: nothing on one rank waits for the others.
  void cast_whole_weights();
  // The bytes of one element of the rest as the step's gather moves it: 2 for a bf16 or fp16
  // compute copy, 4 for the fp32 weights.
  std::int64_t other_element_bytes() const { return gathers_compute_copy_ ? 2 : 4; }
  // Whether the fp32 values of other ranks' shards are behind on this rank.
  bool behind() const { return behind_; }
  // Gathers the region's fp32 weights (all of them, as the optimizer gathers them without this
  // flag) and unpins the copies: their codes stay those of this step.
  void catch_up();
  // The same for the gathers of several regions (null ones skipped): every region's fp32 weights
  // first, then the copies unpinned. Each gather of fp32 weights moves the parameters' version
  // on, which would leave the copies of a region caught up before it stale (their layers would
  // cast them again, from the compute copy).
  static void catch_up(std::initializer_list<Fp8ParamGather*> gathers);
  // The same, for a caller that gathered the whole region's fp32 weights itself.
  void caught_up();

  // What one step's all-gather moves (every rank's part together): elements of FP8 weights (one
  // byte each) and of the rest of the region.
  std::int64_t fp8_elements() const { return codes_.size(); }
  std::int64_t other_elements() const { return region_.size() - codes_.size(); }
  // Weights gathered in FP8.
  std::int64_t fp8_weights() const { return static_cast<std::int64_t>(weights_.size()); }
  // The region of the buffer this gathers (the optimizer's region it serves).
  BufferShard region() const { return region_; }

private:
  struct Weight {
    std::int64_t linear = 0;       // Fp8Training's index
    std::int64_t offset = 0;       // in the flat buffer
    std::int64_t numel = 0;
    std::int64_t code_offset = 0;  // in codes_
    bool in_flight = false;        // cast, its transposed copy not derived yet
  };
  // counts[r]: the elements of [begin, end) in rank r's shard.
  std::vector<std::int64_t> shard_counts(std::int64_t begin, std::int64_t end) const;
  // The position in codes_ of buffer position `position` of the region: the FP8 weights'
  // elements before it.
  std::int64_t code_position(std::int64_t position) const;
  // Current scaling: every weight's scale (Fp8Training::weight_scaling's) from the amax of the
  // whole weight, max-reduced over the group from the amaxes of the ranks' parts.
  void reduce_current_scales();

  GptParameters* params_;
  Fp8Training* fp8_;
  dist::Communicator* group_;
  BufferShard region_;
  std::vector<BufferShard> shards_;  // every rank's, in buffer positions
  std::vector<Weight> weights_;      // in buffer order
  std::vector<BufferShard> others_;  // the region's runs between the FP8 weights
  DeviceArray<uint8_t> codes_;
  // Current scaling: the parts' amaxes, one per weight, reduced in one collective; then a scale
  // of 1 the amaxes are taken with, and a scratch code and factor for the casts that derive the
  // scales.
  DeviceBuffer current_meta_;
  DeviceArray<uint8_t> scratch_code_;
  std::int64_t in_flight_ = 0;
  bool behind_ = false;
  bool gathers_compute_copy_ = false;
};

}  // namespace mgt
