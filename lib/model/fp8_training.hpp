// The FP8 state of one model instance (the whole model, or one pipeline stage), as Transformer
// Engine keeps it per module and Megatron drives it (megatron/core/fp8_utils.py,
// transformer_engine/pytorch/fp8.py FP8GlobalStateManager):
//  - per FP8 linear layer k, two forward tensors (its input, slot 2k, and its weight, 2k+1) and
//    one backward tensor (its output gradient, slot k), each with an amax history and a scale
//    (delayed scaling; under current scaling each cast computes its own);
//  - after each training forward of the layers, the forward tensors' newest amaxes are reduced
//    (max) over the tensor- and data-parallel ranks and every forward scale is updated; after
//    each backward, the same for the backward tensors (TE's reduce_and_update_fp8_tensors at the
//    exit of fp8_autocast and at the end of the backward of the autocast region);
//  - the routed experts' linear layers (MoE layers, one per expert and projection, named by the
//    expert's global number) keep their state apart, after the dense layers', and their amaxes
//    are reduced over the ranks that hold the same expert (set_expert_amax_reduction).
//    Transformer Engine concatenates every module's amaxes and max-reduces the buffer position by
//    position over the one group Megatron gives it (transformer_engine/pytorch/fp8.py
//    reduce_and_update_fp8_tensors; the group is parallel_state.get_amax_reduction_group, the
//    tensor x data x context-parallel ranks, megatron/core/fp8_utils.py): under expert
//    parallelism that maxes a rank's local expert j with the other expert-parallel ranks' local
//    expert j, different experts. mgt reduces each expert's amaxes over the ranks that share that
//    expert instead, so that its scales do not depend on the expert-parallel layout (the layouts
//    agree, and a checkpoint's per-expert state means the same after resharding); without expert
//    parallelism the two are the same reduction;
//  - the weights' FP8 copies are made once per optimizer step (TE's is_first_microbatch cache):
//    see LinearLayer; they live here (WeightCopy), where --fp8-param-gather's all-gather
//    (train/fp8_param_gather.hpp) binds them to the gathered codes.
// A linear layer's weight gradient needs its input transposed in FP8 with the scale its forward
// used. TE keeps that transposed copy from the forward; mgt casts it again in the backward from
// the input the layer keeps anyway (bf16/fp16), with the scale its forward used: a training
// forward snapshots the forward scales for its micro-batch slot, and that slot's backward casts
// with the snapshot. Same codes as TE's, without keeping an extra FP8 copy of every input.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "model/fp8_recipe.hpp"

namespace mgt {

class Fp8Training {
public:
  // The slot of a whole-model training pass (GptModel::forward_backward); pipeline stages pass
  // their micro-batch slots (0, 1, …).
  static constexpr int64_t kWholeModelSlot = -2;

  // The casts' temporary FP8 copies, one of each kind live at a time.
  enum class Scratch { kInputRows, kInputColumns, kGradRows, kGradColumns };

  // State for `linears` dense FP8 linear layers and `expert_linears` routed experts' ones; the
  // model adds every one of them at its construction.
  Fp8Training(const Fp8Recipe& recipe, Backend& backend, int64_t linears, int64_t expert_linears = 0);

  const Fp8Recipe& recipe() const { return recipe_; }
  // The next FP8 linear layer's index k (each layer takes one at construction, in order; the
  // routed experts' after the dense ones), for the layer `name`
  // ("decoder.layers.3.mlp.linear_fc1"), under which checkpoints keep its state, whose weight is
  // [out, in]. `expert`: a routed expert's (its amaxes reduced by the expert reduction).
  int64_t add_linear(std::string name, int64_t out, int64_t in, bool expert = false);
  // Throws unless every linear layer the state was made for has been added.
  void require_complete() const;
  // Whether linear layer k is a routed expert's.
  bool expert_linear(int64_t k) const { return k >= dense_linears_; }
  const std::string& linear_name(int64_t k) const { return names_.at(static_cast<size_t>(k)); }

  // Linear layer k's weight in FP8, [out, in] and transposed [in, out], made once per optimizer
  // step: cast by the layer from its weight where the parameters changed (LinearLayer), or, under
  // --fp8-param-gather, cast by the optimizer from its shard of the weight and all-gathered, the
  // codes then living in the gather's buffer (train/fp8_param_gather.hpp).
  struct WeightCopy {
    int64_t out = 0;
    int64_t in = 0;
    DeviceArray<uint8_t> own_rows;  // the codes' storage unless bound to a gathered buffer
    DeviceSpan<uint8_t> rows;       // the codes [out, in]
    DeviceArray<uint8_t> columns;   // [in, out]
    DeviceBuffer scale_inv;         // the rows' factor at 0, the columns' at 4 (16-byte aligned)
    uint64_t version = 0;           // GptParameters::params_version() the codes were made at
    bool made = false;
    bool recorded = false;          // made by a training pass, its amax in the history
    // The codes are the only whole copy of the weight (the other ranks' shards of its fp32
    // values not gathered yet): nothing casts the weight again until they are.
    bool pinned = false;
  };
  WeightCopy& weight_copy(int64_t k) { return weights_.at(static_cast<size_t>(k)); }
  // The scaling of a cast of part of linear layer k's weight by the optimizer (--fp8-param-gather):
  // the weight's current scale, the part's amax taken into the weight's newest history entry,
  // which the next training forward reduces over the ranks (so that it becomes the whole weight's
  // amax, as a cast of the whole weight there would have recorded it).
  Fp8Scaling weight_part_scaling(int64_t k);

