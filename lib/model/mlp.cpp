#include "model/mlp.hpp"

#include "model/mlp_activation.hpp"

namespace mgt {

Mlp::Mlp(GptParameters& params, int64_t layer, const TensorParallelMappings& tp, Fp8Training* fp8)
    : backend_(&params.backend()),
      activation_(params.config().activation),
      ffn_(params.config().ffn_hidden_size / params.tensor_parallel().size),
      fc1_(params, layer_prefix(layer) + ".mlp.linear_fc1.weight",
           layer_prefix(layer) + ".mlp.linear_fc1.bias", tp, fp8),
      fc2_(params, layer_prefix(layer) + ".mlp.linear_fc2.weight",
           layer_prefix(layer) + ".mlp.linear_fc2.bias", tp, fp8),
      gelu_in_fc2_casts_(fp8_mlp_gelu_in_fc2_casts(activation_, fp8 ? &fp8->recipe() : nullptr)) {
  if (gelu_in_fc2_casts_) fc2_.take_input_through_gelu_tanh();
}

bool fp8_mlp_gelu_in_fc2_casts(Activation activation, const Fp8Recipe* fp8) {
  return activation == Activation::kOpenaiGelu && fp8 != nullptr && fp8->wgrad;
}

void Mlp::forward(const ForwardContext& ctx, FloatView input, const MlpActivations& saved,
                  const MlpScratch& scratch, FloatView output, ConstFloatView* addend) const {
  const int64_t tokens = ctx.tokens();
  const ConstFloatView own = ctx.own_rows(input, fc1_.in_features());
  if (gelu_in_fc2_casts_) {
    fc1_.forward(own, tokens, saved.fc1_output, ctx.when_sequence_parallel(input));
    fc2_.forward(saved.fc1_output, tokens, output, ctx.when_sequence_parallel(scratch.sequence.whole), addend);
    return;
  }
  if (activation_ == Activation::kOpenaiGelu) {
    fc1_.forward_gelu_tanh(own, tokens, saved.fc1_output, saved.activation_output, ctx.when_sequence_parallel(input));
  } else {
    fc1_.forward(own, tokens, saved.fc1_output, ctx.when_sequence_parallel(input));
  }
  // The tanh GELU is in fc1's epilogue.
  if (activation_ != Activation::kOpenaiGelu)
    mlp_activation_forward(*backend_, activation_, saved.fc1_output, tokens, ffn_, saved.activation_output);
  fc2_.forward(saved.activation_output, tokens, output,
               ctx.when_sequence_parallel(scratch.sequence.whole), addend);
}

void Mlp::backward(const ForwardContext& ctx, FloatView input, const MlpActivations& saved,
                   const MlpScratch& scratch, ConstFloatView d_output, FloatView d_input,
                   DeferredGemm* fc1_weight_later) const {
  const int64_t tokens = ctx.tokens();
  // fc2's weight gradient reads its all-gathered output gradient in `whole`, which fc1's input
  // gradient therefore leaves alone (`input_grad`).
  DeferredGemm fc2_weight;
  DeferredGemm* fc2_weight_later = fc1_weight_later ? &fc2_weight : nullptr;
  const FloatView gathered = ctx.when_sequence_parallel(input);
  if (activation_ == Activation::kOpenaiGelu && fc1_.fp8()) {
    // Under FP8 the GELU's gradient goes into fc1's cast of its output gradient (Transformer
    // Engine's cast-dbias-dgelu) instead of fc2's GEMM: d_fc1 first holds the GELU output's gradient.
    fc2_.backward(d_output, gelu_in_fc2_casts_ ? saved.fc1_output : saved.activation_output, tokens, scratch.d_fc1,
                  ctx.when_sequence_parallel(scratch.sequence.whole), {}, fc2_weight_later);
    if (gathered.empty()) {
      fc1_.backward_through_gelu_tanh(scratch.d_fc1, saved.fc1_output, ctx.own_rows(input, fc1_.in_features()),
                                      tokens, d_input, fc2_weight);
      return;
    }
    backend_->gelu_tanh_backward(scratch.d_fc1, saved.fc1_output, scratch.d_fc1);
  } else if (activation_ == Activation::kOpenaiGelu) {
    fc2_.backward_gelu_tanh(d_output, saved.activation_output, saved.fc1_output, tokens, scratch.d_fc1,
                            ctx.when_sequence_parallel(scratch.sequence.whole), {}, fc2_weight_later);
  } else {
    fc2_.backward(d_output, saved.activation_output, tokens, scratch.d_activation,
                  ctx.when_sequence_parallel(scratch.sequence.whole), {}, fc2_weight_later);
  }
  // The tanh GELU's gradient is in fc2's input-gradient epilogue, or taken above.
  if (activation_ != Activation::kOpenaiGelu)
    mlp_activation_backward(*backend_, activation_, scratch.d_activation, saved.fc1_output, tokens, ffn_,
                            scratch.d_fc1);
  fc1_.backward(scratch.d_fc1, ctx.own_rows(input, fc1_.in_features()), tokens, d_input, gathered,
                ctx.when_sequence_parallel(fc1_weight_later ? scratch.sequence.input_grad : scratch.sequence.whole),
                fc2_weight, fc1_weight_later);
}

}  // namespace mgt
