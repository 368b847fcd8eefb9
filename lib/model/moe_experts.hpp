// The experts of an MoE layer and its shared experts: each an MLP without biases (linear_fc1,
// the activation, linear_fc2) of its own hidden size, as Megatron-Core's
// SequentialMLP (megatron/core/transformer/moe/experts.py) runs its local experts one after
// another over their rows of the permuted tokens, and SharedExpertMLP (shared_experts.py) over
// every token. With --moe-grouped-gemm the local experts run as its GroupedMLP runs them: each
// projection of all of them as one grouped operation (Backend::grouped_linear_*: on Hopper one
// grouped GEMM), the activation once over all their rows (it acts row by row). Under expert
// parallelism a rank holds num_experts / EP consecutive experts.
//
// In FP8 (Fp8Training) every expert's fc1 and fc2 compute as FP8 linear layers of their own,
// each with its input, weight and output-gradient scaling, as Transformer Engine's GroupedLinear
// keeps one FP8 meta per GEMM (transformer_engine/pytorch/module/grouped_linear.py, which
// Megatron's TEGroupedMLP runs under --moe-grouped-gemm) and SequentialMLP's TE linears one each:
// the local experts then run expert by expert (side by side on a GPU) under --moe-grouped-gemm
// too, as TE's grouped FP8 GEMM (general_grouped_gemm) loops over per-expert GEMMs on several
// streams. Casting every expert first and then running each projection's GEMMs at once was 5%
// slower on an H200: the casts no longer ran beside other experts' GEMMs (BENCHMARKS.md). Each
// expert's rows come padded with zero rows to a multiple of 16 (moe_expert_row_multiple), as
// cuBLASLt's FP8 GEMMs need.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "model/gpt_parameters.hpp"
#include "model/linear_layer.hpp"
#include "model/moe_buffers.hpp"

namespace mgt {

// One MLP over `rows` rows; buffers are [rows, ·] views.
class ExpertMlp {
public:
  // With `fp8` (which must outlive the MLP) both linears compute in FP8; `routed`: a routed
  // expert's (Fp8Training keeps its state apart), not the shared experts'.
  ExpertMlp(GptParameters& params, const std::string& prefix, Fp8Training* fp8 = nullptr, bool routed = false);

  int64_t ffn() const { return ffn_; }
  int64_t fc1_size() const { return fc1_.out_features(); }

  void forward(ConstFloatView x, int64_t rows, FloatView fc1_output, FloatView activation_output, FloatView y) const;
  // The activation function alone: activation_output from fc1_output (forward, and
  // --recompute-modules moe_act before the backward).
  void activate(ConstFloatView fc1_output, int64_t rows, FloatView activation_output) const;
  // d_fc1 from d_activation through the activation function at fc1_output.
  void activation_backward(ConstFloatView d_activation, ConstFloatView fc1_output, int64_t rows,
                           FloatView d_fc1) const;
  // Weight gradients added; dx overwritten.
  void backward(ConstFloatView dy, ConstFloatView x, int64_t rows, ConstFloatView fc1_output,
                ConstFloatView activation_output, FloatView d_activation, FloatView d_fc1, FloatView dx) const;

private:
  Backend* backend_;
  Activation activation_;
  int64_t ffn_;
  LinearLayer fc1_;
  LinearLayer fc2_;
};

class MoeExperts {
public:
  // `prefix`: the layer's "decoder.layers.{i}.mlp". This rank's experts (all of them without
  // expert parallelism), whose parameters carry their global numbers. With `fp8` (which must
  // outlive the experts) they compute in FP8.
  MoeExperts(GptParameters& params, const std::string& prefix, Fp8Training* fp8 = nullptr);

  // saved.fc1_output, activation_output and `output` from `input` ([Σ rows, h] each), local
  // expert after local expert over `expert_rows` rows each.
  void forward(const std::vector<int64_t>& expert_rows, ConstFloatView input, const MoeActivations& saved,
               FloatView output) const;
  // From d_output (∂/∂output): the experts' weight gradients and d_input. With `weights_later`
  // and grouped experts, d_input only: *weights_later is set to compute the weight gradients,
  // and must run before anything writes d_output, input, the saved activations or the scratch's
  // d_activation and d_fc1 again (--delay-wgrad-compute: while d_input travels). Otherwise it is
  // left empty.
  void backward(const std::vector<int64_t>& expert_rows, ConstFloatView d_output, ConstFloatView input,
                const MoeActivations& saved, const MoeScratch& scratch, FloatView d_input,
                std::function<void()>* weights_later = nullptr) const;

private:
  // One projection (linear_fc1 or linear_fc2) of every local expert: their weights' views, in
  // order, for the grouped operations (experts have no biases: Megatron refuses MoE with them).
  struct Projection {
    std::vector<ConstFloatView> weights;
    std::vector<FloatView> weight_grads;
    std::vector<const ParameterEntry*> entries;
  };
  Projection projection(GptParameters& params, const std::string& prefix, const char* name) const;
  // Whether the grouped weight gradient of `p` adds to the experts' gradients: not in an
  // iteration's first backward (GptParameters::grad_write_accumulates; the experts of a layer are
  // written together, so they answer alike).
  bool grads_accumulate(const Projection& p) const;
  // --moe-grouped-gemm: forward and backward over all local experts' rows at once.
  void grouped_forward(const std::vector<int64_t>& expert_rows, ConstFloatView input, const MoeActivations& saved,
                       FloatView output) const;
  void grouped_backward(const std::vector<int64_t>& expert_rows, ConstFloatView d_output, ConstFloatView input,
                        const MoeActivations& saved, const MoeScratch& scratch, FloatView d_input,
                        std::function<void()>* weights_later) const;
  // The local experts' rows of expert_rows (checked to hold them).
  std::span<const int64_t> local_rows(const std::vector<int64_t>& expert_rows) const;
  // f(j, first) for each local expert j, first its first row: the experts without rows first (in
  // FP8 they cast their weights), then those with rows side by side (Backend::side_by_side; in
  // FP8 each lane casts into FP8 scratch of its own).
  void for_each_expert(std::span<const int64_t> rows, const std::function<void(std::size_t j, int64_t first)>& f) const;

  Backend* backend_;
  GptParameters* params_;
  Fp8Training* fp8_;
  std::vector<ExpertMlp> experts_;
  int64_t hidden_;
  bool recompute_activation_;  // --recompute-modules moe_act (recompute_plan.hpp)
  bool grouped_;               // --moe-grouped-gemm, not in FP8
  Projection fc1_;             // with grouped_ only
  Projection fc2_;
};

}  // namespace mgt