  // Linear layer k's delayed-scaling state on the host, as a checkpoint stores it:
  // forward_history [len, 2] (input, weight), forward_scale [2], backward_history [len],
  // backward_scale [1].
  struct LinearState {
    std::vector<float> forward_history;
    std::vector<float> forward_scale;
    std::vector<float> backward_history;
    std::vector<float> backward_scale;
  };
  // Every layer's state (one read-back of the whole state).
  std::vector<LinearState> read_state();
  // Sets every layer's state; a layer given no state (empty vectors) keeps its own.
  void write_state(const std::vector<LinearState>& state);
  // The FP8 linear layers, dense and experts' (all added once the model is built).
  int64_t linears() const { return linears_; }
  Backend& backend() const { return *backend_; }

  // Max-reduces a view of amaxes over the ranks that share the tensors (the tensor- and
  // data-parallel groups); unset: nothing to reduce (one rank).
  void set_amax_reduction(std::function<void(FloatView)> reduce) { reduce_ = std::move(reduce); }
  // Max-reduces a view of the routed experts' amaxes over the ranks that hold the same experts
  // (expert-tensor- and expert-data-parallel); unset: they are reduced with the dense ones.
  void set_expert_amax_reduction(std::function<void(FloatView)> reduce) { expert_reduce_ = std::move(reduce); }

  // The pass about to run. A training forward snapshots the forward scales for `slot`; an
  // evaluation forward casts with the current scales and records nothing.
  void begin_forward(int64_t slot, bool training);
  void begin_backward(int64_t slot);
  // After the layers' training forward / backward: amaxes reduced and scales updated (delayed
  // scaling; nothing to do under current scaling).
  void finish_forward();
  void finish_backward();
  bool recording() const { return recording_; }

  // The scaling of each cast of linear layer k (see Fp8Scaling).
  Fp8Scaling input_scaling(int64_t k);             // its input, in the forward
  Fp8Scaling input_rescaling(int64_t k);           // the same input again, in the backward
  Fp8Scaling weight_scaling(int64_t k);            // its weight, once per step
  Fp8Scaling grad_scaling(int64_t k, Scratch into);  // its output gradient

  // A scratch FP8 tensor of `elements` codes in `format` with its own scale_inv: the current
  // lane's (set_lane).
  Fp8View scratch(Scratch which, int64_t elements, Fp8Format format);
  // The scratch (and, under current scaling, the amaxes and scales of the casts into it) that
  // scratch() and the scalings hand out from now on: lane `lane` of Backend::side_by_side, whose
  // items run side by side with the other lanes' (0 outside it). Each lane's is its own.
  void set_lane(int64_t lane);
  int64_t lanes() const { return lanes_; }

  // Linear layer k's input transposed in FP8, as Transformer Engine keeps it: a training forward
  // that casts the layer's whole input casts it into both layouts at once (one pass) and keeps
  // this copy for the weight gradient of the same micro-batch slot, which then need not read the
  // input and cast it again. `elements`: the input's rows · in. Empty where nothing is kept (not
  // a training pass, or set_keep_input_columns(false)). The storage is the slot's own, made at
  // its first use.
  Fp8View keep_input_columns(int64_t k, int64_t elements);
  // What this slot's forward kept for layer k, where it kept `elements` codes (empty otherwise:
  // the backward casts the input again); handed out once.
  ConstFp8View take_input_columns(int64_t k, int64_t elements);
  // Off under full recomputation, whose point is to keep less than every layer's inputs.
  void set_keep_input_columns(bool keep) { keep_input_columns_ = keep; }

  // The state a checkpoint keeps, fp32: forward histories [len, 2·linears], forward scales
  // [2·linears], backward histories [len, linears], backward scales [linears].
  FloatView forward_history() { return forward_history_; }
  FloatView forward_scale() { return forward_scale_; }
  FloatView backward_history() { return backward_history_; }
  FloatView backward_scale() { return backward_scale_; }

private:
  // Per scratch kind: scale_inv, and the scale and amax of a current-scaling cast.
  FloatView scratch_meta(Scratch which, int64_t field);
  // `per_linear` tensors of each linear layer in history's rows (2 forward, 1 backward).
  void reduce_and_update(FloatView history, FloatView scale, int64_t per_linear, Fp8Format format);

  Fp8Recipe recipe_;
  Backend* backend_;
  int64_t linears_;
  int64_t dense_linears_;
  int64_t added_dense_ = 0;
  int64_t added_experts_ = 0;
  std::vector<std::string> names_;
  std::vector<WeightCopy> weights_;  // sized once: the layers keep references
  DeviceBuffer meta_;
  FloatView forward_history_;
  FloatView forward_scale_;
  FloatView backward_history_;
  FloatView backward_scale_;
  FloatView scratch_meta_;
  // Each lane's scratch codes, by kind ([lane · 4 + kind]); its metadata in scratch_meta_ alike.
  int64_t lanes_;
  int64_t lane_ = 0;
  std::vector<DeviceArray<uint8_t>> scratch_;
  std::map<int64_t, DeviceBuffer> snapshots_;
  struct KeptColumns {
    DeviceArray<uint8_t> codes;
    DeviceBuffer scale_inv;
    bool kept = false;
  };
  std::map<std::pair<int64_t, int64_t>, KeptColumns> kept_columns_;  // by (slot, layer)
  int64_t slot_ = kWholeModelSlot;                                    // of the pass running
  bool keep_input_columns_ = true;
  FloatView bound_forward_scale_;  // the scales this pass casts inputs with
  bool recording_ = false;          // a training pass: forward or backward
  bool recording_forward_ = false;  // a training forward, not one rerun in the backward
  std::function<void(FloatView)> reduce_;
  std::function<void(FloatView)> expert_reduce_;
};

}  // namespace mgt
