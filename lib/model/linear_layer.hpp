// A linear layer y = x·Wᵀ + b whose weight and bias live in the flat parameter buffer: the
// arithmetic on one rank's shard. The column- and row-parallel layers (parallel_linear.hpp) add
// their communication around these calls.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/backend.hpp"
#include "model/fp8_training.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

// Whether a forward call's x holds every row of the layer's input, the rows its weight gradient
// will read (not one block of a sequence-parallel layer's): a training forward in FP8 then keeps
// x's transposed codes for that weight gradient (Fp8Training::keep_input_columns).
enum class InputRows { kPart, kWhole };

// A cast of a linear layer's input made by what produces the input (a norm that writes FP8,
// model/norm_fp8_cast.hpp): rowwise codes [rows, in] with `scaling` into `codes`.
using Fp8InputCast = std::function<void(const Fp8Scaling& scaling, Fp8View codes)>;

class LinearLayer {
public:
  // bias_name may name a tensor that does not exist (--disable-bias-linear): no bias then.
  // With `fp8` (which must outlive the layer) its GEMMs compute in FP8 (fp8_training.hpp): the
  // input and the output gradient cast as they come, the weight once per optimizer step.
  // `routed_expert`: the layer is a routed expert's, whose FP8 state Fp8Training keeps apart.
  // The weight's and bias's gradients are the layer's alone to write (their zeroing is deferred,
  // GptParameters::defer_grad_zeroing): "+=" below writes over them in an iteration's first
  // backward.
  LinearLayer(GptParameters& params, const std::string& weight_name, const std::string& bias_name,
              Fp8Training* fp8 = nullptr, bool routed_expert = false);

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

  // y[rows, out] = x[rows, in]·Wᵀ + b.
  void forward(ConstFloatView x, int64_t rows, FloatView y, InputRows given = InputRows::kPart) const;
  // dW += dyᵀ·x, db += Σ dy; dx = dy·W unless dx is empty.
  void backward(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx) const;
  // Followed by Megatron's fused bias-GELU: pre = x·Wᵀ + b, y = gelu_tanh(pre).
  void forward_gelu_tanh(ConstFloatView x, int64_t rows, FloatView pre, FloatView y,
                         InputRows given = InputRows::kPart) const;

