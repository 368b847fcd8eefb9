#include "model/moe_experts.hpp"

#include "model/recompute_plan.hpp"

namespace mgt {

ExpertMlp::ExpertMlp(GptParameters& params, const std::string& prefix)
    : backend_(&params.backend()),
      activation_(params.config().activation),
      ffn_(params.entry(prefix + ".linear_fc2.weight").local_shape.at(1)),
      fc1_(params, prefix + ".linear_fc1.weight", prefix + ".linear_fc1.bias"),
      fc2_(params, prefix + ".linear_fc2.weight", prefix + ".linear_fc2.bias") {}

void ExpertMlp::forward(ConstFloatView x, int64_t rows, FloatView fc1_output, FloatView activation_output,
                        FloatView y) const {
  if (rows == 0) return;
  fc1_.forward(x, rows, fc1_output);
  activate(fc1_output, rows, activation_output);
  fc2_.forward(activation_output, rows, y);
}

void ExpertMlp::activate(ConstFloatView fc1_output, int64_t rows, FloatView activation_output) const {
  switch (activation_) {
    case Activation::kGelu:
      backend_->gelu_forward(fc1_output, activation_output);
      break;
    case Activation::kOpenaiGelu:
      backend_->gelu_tanh_forward(fc1_output, activation_output);
      break;
    case Activation::kSwiglu:
      backend_->swiglu_forward(fc1_output, rows, ffn_, activation_output);
      break;
  }
}

void ExpertMlp::backward(ConstFloatView dy, ConstFloatView x, int64_t rows, ConstFloatView fc1_output,
                         ConstFloatView activation_output, FloatView d_activation, FloatView d_fc1,
                         FloatView dx) const {
  if (rows == 0) return;
  fc2_.backward(dy, activation_output, rows, d_activation);
  switch (activation_) {
    case Activation::kGelu:
      backend_->gelu_backward(d_activation, fc1_output, d_fc1);
      break;
    case Activation::kOpenaiGelu:
      backend_->gelu_tanh_backward(d_activation, fc1_output, d_fc1);
      break;
    case Activation::kSwiglu:
      backend_->swiglu_backward(d_activation, fc1_output, rows, ffn_, d_fc1);
      break;
  }
  fc1_.backward(d_fc1, x, rows, dx);
}

MoeExperts::MoeExperts(GptParameters& params, const std::string& prefix)
    : hidden_(params.config().hidden_size), recompute_activation_(recomputes_moe_act(params.config(), true)) {
  const ExpertParallelRank& ep = params.expert_parallel();
  const int64_t experts = params.config().moe.num_experts;
  for (int64_t j = 0; j < experts / ep.size; ++j)
    experts_.emplace_back(params, prefix + ".experts.local_experts." + std::to_string(ep.global_expert(experts, j)));
}

void MoeExperts::forward(const std::vector<int64_t>& expert_rows, ConstFloatView input, const MoeActivations& saved,
                         FloatView output) const {
  int64_t first = 0;
  for (std::size_t j = 0; j < experts_.size(); ++j) {
    const ExpertMlp& expert = experts_[j];
    const int64_t rows = expert_rows[j];
    expert.forward(input.subspan(first * hidden_, rows * hidden_), rows,
                   saved.fc1_output.subspan(first * expert.fc1_size(), rows * expert.fc1_size()),
                   saved.activation_output.subspan(first * expert.ffn(), rows * expert.ffn()),
                   output.subspan(first * hidden_, rows * hidden_));
    first += rows;
  }
}

void MoeExperts::backward(const std::vector<int64_t>& expert_rows, ConstFloatView d_output, ConstFloatView input,
                          const MoeActivations& saved, const MoeScratch& scratch, FloatView d_input) const {
  int64_t first = 0;
  for (std::size_t j = 0; j < experts_.size(); ++j) {
    const ExpertMlp& expert = experts_[j];
    const int64_t rows = expert_rows[j];
    // moe_act: the activation output all MoE layers share holds another layer's; this one's again.
    if (recompute_activation_ && rows > 0)
      expert.activate(saved.fc1_output.subspan(first * expert.fc1_size(), rows * expert.fc1_size()), rows,
                      saved.activation_output.subspan(first * expert.ffn(), rows * expert.ffn()));
    expert.backward(d_output.subspan(first * hidden_, rows * hidden_), input.subspan(first * hidden_, rows * hidden_),
                    rows, saved.fc1_output.subspan(first * expert.fc1_size(), rows * expert.fc1_size()),
                    saved.activation_output.subspan(first * expert.ffn(), rows * expert.ffn()),
                    scratch.d_activation.first(rows * expert.ffn()), scratch.d_fc1.first(rows * expert.fc1_size()),
                    d_input.subspan(first * hidden_, rows * hidden_));
    first += rows;
  }
}

}  // namespace mgt
