// Megatron's tensor-parallel linear layers (megatron/core/tensor_parallel/layers.py), built from
// the communication pairs of tensor_parallel_mappings.hpp around a LinearLayer on this rank's
// shard. Rows are tokens of the sequence-major [s, b] grid.
//
// ColumnParallelLinear (linear_qkv, linear_fc1, the output layer): W [out, in] split on dim 0,
// each rank computes its slice of the output features; the bias is split with it. The input
// enters through copy_to_tensor_region (its gradient is all-reduced), or under sequence
// parallelism through gather_from_sequence_parallel_region (the input is this rank's sequence
// slice, all-gathered; its gradient is reduce-scattered). The output stays split
// (gather_output = False, as GPT uses it).
//
// RowParallelLinear (linear_proj, linear_fc2): W [out, in] split on dim 1, the input is already
// split by features (input_is_parallel = True); the partial products leave through
// reduce_from_tensor_region (all-reduce), or under sequence parallelism through
// reduce_scatter_to_sequence_parallel_region, and the bias — replicated — is added once: after
// the all-reduce, or in the epilogue of the GEMM of this rank's own rows, to which the reduce-
// scatter's ring then adds the other ranks' products of them.
//
// Without tensor parallelism both are exactly the plain LinearLayer (the bias fused into the
// GEMM), so a single-rank model computes what it always did.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/backend.hpp"
#include "model/gpt_parameters.hpp"
#include "model/linear_layer.hpp"
#include "model/tensor_parallel_mappings.hpp"

namespace mgt {

// Rows [first, first + count) of a layer's [rows, features] tensors.
struct RowRange {
  int64_t first = 0;
  int64_t count = 0;
};
// One GEMM over some rows: `input` holds just those rows.
using RowsGemm = std::function<void(ConstFloatView input, RowRange rows)>;
// Work a backward hands on or takes in: a weight gradient left for later (its operands stay
// untouched until it runs), to be run beside a collective that would otherwise be waited for.
// Empty: nothing.
using DeferredGemm = std::function<void()>;

class ColumnParallelLinear {
public:
  // bias_name may name no tensor (no bias). `tp` (and `fp8`, see LinearLayer) must outlive the
  // layer.
  ColumnParallelLinear(GptParameters& params, const std::string& weight_name,
                       const std::string& bias_name, const TensorParallelMappings& tp,
                       Fp8Training* fp8 = nullptr);

  int64_t in_features() const { return linear_.in_features(); }
  int64_t out_features() const { return linear_.out_features(); }  // this rank's

  // y[rows, out] = X·Wᵀ + b. X is x[rows, in]; or, when `gathered` is given (sequence
  // parallelism), x is this rank's [rows/tp, in] slice and X is all-gathered into `gathered`
  // [rows, in] first (in place where x is this rank's rows of `gathered`).
  void forward(ConstFloatView x, int64_t rows, FloatView y, FloatView gathered = {}) const;
  // The same followed by Megatron's fused bias-GELU: pre = X·Wᵀ + b, y = gelu_tanh(pre).
  void forward_gelu_tanh(ConstFloatView x, int64_t rows, FloatView pre, FloatView y,
                         FloatView gathered = {}) const;
  // dW += dyᵀ·X, db += Σ dy; dx (shaped as the forward's x) = the gradient of x unless empty.
  // Under sequence parallelism X is read from `gathered` where x is this rank's rows of it (the
  // forward's in-place all-gather left X there), else rebuilt in it as Megatron does; the input
  // gradient passes through d_whole [rows, in] before its reduce-scatter;
  // `beside_scatter` runs beside that reduce-scatter, and with `weight_later` dW and db are left
  // there, for the caller to run (`gathered` and dy untouched until then). Without sequence
  // parallelism both run at once.
  void backward(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx,
                FloatView gathered = {}, FloatView d_whole = {}, const DeferredGemm& beside_scatter = {},
                DeferredGemm* weight_later = nullptr) const;
  // backward() where the output went through the tanh GELU (forward_gelu_tanh), from the
  // gradient d of the GELU's output: dy = d ⊙ gelu_tanh'(pre), into d (LinearLayer's
  // backward_through_gelu_tanh, whose FP8 cast takes the GELU's gradient in). Without sequence
  // parallelism only (the caller takes the GELU's gradient first under it).
  void backward_through_gelu_tanh(FloatView d, ConstFloatView pre, ConstFloatView x, int64_t rows, FloatView dx,
                                  const DeferredGemm& beside_scatter = {}) const;
  bool fp8() const { return linear_.fp8(); }
  // FP8 without sequence parallelism (whose input is all-gathered and cast block by block): the
  // next forward's input comes cast by its producer (LinearLayer::take_cast_input).
  void take_cast_input(int64_t rows, const Fp8InputCast& cast) const { linear_.take_cast_input(rows, cast); }

private:
  // Under sequence parallelism: gathers x into `gathered` and runs `gemm` over all its rows,
  // this rank's own first, beside the all-gather.
  void forward_gathered(ConstFloatView x, int64_t rows, FloatView gathered, const RowsGemm& gemm) const;

