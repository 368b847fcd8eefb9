// Megatron's MLP block: linear_fc1 (h → f, or h → 2f = [gate | up] with SwiGLU), the activation
// (GELU, tanh GELU or SwiGLU), linear_fc2 (f → h).
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/forward_context.hpp"
#include "model/gpt_parameters.hpp"
#include "model/linear_layer.hpp"

namespace mgt {

struct MlpActivations {
  FloatView fc1_output;         // [s, b, fc1 features], the activation's input
  FloatView activation_output;  // [s, b, ffn]
};

struct MlpScratch {
  FloatView d_activation;  // [s, b, ffn]
  FloatView d_fc1;         // [s, b, fc1 features]
};

class Mlp {
public:
  Mlp(GptParameters& params, int64_t layer);

  int64_t ffn() const { return ffn_; }  // local
  int64_t fc1_size() const { return fc1_.out_features(); }

  void forward(const ForwardContext& ctx, ConstFloatView input, const MlpActivations& saved,
               FloatView output) const;
  void backward(const ForwardContext& ctx, ConstFloatView input, const MlpActivations& saved,
                const MlpScratch& scratch, ConstFloatView d_output, FloatView d_input) const;

private:
  Backend* backend_;
  Activation activation_;
  int64_t ffn_;
  LinearLayer fc1_;
  LinearLayer fc2_;
};

}  // namespace mgt
