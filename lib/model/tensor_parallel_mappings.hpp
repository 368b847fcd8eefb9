// The communication of tensor and sequence parallelism, written once as named forward/backward
// pairs: Megatron's megatron/core/tensor_parallel/mappings.py, whose autograd Functions become
// explicit *_forward / *_backward methods here. A layer calls the forward half in its forward and
// the matching backward half, in reverse order, in its backward; the parallel linears
// (parallel_linear.hpp), the vocab-parallel embedding and cross-entropy are built from them.
//
//   pair                                   forward                      backward
//   copy_to_tensor_region                  identity                     all-reduce
//   reduce_from_tensor_region              all-reduce                   identity
//   scatter_to_tensor_region               split the last dim          all-gather the last dim
//   gather_from_tensor_region              all-gather the last dim     split the last dim
//   scatter_to_sequence_parallel_region    split the first dim         all-gather the first dim
//   gather_from_sequence_parallel_region   all-gather the first dim    reduce-scatter the first dim
//   reduce_scatter_to_sequence_parallel_region  reduce-scatter (first)  all-gather the first dim
//
// "First dim" is the token dimension of the sequence-major [s, b, …] activations: the rows of
// rank r are tokens [r·s/tp, (r+1)·s/tp) of every sequence, one contiguous block. The buffers are
// the backend's memory and go to the communicator as DeviceSpans (the communicator stages them
// through its MemoryMover when its transport cannot read them in place). The group orders each
// collective with the backend's operations (communicator.hpp: MPI stages through the backend's
// own copies, NCCL is queued on the backend's stream), so nothing here synchronises the backend.
// Without a group, or with a group of one, every pair is the identity and nothing is
// communicated.
#pragma once
#include <cstdint>

#include "dist/communicator.hpp"
#include <functional>

#include "kernels/backend.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

// How a model instance is split across ranks, as the model's constructor takes it.
struct TensorParallelism {
  // The tensor-model-parallel group (--tensor-model-parallel-size ranks); null: no tensor
  // parallelism. Must outlive the model.
  dist::Communicator* group = nullptr;
  // --sequence-parallel. Ignored without a group of at least two ranks, as Megatron turns it
  // off when --tensor-model-parallel-size is 1.
  bool sequence_parallel = false;
};

// The [s, b, h] buffers of the whole sequence that sequence parallelism needs besides the
// per-rank activations, shared by all layers: the all-gathered input of the output layer (the
// layers' column-parallel inputs are gathered into saved buffers of their own), and a
// row-parallel layer's output before its reduce-scatter (or a gradient after its all-gather, or
// before its reduce-scatter). `input_grad` takes fc1's input gradient before its
// reduce-scatter, so that fc2's all-gathered output gradient in `whole` outlives it for fc2's
// deferred weight gradient (Mlp::backward). Empty without sequence parallelism.
struct SequenceParallelScratch {
  FloatView gathered;
  FloatView whole;
  FloatView input_grad;
};

class TensorParallelMappings {
public:
  // `group` may be null (no tensor parallelism); both must outlive the mappings.
  TensorParallelMappings(Backend& backend, dist::Communicator* group);

  int64_t size() const { return size_; }
  int64_t rank() const { return rank_; }
  // Whether there is anything to communicate (a group of two or more ranks).
  bool active() const { return group_ != nullptr; }
  TensorParallelRank tensor_parallel_rank() const { return {size_, rank_}; }
  Backend& backend() const { return *backend_; }

  // Offers the group a whole-sequence buffer that its collectives will move (a backend buffer
  // that can be shared, allocated for as long as it is offered): between the GPUs of one
  // machine they then run on the copy engines, reading the other ranks' copies directly
  // (dist/nccl_peer_copy.hpp), and leave the multiprocessors to the GEMMs beside them.
  // Collective; returns whether the group took it. unshare() takes it back before it is freed.
  bool share(FloatView buffer) const;
  void unshare(FloatView buffer) const;

  // A plain all-reduce over the group, in place (sequence-parallel gradients).
  void all_reduce(FloatView x, dist::ReduceOp op) const;
  // A plain all-gather over the group: whole = every rank's `local` in rank order; in place
  // when local is this rank's part of whole (the vocab-parallel cross-entropy's statistics).
  void all_gather(ConstFloatView local, FloatView whole) const;

  // ---- copy_to_tensor_model_parallel_region: the input of a column-parallel layer ----
  ConstFloatView copy_to_tensor_region_forward(ConstFloatView x) const { return x; }
  void copy_to_tensor_region_backward(FloatView grad) const;  // all-reduce in place

  // ---- reduce_from_tensor_model_parallel_region: the output of a row-parallel layer ----
  void reduce_from_tensor_region_forward(FloatView x) const;  // all-reduce in place
  ConstFloatView reduce_from_tensor_region_backward(ConstFloatView grad) const { return grad; }