  const TensorParallelMappings* tp_;
  LinearLayer linear_;
};

class RowParallelLinear {
public:
  // bias_name may name no tensor (no bias). `tp` (and `fp8`, see LinearLayer) must outlive the
  // layer.
  RowParallelLinear(GptParameters& params, const std::string& weight_name,
                    const std::string& bias_name, const TensorParallelMappings& tp,
                    Fp8Training* fp8 = nullptr);

  int64_t in_features() const { return linear_.in_features(); }  // this rank's
  int64_t out_features() const { return linear_.out_features(); }

  // y = Σ_ranks x·Wᵀ + b, x[rows, in]. y is [rows, out]; or, when `whole` is given (sequence
  // parallelism), y is this rank's [rows/tp, out] slice of it: the partial products are
  // computed block by block into whole [rows, out] and reduce-scattered beside the GEMMs. With
  // `addend`, y's last addend may be left unadded there (empty when none is): y + *addend is the
  // output (TensorParallelMappings' ring).
  void forward(ConstFloatView x, int64_t rows, FloatView y, FloatView whole = {},
               ConstFloatView* addend = nullptr) const;
  // dy is shaped as the forward's y; under sequence parallelism it is all-gathered into d_whole
  // [rows, out] first, `beside_gather` running beside that all-gather. dW and db accumulate (db
  // from this rank's dy rows: under sequence parallelism a partial sum, see
  // ParameterEntry::sequence_parallel); with `weight_later`, dW is left there for the caller to
  // run (x and d_whole untouched until then). dx[rows, in] is overwritten unless empty. Without
  // sequence parallelism everything runs at once.
  void backward(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx,
                FloatView d_whole = {}, const DeferredGemm& beside_gather = {},
                DeferredGemm* weight_later = nullptr) const;
  // The same where x = gelu_tanh(pre) came from Megatron's fused bias-GELU: the input gradient
  // goes on through the GELU, dpre = (dy·W) ⊙ gelu_tanh'(pre) [rows, in].
  void backward_gelu_tanh(ConstFloatView dy, ConstFloatView x, ConstFloatView pre, int64_t rows,
                          FloatView dpre, FloatView d_whole = {}, const DeferredGemm& beside_gather = {},
                          DeferredGemm* weight_later = nullptr) const;
  // See LinearLayer::take_input_through_gelu_tanh: x, as every call gives it, is then the GELU's
  // input.
  void take_input_through_gelu_tanh() { linear_.take_input_through_gelu_tanh(); }

private:
  // dW and db as backward() computes them without sequence parallelism; returns the output
  // gradient the input gradient starts from (dy, or its all-reduce).
  ConstFloatView backward_parameters(ConstFloatView dy, ConstFloatView x, int64_t rows) const;
  // With it: db from this rank's rows; dy all-gathered into d_whole while this rank's rows of
  // the input gradient (`input_gemm`, given output-gradient rows) and `beside_gather` are
  // computed, then the other rows' and dW over all rows (or into `weight_later`).
  void backward_sequence_parallel(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView d_whole,
                                  const RowsGemm& input_gemm, const DeferredGemm& beside_gather,
                                  DeferredGemm* weight_later) const;

  const TensorParallelMappings* tp_;
  LinearLayer linear_;
};

}  // namespace mgt
