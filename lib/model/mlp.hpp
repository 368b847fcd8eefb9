// Megatron's MLP block: linear_fc1 (h → f, or h → 2f = [gate | up] with SwiGLU), the activation
// (GELU, tanh GELU or SwiGLU), linear_fc2 (f → h). Under tensor parallelism linear_fc1 is
// column-parallel and linear_fc2 row-parallel: each rank holds f/tp features, for SwiGLU its
// gate and up halves as one [gate_rank ; up_rank] shard, so the activation pairs them locally.
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/forward_context.hpp"
#include "model/gpt_parameters.hpp"
#include "model/parallel_linear.hpp"
#include "model/tensor_parallel_mappings.hpp"

namespace mgt {

struct MlpActivations {
  FloatView fc1_output;         // [s, b, fc1 features], the activation's input
  FloatView activation_output;  // [s, b, ffn]; not used where fp8_mlp_gelu_in_fc2_casts
};

// Whether an MLP of `activation` under `fp8` (null: not in FP8) never writes its activation's
// output: with the tanh GELU and FP8 weight gradients, fc1 runs without the GELU and fc2's casts
// of its input apply it (Transformer Engine fuses the GELU into the cast to FP8 likewise), so
// neither the forward nor the backward reads or keeps that [s, b, ffn] tensor.
bool fp8_mlp_gelu_in_fc2_casts(Activation activation, const Fp8Recipe* fp8);

struct MlpScratch {
  FloatView d_activation;  // [s, b, ffn]
  FloatView d_fc1;         // [s, b, fc1 features]
  SequenceParallelScratch sequence;  // under sequence parallelism (forward and backward)
};

class Mlp {
public:
  // `tp` must outlive the block.
  // With `fp8`, linear_fc1 and linear_fc2 compute in FP8 (LinearLayer).
  Mlp(GptParameters& params, int64_t layer, const TensorParallelMappings& tp, Fp8Training* fp8 = nullptr);

  int64_t ffn() const { return ffn_; }  // local
  int64_t fc1_size() const { return fc1_.out_features(); }
  const ColumnParallelLinear& fc1() const { return fc1_; }

  // Under sequence parallelism output is this rank's [s/tp, b, h] slice, and input the whole
  // [s, b, h] tensor of which only this rank's rows are filled: the forward all-gathers the
  // others' into it, and the backward reads it as the forward left it.
  // With `addend`, output's last addend may be left unadded (RowParallelLinear::forward).
  void forward(const ForwardContext& ctx, FloatView input, const MlpActivations& saved,
               const MlpScratch& scratch, FloatView output, ConstFloatView* addend = nullptr) const;
  // With `fc1_weight_later` (sequence parallelism), fc1's weight gradient is left there for the
  // caller to run beside a later collective (the attention projection's all-gather), and fc2's
  // runs beside fc1's input-gradient reduce-scatter: the collective that each layer's own weight
  // gradient hid before.
  void backward(const ForwardContext& ctx, FloatView input, const MlpActivations& saved,
                const MlpScratch& scratch, ConstFloatView d_output, FloatView d_input,
                DeferredGemm* fc1_weight_later = nullptr) const;

private:
  Backend* backend_;
  Activation activation_;
  int64_t ffn_;
  ColumnParallelLinear fc1_;
  RowParallelLinear fc2_;
  bool gelu_in_fc2_casts_;
};

}  // namespace mgt
