#include "model/moe_experts.hpp"

#include <algorithm>
#include <numeric>
#include <span>

#include "core/error.hpp"
#include "model/mlp_activation.hpp"
#include "model/recompute_plan.hpp"

namespace mgt {

ExpertMlp::ExpertMlp(GptParameters& params, const std::string& prefix, Fp8Training* fp8, bool routed)
    : backend_(&params.backend()),
      activation_(params.config().activation),
      ffn_(params.entry(prefix + ".linear_fc2.weight").local_shape.at(1)),
      fc1_(params, prefix + ".linear_fc1.weight", prefix + ".linear_fc1.bias", fp8, routed),
      fc2_(params, prefix + ".linear_fc2.weight", prefix + ".linear_fc2.bias", fp8, routed) {}

void ExpertMlp::forward(ConstFloatView x, int64_t rows, FloatView fc1_output, FloatView activation_output,
                        FloatView y) const {
  if (rows == 0) {
    // An expert without tokens still records its weights' amaxes in FP8, as Transformer Engine's
    // GroupedLinear casts every GEMM's weight (and a Linear its weight for an empty input), so
    // that its scales are current when tokens come.
    fc1_.cast_fp8_weight();
    fc2_.cast_fp8_weight();
    return;
  }
  fc1_.forward(x, rows, fc1_output);
  activate(fc1_output, rows, activation_output);
  fc2_.forward(activation_output, rows, y);
}

void ExpertMlp::activate(ConstFloatView fc1_output, int64_t rows, FloatView activation_output) const {
  mlp_activation_forward(*backend_, activation_, fc1_output, rows, ffn_, activation_output);
}

void ExpertMlp::backward(ConstFloatView dy, ConstFloatView x, int64_t rows, ConstFloatView fc1_output,
                         ConstFloatView activation_output, FloatView d_activation, FloatView d_fc1,
                         FloatView dx) const {
  if (rows == 0) return;
  fc2_.backward(dy, activation_output, rows, d_activation);
  activation_backward(d_activation, fc1_output, rows, d_fc1);
  fc1_.backward(d_fc1, x, rows, dx);
}

void ExpertMlp::activation_backward(ConstFloatView d_activation, ConstFloatView fc1_output, int64_t rows,
                                    FloatView d_fc1) const {
  mlp_activation_backward(*backend_, activation_, d_activation, fc1_output, rows, ffn_, d_fc1);
}

MoeExperts::MoeExperts(GptParameters& params, const std::string& prefix, Fp8Training* fp8)
    : backend_(&params.backend()),
      params_(&params),
      fp8_(fp8),
      hidden_(params.config().hidden_size),
      recompute_activation_(recomputes_moe_act(params.config(), true)),
      grouped_(params.config().moe.grouped_gemm && fp8 == nullptr) {
  const ExpertParallelRank& ep = params.expert_parallel();
  const int64_t experts = params.config().moe.num_experts;
  for (int64_t j = 0; j < experts / ep.size; ++j)
    experts_.emplace_back(params, prefix + ".experts.local_experts." + std::to_string(ep.global_expert(experts, j)),
                          fp8, /*routed=*/true);
  if (grouped_) {
    fc1_ = projection(params, prefix, "linear_fc1");
    fc2_ = projection(params, prefix, "linear_fc2");
  }
}

MoeExperts::Projection MoeExperts::projection(GptParameters& params, const std::string& prefix,
                                              const char* name) const {
  const ExpertParallelRank& ep = params.expert_parallel();
  const int64_t experts = params.config().moe.num_experts;
  Projection p;
  for (int64_t j = 0; j < static_cast<int64_t>(experts_.size()); ++j) {
    const std::string layer = prefix + ".experts.local_experts." + std::to_string(ep.global_expert(experts, j)) +
                              "." + name;
    const ParameterEntry& w = params.entry(layer + ".weight");
    p.weights.push_back(params.compute_param(w));
    p.weight_grads.push_back(params.grad(w));
    p.entries.push_back(&w);
    if (params.find(layer + ".bias") != nullptr)
      throw Error("MoeExperts: " + layer + " has a bias, which experts do not have");
  }
  return p;
}

void MoeExperts::for_each_expert(std::span<const int64_t> rows,
                                 const std::function<void(std::size_t j, int64_t first)>& f) const {
  std::vector<int64_t> first(rows.size(), 0);
  for (std::size_t j = 1; j < rows.size(); ++j) first[j] = first[j - 1] + rows[j - 1];
  for (std::size_t j = 0; j < rows.size(); ++j)
    if (rows[j] == 0) f(j, first[j]);
  struct MainLane {
    Fp8Training* fp8;
    ~MainLane() {
      if (fp8 != nullptr) fp8->set_lane(0);
    }
  } main_lane{fp8_};
  backend_->side_by_side(rows, [&](int64_t lane, int64_t item) {
    if (fp8_ != nullptr) fp8_->set_lane(lane);
    f(static_cast<std::size_t>(item), first[static_cast<std::size_t>(item)]);
  });
}

void MoeExperts::forward(const std::vector<int64_t>& expert_rows, ConstFloatView input, const MoeActivations& saved,
                         FloatView output) const {
  if (grouped_) return grouped_forward(expert_rows, input, saved, output);
  const std::span<const int64_t> rows_of = local_rows(expert_rows);
  for_each_expert(rows_of, [&](std::size_t j, int64_t first) {
    const ExpertMlp& expert = experts_[j];
    const int64_t rows = rows_of[j];
    expert.forward(input.subspan(first * hidden_, rows * hidden_), rows,
                   saved.fc1_output.subspan(first * expert.fc1_size(), rows * expert.fc1_size()),
                   saved.activation_output.subspan(first * expert.ffn(), rows * expert.ffn()),
                   output.subspan(first * hidden_, rows * hidden_));
  });
}

void MoeExperts::backward(const std::vector<int64_t>& expert_rows, ConstFloatView d_output, ConstFloatView input,
                          const MoeActivations& saved, const MoeScratch& scratch, FloatView d_input,
                          std::function<void()>* weights_later) const {
  if (weights_later) *weights_later = nullptr;
  if (grouped_) return grouped_backward(expert_rows, d_output, input, saved, scratch, d_input, weights_later);
  const std::span<const int64_t> rows_of = local_rows(expert_rows);
  for_each_expert(rows_of, [&](std::size_t j, int64_t first) {
    const ExpertMlp& expert = experts_[j];
    const int64_t rows = rows_of[j];
    // moe_act: the activation output all MoE layers share holds another layer's; this one's again.
    if (recompute_activation_ && rows > 0)
      expert.activate(saved.fc1_output.subspan(first * expert.fc1_size(), rows * expert.fc1_size()), rows,
                      saved.activation_output.subspan(first * expert.ffn(), rows * expert.ffn()));
    // Each expert's gradients of its hidden units in its own rows of the scratch (the experts may
    // run side by side).
    expert.backward(d_output.subspan(first * hidden_, rows * hidden_), input.subspan(first * hidden_, rows * hidden_),
                    rows, saved.fc1_output.subspan(first * expert.fc1_size(), rows * expert.fc1_size()),
                    saved.activation_output.subspan(first * expert.ffn(), rows * expert.ffn()),
                    scratch.d_activation.subspan(first * expert.ffn(), rows * expert.ffn()),
                    scratch.d_fc1.subspan(first * expert.fc1_size(), rows * expert.fc1_size()),
                    d_input.subspan(first * hidden_, rows * hidden_));
  });
}

bool MoeExperts::grads_accumulate(const Projection& p) const {
  std::vector<char> accumulates;
  for (const ParameterEntry* e : p.entries) accumulates.push_back(params_->grad_write_accumulates(*e) ? 1 : 0);
  if (std::none_of(accumulates.begin(), accumulates.end(), [](char a) { return a != 0; })) return false;
  // Written apart before (never so far): those not written yet are zeroed, all are added to.
  for (std::size_t j = 0; j < accumulates.size(); ++j)
    if (accumulates[j] == 0) backend_->fill(p.weight_grads[j], 0.0f);
  return true;
}

std::span<const int64_t> MoeExperts::local_rows(const std::vector<int64_t>& expert_rows) const {
  if (expert_rows.size() < experts_.size())
    throw Error("MoeExperts: rows of " + std::to_string(expert_rows.size()) + " experts for " +
                std::to_string(experts_.size()) + " local experts");
  return std::span<const int64_t>(expert_rows).first(experts_.size());
}

void MoeExperts::grouped_forward(const std::vector<int64_t>& expert_rows, ConstFloatView input,
                                 const MoeActivations& saved, FloatView output) const {
  const std::span<const int64_t> groups = local_rows(expert_rows);
  const int64_t rows = std::accumulate(groups.begin(), groups.end(), int64_t{0});
  if (rows == 0) return;
  const ExpertMlp& any = experts_.front();  // the experts share their sizes and activation
  const FloatView fc1_output = saved.fc1_output.first(rows * any.fc1_size());
  const FloatView activation_output = saved.activation_output.first(rows * any.ffn());
  backend_->grouped_linear_forward(input.first(rows * hidden_), fc1_.weights, {}, groups, hidden_,
                                   any.fc1_size(), fc1_output);
  any.activate(fc1_output, rows, activation_output);
  backend_->grouped_linear_forward(activation_output, fc2_.weights, {}, groups, any.ffn(), hidden_,
                                   output.first(rows * hidden_));
}

void MoeExperts::grouped_backward(const std::vector<int64_t>& expert_rows, ConstFloatView d_output,
                                  ConstFloatView input, const MoeActivations& saved, const MoeScratch& scratch,
                                  FloatView d_input, std::function<void()>* weights_later) const {
  const std::span<const int64_t> groups = local_rows(expert_rows);
  const int64_t rows = std::accumulate(groups.begin(), groups.end(), int64_t{0});
  if (rows == 0) return;
  const ExpertMlp& any = experts_.front();
  const int64_t fc1 = any.fc1_size();
  const int64_t ffn = any.ffn();
  const ConstFloatView x = input.first(rows * hidden_);
  const ConstFloatView dy = d_output.first(rows * hidden_);
  const ConstFloatView fc1_output = saved.fc1_output.first(rows * fc1);
  const FloatView activation_output = saved.activation_output.first(rows * ffn);
  const FloatView d_activation = scratch.d_activation.first(rows * ffn);
  const FloatView d_fc1 = scratch.d_fc1.first(rows * fc1);
  // moe_act: the activation output all MoE layers share holds another layer's; this one's again.
  if (recompute_activation_) any.activate(fc1_output, rows, activation_output);
  // The input gradient through both projections first, then the weight gradients: the same
  // values in either order, since the weight gradients read only d_output, the forward's saved
  // values and d_fc1, which the input gradients' GEMMs do not write.
  backend_->grouped_linear_backward_input(dy, fc2_.weights, groups, ffn, hidden_, d_activation);
  any.activation_backward(d_activation, fc1_output, rows, d_fc1);
  backend_->grouped_linear_backward_input(d_fc1, fc1_.weights, groups, hidden_, fc1, d_input.first(rows * hidden_));
  // The rows are copied: a later call may outlive the caller's vector.
  auto weights = [this, rows_of = std::vector<int64_t>(groups.begin(), groups.end()), dy, x, activation_output, d_fc1,
                  ffn, fc1] {
    backend_->grouped_linear_backward_weight(dy, activation_output, rows_of, ffn, hidden_, fc2_.weight_grads,
                                            grads_accumulate(fc2_));
    backend_->grouped_linear_backward_weight(d_fc1, x, rows_of, hidden_, fc1, fc1_.weight_grads,
                                            grads_accumulate(fc1_));
  };
  if (weights_later) {
    *weights_later = std::move(weights);
  } else {
    weights();
  }
}

}  // namespace mgt