  // ---- scatter_to_tensor_model_parallel_region: whole [rows, size·cols] ↔ local [rows, cols] ----
  void scatter_to_tensor_region_forward(ConstFloatView whole, int64_t rows, FloatView local) const;
  void scatter_to_tensor_region_backward(ConstFloatView d_local, int64_t rows,
                                         FloatView d_whole) const;

  // ---- gather_from_tensor_model_parallel_region: local [rows, cols] ↔ whole [rows, size·cols] ----
  void gather_from_tensor_region_forward(ConstFloatView local, int64_t rows,
                                         FloatView whole) const;
  void gather_from_tensor_region_backward(ConstFloatView d_whole, int64_t rows,
                                          FloatView d_local) const;

  // ---- scatter_to_sequence_parallel_region: whole [s, b, …] ↔ this rank's [s/size, b, …] ----
  void scatter_to_sequence_parallel_region_forward(ConstFloatView whole, FloatView local) const;
  void scatter_to_sequence_parallel_region_backward(ConstFloatView d_local,
                                                    FloatView d_whole) const;

  // ---- gather_from_sequence_parallel_region: the input of a column-parallel layer under
  // sequence parallelism ----
  void gather_from_sequence_parallel_region_forward(ConstFloatView local, FloatView whole) const;
  void gather_from_sequence_parallel_region_backward(ConstFloatView d_whole,
                                                     FloatView d_local) const;
  // The same two, started now and complete at the handle's wait(), for a backward that computes
  // beside them (Megatron's LinearWithGradAccumulationAndAsyncCommunication): nothing may touch
  // the buffers until then, and no other collective of the group may run in between.
  dist::PendingCollective start_gather_from_sequence_parallel_region_forward(ConstFloatView local,
                                                                             FloatView whole) const;
  dist::PendingCollective start_gather_from_sequence_parallel_region_backward(ConstFloatView d_whole,
                                                                              FloatView d_local) const;

  // ---- reduce_scatter_to_sequence_parallel_region: the output of a row-parallel layer under
  // sequence parallelism ----
  void reduce_scatter_to_sequence_parallel_region_forward(ConstFloatView whole,
                                                          FloatView local) const;
  void reduce_scatter_to_sequence_parallel_region_backward(ConstFloatView d_local,
                                                           FloatView d_whole) const;
  // Its backward's all-gather started now, complete at the handle's wait() (as above).
  dist::PendingCollective start_reduce_scatter_to_sequence_parallel_region_backward(ConstFloatView d_local,
                                                                                    FloatView d_whole) const;
  // Its forward for a product computed block by block, so that the reduction runs beside the
  // GEMMs (Transformer Engine's pipelined reduce-scatter): `product(b, out)` writes this rank's
  // partial product of rank b's rows into out [rows/tp, cols]. The blocks go round a ring: rank
  // r computes block r+1 first and sends it to rank r-1, which adds its own product of those
  // rows to it and passes it on while computing its next block; each rank's own block comes
  // last, into `local`, where the sum of the others' arrives. `whole` [rows, cols] is scratch.
  // Block b is summed in ring order (ranks b+1, b+2, …, b), not rank order. With `addend`, the
  // last addition is left to the caller: `local` then holds this rank's own product and
  // *addend (a part of `whole`, valid until the next use of it) the sum of the others', which
  // the caller adds where it reads `local` next (TransformerLayer: in the add-norm and the
  // residual add, one pass over the rows fewer).
  using BlockProduct = std::function<void(int64_t block, FloatView out)>;
  void reduce_scatter_to_sequence_parallel_region_forward(const BlockProduct& product, FloatView local,
                                                          FloatView whole, ConstFloatView* addend = nullptr) const;

private:
  // Throws unless `whole` holds the group's `local` slices ("the whole tensor/gradient has …").
  void require_first_dim(ConstFloatView whole, ConstFloatView local, const char* mapping, const char* what) const;
  // `mapping` names the operation in its errors.
  void all_gather_first_dim(ConstFloatView local, FloatView whole,
                            const char* mapping = "sequence-parallel all-gather") const;
  void split_first_dim(ConstFloatView whole, FloatView local) const;
  void all_gather_last_dim(ConstFloatView local, int64_t rows, FloatView whole) const;
  void split_last_dim(ConstFloatView whole, int64_t rows, FloatView local) const;
  // dst = src, or nothing when they are the same buffer.
  void copy_if_distinct(ConstFloatView src, FloatView dst) const;

  Backend* backend_;
  dist::Communicator* group_;  // null when inactive
  int64_t size_ = 1;
  int64_t rank_ = 0;
};

}  // namespace mgt
