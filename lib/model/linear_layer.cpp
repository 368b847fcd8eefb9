#include "model/linear_layer.hpp"

#include <string>

#include "core/error.hpp"

namespace mgt {

LinearLayer::LinearLayer(GptParameters& params, const std::string& weight_name,
                         const std::string& bias_name, Fp8Training* fp8, bool routed_expert)
    : backend_(&params.backend()), params_(&params), fp8_(fp8) {
  const ParameterEntry& w = params.entry(weight_name);
  out_ = w.local_shape.at(0);
  in_ = w.local_shape.at(1);
  weight_ = params.compute_param(w);
  weight_grad_ = params.grad(w);
  weight_entry_ = &w;
  params.defer_grad_zeroing(w);
  if (const ParameterEntry* b = params.find(bias_name)) {
    bias_ = params.compute_param(*b);
    bias_grad_ = params.grad(*b);
    bias_entry_ = b;
    params.defer_grad_zeroing(*b);
  }
  if (fp8_) {
    // "decoder.layers.3.mlp.linear_fc1.weight" → the layer's name.
    fp8_index_ = fp8_->add_linear(weight_name.substr(0, weight_name.rfind('.')), out_, in_, routed_expert);
  }
}

void LinearLayer::refresh_fp8_weight() const {
  // A copy an evaluation made recorded no amax: the first training pass of the step casts again
  // (the same codes) to record it, so that the amax history does not depend on when evaluations
  // ran (a resumed run, which evaluates at other iterations, stays exact).
  Fp8Training::WeightCopy& w = fp8_->weight_copy(fp8_index_);
  if (w.pinned) return;
  if (w.made && w.version == params_->params_version() && (w.recorded || !fp8_->recording())) return;
  const Fp8Format format = fp8_->recipe().forward_format;
  backend_->fp8_quantize(weight_, out_, in_, fp8_->weight_scaling(fp8_index_),
                         {w.rows, format, w.scale_inv.view().subspan(0, 1)},
                         {w.columns.view(), format, w.scale_inv.view().subspan(4, 1)});
  w.version = params_->params_version();
  w.made = true;
  w.recorded = fp8_->recording();
}

ConstFp8View LinearLayer::fp8_weight(bool transposed) const {
  refresh_fp8_weight();
  Fp8Training::WeightCopy& w = fp8_->weight_copy(fp8_index_);
  const Fp8Format format = fp8_->recipe().forward_format;
  if (transposed) return {w.columns.view(), format, w.scale_inv.view().subspan(4, 1)};
  return {w.rows, format, w.scale_inv.view().subspan(0, 1)};
}

void LinearLayer::take_input_through_gelu_tanh() {
  if (!fp8_ || !fp8_->recipe().wgrad)
    throw Error("LinearLayer: only an FP8 layer with FP8 weight gradients casts its input through the GELU");
  input_gelu_tanh_ = true;
}

void LinearLayer::fp8_cast_input(ConstFloatView x, int64_t rows, const Fp8Scaling& scaling, Fp8View rowwise,
                                 Fp8View transposed) const {
  if (input_gelu_tanh_) {
    backend_->fp8_quantize_gelu_tanh(x, rows, in_, scaling, rowwise, transposed);
  } else {
    backend_->fp8_quantize(x, rows, in_, scaling, rowwise, transposed);
  }
}

void LinearLayer::take_cast_input(int64_t rows, const Fp8InputCast& cast) const {
  if (!fp8_ || input_gelu_tanh_) throw Error("LinearLayer: only an FP8 layer takes its input cast by its producer");
  const Fp8View input = fp8_->scratch(Fp8Training::Scratch::kInputRows, rows * in_, fp8_->recipe().forward_format);
  const Fp8Scaling scaling = fp8_->input_scaling(fp8_index_);
  cast(scaling, input);
  const Fp8View columns = fp8_->keep_input_columns(fp8_index_, rows * in_);
  if (!columns.empty()) backend_->fp8_transpose(input, rows, in_, scaling.scale, columns);
  cast_input_rows_ = rows;
}

ConstFp8View LinearLayer::fp8_input(ConstFloatView x, int64_t rows, InputRows given) const {
  const Fp8View input = fp8_->scratch(Fp8Training::Scratch::kInputRows, rows * in_, fp8_->recipe().forward_format);
  if (cast_input_rows_ >= 0) {
    // Cast already (take_cast_input), into the same scratch.
    if (cast_input_rows_ != rows || given != InputRows::kWhole)
      throw Error("LinearLayer: a forward of " + std::to_string(rows) + " rows after its input's cast of " +
                  std::to_string(cast_input_rows_));
    cast_input_rows_ = -1;
    return input;
  }
  const Fp8View columns = given == InputRows::kWhole ? fp8_->keep_input_columns(fp8_index_, rows * in_) : Fp8View{};
  fp8_cast_input(x, rows, fp8_->input_scaling(fp8_index_), input, columns);
  return input;
}

void LinearLayer::fp8_forward(ConstFloatView x, int64_t rows, ConstFloatView bias, FloatView y,
                              InputRows given) const {
  backend_->fp8_linear(fp8_input(x, rows, given), fp8_weight(false), bias, rows, in_, out_, y, false,
                       Fp8GemmRole::kForward);
}

void LinearLayer::fp8_input_gradient(ConstFp8View grad, int64_t rows, FloatView dx) const {
  // dx[rows, in] = dy[rows, out] · W[out, in] = dy · (Wᵀ[in, out])ᵀ.
  backend_->fp8_linear(grad, fp8_weight(true), {}, rows, out_, in_, dx, false, Fp8GemmRole::kInputGradient);
}

void LinearLayer::fp8_weight_gradient(ConstFp8View grad_t, ConstFloatView dy, ConstFloatView x, int64_t rows) const {
  if (!fp8_->recipe().wgrad) {
    backend_->linear_backward_weight(dy, x, rows, in_, out_, weight_grad_, weight_grad_accumulates());
    return;
  }
  // dW[out, in] += dyᵀ[out, rows] · x[rows, in] = dyᵀ · (xᵀ[in, rows])ᵀ, from the copy the forward
  // kept, else cast again with the scale the forward used (the same codes).
  ConstFp8View input_t = fp8_->take_input_columns(fp8_index_, rows * in_);
  if (input_t.empty()) {
    if (x.empty() && rows > 0)
      throw Error("LinearLayer: the weight gradient's input was cast by its producer and its columns not kept");
    const Fp8View cast =
        fp8_->scratch(Fp8Training::Scratch::kInputColumns, rows * in_, fp8_->recipe().forward_format);
    fp8_cast_input(x, rows, fp8_->input_rescaling(fp8_index_), {}, cast);
    input_t = cast;
  }
  backend_->fp8_linear(grad_t, input_t, {}, out_, rows, in_, weight_grad_, weight_grad_accumulates(),
                       Fp8GemmRole::kWeightGradient);
}

ConstFp8View LinearLayer::fp8_grad(ConstFloatView dy, int64_t rows) const {
  const Fp8View grad = fp8_->scratch(Fp8Training::Scratch::kGradRows, rows * out_, fp8_->recipe().backward_format);
  backend_->fp8_quantize(dy, rows, out_, fp8_->grad_scaling(fp8_index_, Fp8Training::Scratch::kGradRows), grad, {});
  return grad;
}

void LinearLayer::fp8_backward(ConstFloatView dy, ConstFloatView pre, FloatView dpre, ConstFloatView x, int64_t rows,
                               FloatView dx, bool bias) const {
  const Fp8Format format = fp8_->recipe().backward_format;
  const bool wgrad = fp8_->recipe().wgrad;
  const Fp8View grad =
      dx.empty() ? Fp8View{} : fp8_->scratch(Fp8Training::Scratch::kGradRows, rows * out_, format);
  const Fp8View grad_t = wgrad ? fp8_->scratch(Fp8Training::Scratch::kGradColumns, rows * out_, format) : Fp8View{};
  const FloatView dbias = bias ? bias_grad_ : FloatView{};
  // The bf16 weight gradient (--no-fp8-wgrad) reads the gradient through the GELU itself.
  const FloatView written = pre.empty() || wgrad ? FloatView{} : dpre;
  const ConstFloatView g = written.empty() ? dy : ConstFloatView(written);
  if (grad.empty() && grad_t.empty()) {
    if (!written.empty()) backend_->gelu_tanh_backward(dy, pre, written);
    if (!dbias.empty()) backend_->bias_backward(g, rows, out_, dbias, bias_grad_accumulates());
  } else {
    // The amax of dy is recorded by the rowwise cast (grad_scaling's kGradRows); a cast of the
    // columns alone does not record it again.
    const Fp8Training::Scratch recording = grad.empty() ? Fp8Training::Scratch::kGradColumns
                                                        : Fp8Training::Scratch::kGradRows;
    backend_->fp8_quantize_gradient(dy, pre, rows, out_, fp8_->grad_scaling(fp8_index_, recording), grad, grad_t,
                                    dbias, written, dbias.empty() || bias_grad_accumulates());
  }
  fp8_weight_gradient(grad_t, g, x, rows);
  if (!dx.empty()) fp8_input_gradient(grad, rows, dx);
}

void LinearLayer::forward(ConstFloatView x, int64_t rows, FloatView y, InputRows given) const {
  if (fp8_) return fp8_forward(x, rows, bias_, y, given);
  backend_->linear_forward(x, weight_, bias_, rows, in_, out_, y);
}

void LinearLayer::backward(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx) const {
  if (fp8_) return fp8_backward(dy, {}, {}, x, rows, dx, true);
  backward_weight_and_bias(dy, x, rows);
  if (!dx.empty()) backward_input(dy, rows, dx);
}

void LinearLayer::backward_through_gelu_tanh(FloatView d, ConstFloatView pre, ConstFloatView x, int64_t rows,
                                             FloatView dx) const {
  if (fp8_) return fp8_backward(d, pre, d, x, rows, dx, true);
  backend_->gelu_tanh_backward(d, pre, d);
  backward(d, x, rows, dx);
}

void LinearLayer::backward_weight_and_bias(ConstFloatView dy, ConstFloatView x, int64_t rows) const {
  backward_weight(dy, x, rows);
  backward_bias(dy, rows);
}

void LinearLayer::forward_gelu_tanh(ConstFloatView x, int64_t rows, FloatView pre, FloatView y,
                                    InputRows given) const {
  if (fp8_) {
    backend_->fp8_linear_gelu_tanh_forward(fp8_input(x, rows, given), fp8_weight(false), bias_, rows, in_, out_, pre,
                                           y);
    return;
  }
  backend_->linear_gelu_tanh_forward(x, weight_, bias_, rows, in_, out_, pre, y);
}

void LinearLayer::forward_without_bias(ConstFloatView x, int64_t rows, FloatView y, InputRows given) const {
  if (fp8_) return fp8_forward(x, rows, {}, y, given);
  backend_->linear_forward(x, weight_, {}, rows, in_, out_, y);
}

void LinearLayer::add_bias(FloatView y, int64_t rows) const {
  if (!bias_.empty()) backend_->add_bias(y, bias_, rows, out_);
}

void LinearLayer::backward_weight(ConstFloatView dy, ConstFloatView x, int64_t rows) const {
  if (fp8_) return fp8_backward(dy, {}, {}, x, rows, {}, false);
  backend_->linear_backward_weight(dy, x, rows, in_, out_, weight_grad_, weight_grad_accumulates());
}

void LinearLayer::forward_fp64(ConstFloatView x, int64_t rows, FloatView y) const {
  if (fp8_ || !bias_.empty()) throw Error("LinearLayer: the fp64 layer has no bias and is not FP8");
  backend_->linear_forward_fp64(x, weight_, rows, in_, out_, y);
}

void LinearLayer::backward_fp64(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx) const {
  if (fp8_ || !bias_.empty()) throw Error("LinearLayer: the fp64 layer has no bias and is not FP8");
  backend_->linear_backward_fp64(dy, x, weight_, rows, in_, out_, dx, weight_grad_, weight_grad_accumulates());
}

void LinearLayer::backward_bias(ConstFloatView dy, int64_t rows) const {
  if (!bias_grad_.empty()) backend_->bias_backward(dy, rows, out_, bias_grad_, bias_grad_accumulates());
}

void LinearLayer::backward_input(ConstFloatView dy, int64_t rows, FloatView dx) const {
  if (fp8_) return fp8_input_gradient(fp8_grad(dy, rows), rows, dx);
  backend_->linear_backward_input(dy, weight_, rows, in_, out_, dx);
}

void LinearLayer::backward_input_gelu_tanh(ConstFloatView dy, int64_t rows, ConstFloatView pre,
                                           FloatView dpre) const {
  if (fp8_) {
    fp8_input_gradient(fp8_grad(dy, rows), rows, dpre);
    backend_->gelu_tanh_backward(dpre, pre, dpre);
    return;
  }
  backend_->linear_backward_input_gelu_tanh(dy, weight_, pre, rows, in_, out_, dpre);
}

void LinearLayer::backward_gelu_tanh(ConstFloatView dy, ConstFloatView x, int64_t rows, ConstFloatView pre,
                                     FloatView dpre) const {
  if (fp8_) {
    fp8_backward(dy, {}, {}, x, rows, dpre, true);
    backend_->gelu_tanh_backward(dpre, pre, dpre);
    return;
  }
  backward_weight_and_bias(dy, x, rows);
  backward_input_gelu_tanh(dy, rows, pre, dpre);
}

}  // namespace mgt