  // The steps separately, for a layer whose bias is added after a reduction.
  bool has_bias() const { return !bias_.empty(); }
  // y[rows, out] = x·Wᵀ.
  void forward_without_bias(ConstFloatView x, int64_t rows, FloatView y, InputRows given = InputRows::kPart) const;
  // y[rows, out] += b (nothing without bias).
  void add_bias(FloatView y, int64_t rows) const;
  // dW += dyᵀ·x.
  void backward_weight(ConstFloatView dy, ConstFloatView x, int64_t rows) const;
  // db += Σ dy over `rows` rows (nothing without bias).
  void backward_bias(ConstFloatView dy, int64_t rows) const;
  // dW += dyᵀ·x and db += Σ dy (without bias, dW alone).
  void backward_weight_and_bias(ConstFloatView dy, ConstFloatView x, int64_t rows) const;
  // dx = dy·W.
  void backward_input(ConstFloatView dy, int64_t rows, FloatView dx) const;
  // The input gradient through the tanh GELU that made this layer's input from pre:
  // dpre = (dy·W) ⊙ gelu_tanh'(pre).
  void backward_input_gelu_tanh(ConstFloatView dy, int64_t rows, ConstFloatView pre, FloatView dpre) const;
  // backward_weight_and_bias and backward_input_gelu_tanh of one dy together.
  void backward_gelu_tanh(ConstFloatView dy, ConstFloatView x, int64_t rows, ConstFloatView pre,
                          FloatView dpre) const;
  // backward() of the layer whose output went through the tanh GELU, from the gradient d of the
  // GELU's output and its input pre: dy = d ⊙ gelu_tanh'(pre). d is overwritten (with dy, or left
  // as it was where the FP8 cast takes the GELU's gradient in and nothing reads dy itself).
  void backward_through_gelu_tanh(FloatView d, ConstFloatView pre, ConstFloatView x, int64_t rows,
                                  FloatView dx) const;
  // The layer in fp64 (the MoE router's gate under --moe-router-dtype fp64; no bias, not FP8):
  // y = x·Wᵀ, and dW += dyᵀ·x with dx = dy·W unless dx is empty, each sum in fp64
  // (Backend::linear_forward_fp64).
  void forward_fp64(ConstFloatView x, int64_t rows, FloatView y) const;
  void backward_fp64(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx) const;
  bool fp8() const { return fp8_ != nullptr; }
  // Under FP8 with FP8 weight gradients only: this layer's input is gelu_tanh(x) of the x its
  // calls are given (linear_fc2 of an MLP whose fc1 ran without the GELU), and its casts of x
  // apply the GELU as they read it (Backend::fp8_quantize_gelu_tanh): the GELU's output is never
  // written, read back or kept for the backward.
  void take_input_through_gelu_tanh();
  // FP8, the input whole (InputRows::kWhole): the input of the next forward call of `rows` rows
  // comes cast by `cast`, which writes the codes fp8_input would have cast; a training pass keeps
  // their transposed copy for the weight gradient (Backend::fp8_transpose) as fp8_input keeps it.
  // That forward then reads neither its x nor, where the copy was kept, does the backward.
  void take_cast_input(int64_t rows, const Fp8InputCast& cast) const;
  // FP8: the weight's copies made now if stale, its amax recorded in a training pass, as for a
  // GEMM of no rows (an expert that received no token: Transformer Engine casts its weight too).
  void cast_fp8_weight() const {
    if (fp8_) refresh_fp8_weight();
  }

private:
  // The FP8 forms of the GEMMs.
  void fp8_forward(ConstFloatView x, int64_t rows, ConstFloatView bias, FloatView y, InputRows given) const;
  // The output gradient, cast (rowwise) for the input gradient's GEMM.
  ConstFp8View fp8_grad(ConstFloatView dy, int64_t rows) const;
  // x (or gelu_tanh(x), see take_input_through_gelu_tanh) cast with `scaling` into rowwise and/or
  // transposed codes.
  void fp8_cast_input(ConstFloatView x, int64_t rows, const Fp8Scaling& scaling, Fp8View rowwise,
                      Fp8View transposed) const;
  // The input, cast for the forward GEMM (and kept transposed, see InputRows).
  ConstFp8View fp8_input(ConstFloatView x, int64_t rows, InputRows given) const;
  // dx = dy·W from dy's codes.
  void fp8_input_gradient(ConstFp8View grad, int64_t rows, FloatView dx) const;
  // dW += dyᵀ·x from dy's transposed codes (dy itself where --no-fp8-wgrad keeps it in bf16).
  void fp8_weight_gradient(ConstFp8View grad_t, ConstFloatView dy, ConstFloatView x, int64_t rows) const;
  // The weight's, the bias's (with `bias`) and, unless dx is empty, the input's gradient from one
  // cast of dy into rows and columns, as Transformer Engine's cast-transpose makes both at once
  // with the bias gradient. With pre, dy is the gradient through the GELU of the given one
  // (Backend::fp8_quantize_gradient), written to dpre where a GEMM still reads it in bf16.
  void fp8_backward(ConstFloatView dy, ConstFloatView pre, FloatView dpre, ConstFloatView x, int64_t rows,
                    FloatView dx, bool bias) const;
  // The weight's FP8 copy [out, in], or transposed [in, out], made first where it is stale.
  ConstFp8View fp8_weight(bool transposed) const;
  // The weight's FP8 copies, made again when the parameters changed since the last cast (unless
  // pinned: Fp8Training::WeightCopy).
  void refresh_fp8_weight() const;
  // Whether this write of the weight's (the bias's) gradient adds to it: not the iteration's
  // first, which writes over it (GptParameters::grad_write_accumulates). Asked once per write.
  bool weight_grad_accumulates() const { return params_->grad_write_accumulates(*weight_entry_); }
  bool bias_grad_accumulates() const { return params_->grad_write_accumulates(*bias_entry_); }

  Backend* backend_;
  GptParameters* params_;
  const ParameterEntry* weight_entry_ = nullptr;
  const ParameterEntry* bias_entry_ = nullptr;  // null without bias
  int64_t in_ = 0;
  int64_t out_ = 0;
  ConstFloatView weight_;  // the compute copy (GptParameters::compute_param)
  FloatView weight_grad_;
  ConstFloatView bias_;  // the compute copy (GptParameters::compute_param)
  FloatView bias_grad_;  // empty without bias
  // FP8: the model's state and this layer's index in it (its weight's copies are kept there).
  Fp8Training* fp8_ = nullptr;
  int64_t fp8_index_ = 0;
  bool input_gelu_tanh_ = false;  // take_input_through_gelu_tanh
  // The rows of the next forward's input that take_cast_input cast (-1: none).
  mutable int64_t cast_input_rows_ = -1;
};

}  // namespace mgt
