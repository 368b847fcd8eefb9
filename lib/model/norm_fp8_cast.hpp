// The norms that write their output in FP8 for the linear layer that reads it, as Transformer
// Engine's LayerNormLinear does under delayed scaling (its norm writes the FP8 output directly):
// a transformer layer's input norm feeds linear_qkv alone, and its pre-MLP norm a dense MLP's
// linear_fc1 alone. Where that layer's forward GEMM and its weight gradient (from the transposed
// codes the forward keeps, Fp8Training::keep_input_columns) are the norm output's only readers,
// the norm casts as it normalises (Backend::fp8_norm_forward), the transposed codes come from the
// rowwise ones (Backend::fp8_transpose), and the bf16 output is never written: per element the
// norm writes 1 byte instead of 2, and the separate cast's read of 2 bytes is gone. The codes,
// scales and amaxes are those of the norm followed by the linear layer's own cast, bit for bit.
//
// Not where anything else reads the output, or where the linear layer casts its input otherwise:
// current scaling (the amax is needed before the cast), --no-fp8-wgrad (the weight gradient
// reads the bf16 input), full recomputation (no transposed codes are kept), --recompute-modules
// layernorm (the output is rebuilt in the backward) and, for the pre-MLP norm, mlp (the MLP's
// forward runs again from it), sequence parallelism (the output is all-gathered and cast block by
// block), a layer outside FP8 (--first-last-layers-bf16) and an MoE layer's pre-MLP norm (the
// router and the experts read it). Under tensor parallelism without sequence parallelism the
// column-parallel layer's input is the norm output itself (copy_to_tensor_region's forward is
// the identity), so the path applies.
#pragma once
#include <cstdint>

#include "model/gpt_config.hpp"

namespace mgt {

struct NormFp8Casts {
  bool input_norm = false;    // into linear_qkv
  bool pre_mlp_norm = false;  // into the dense MLP's linear_fc1
};

// The casts of one FP8 transformer layer (`moe_layer`: an MoE layer) in passes without sequence
// parallelism (the layer checks that per pass).
NormFp8Casts layer_norm_fp8_casts(const GptConfig& config, bool moe_layer);

// The casts every transformer layer of `config` makes in passes with or without
// `sequence_parallel`: the norm outputs that no layer writes, which the activation memory then
// leaves out.
NormFp8Casts model_norm_fp8_casts(const GptConfig& config, bool sequence_parallel);

}  // namespace mgt
