#include "model/parallel_linear.hpp"

namespace mgt {

ColumnParallelLinear::ColumnParallelLinear(GptParameters& params, const std::string& weight_name,
                                           const std::string& bias_name,
                                           const TensorParallelMappings& tp)
    : tp_(&tp), linear_(params, weight_name, bias_name) {}

void ColumnParallelLinear::forward(ConstFloatView x, int64_t rows, FloatView y,
                                   FloatView gathered) const {
  if (gathered.empty()) {
    linear_.forward(tp_->copy_to_tensor_region_forward(x), rows, y);
    return;
  }
  const FloatView input = gathered.first(rows * in_features());
  tp_->gather_from_sequence_parallel_region_forward(x, input);
  linear_.forward(input, rows, y);
}

void ColumnParallelLinear::forward_gelu_tanh(ConstFloatView x, int64_t rows, FloatView pre, FloatView y,
                                             FloatView gathered) const {
  if (gathered.empty()) {
    linear_.forward_gelu_tanh(tp_->copy_to_tensor_region_forward(x), rows, pre, y);
    return;
  }
  const FloatView input = gathered.first(rows * in_features());
  tp_->gather_from_sequence_parallel_region_forward(x, input);
  linear_.forward_gelu_tanh(input, rows, pre, y);
}

void ColumnParallelLinear::backward(ConstFloatView dy, ConstFloatView x, int64_t rows,
                                    FloatView dx, FloatView gathered, FloatView d_whole) const {
  if (gathered.empty()) {
    linear_.backward(dy, x, rows, dx);
    if (!dx.empty()) tp_->copy_to_tensor_region_backward(dx);
    return;
  }
  // Megatron's overlap of the two collectives with the two GEMMs: the input's all-gather runs
  // beside the input gradient's GEMM, the input gradient's reduce-scatter beside the weight
  // gradient's GEMM (each GEMM reads only what is already there).
  const FloatView input = gathered.first(rows * in_features());
  dist::PendingCollective gather = tp_->start_gather_from_sequence_parallel_region_forward(x, input);
  const FloatView d_input = dx.empty() ? FloatView{} : d_whole.first(rows * in_features());
  if (!dx.empty()) linear_.backward_input(dy, rows, d_input);
  gather.wait();
  dist::PendingCollective scatter;
  if (!dx.empty()) scatter = tp_->start_gather_from_sequence_parallel_region_backward(d_input, dx);
  linear_.backward_weight_and_bias(dy, input, rows);
  scatter.wait();
}

RowParallelLinear::RowParallelLinear(GptParameters& params, const std::string& weight_name,
                                     const std::string& bias_name,
                                     const TensorParallelMappings& tp)
    : tp_(&tp), linear_(params, weight_name, bias_name) {}

void RowParallelLinear::forward(ConstFloatView x, int64_t rows, FloatView y,
                                FloatView whole) const {
  if (!tp_->active()) {
    linear_.forward(x, rows, y);  // the bias in the GEMM's epilogue, as without parallelism
    return;
  }
  if (whole.empty()) {
    linear_.forward_without_bias(x, rows, y);
    tp_->reduce_from_tensor_region_forward(y);
    linear_.add_bias(y, rows);
    return;
  }
  const FloatView partial = whole.first(rows * out_features());
  linear_.forward_without_bias(x, rows, partial);
  tp_->reduce_scatter_to_sequence_parallel_region_forward(partial, y);
  linear_.add_bias(y, rows / tp_->size());
}

void RowParallelLinear::backward(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx,
                                 FloatView d_whole) const {
  if (!tp_->active()) {
    linear_.backward(dy, x, rows, dx);
    return;
  }
  const ConstFloatView d_output = backward_parameters(dy, x, rows, d_whole);
  if (!dx.empty()) linear_.backward_input(d_output, rows, dx);
}

void RowParallelLinear::backward_gelu_tanh(ConstFloatView dy, ConstFloatView x, ConstFloatView pre,
                                           int64_t rows, FloatView dpre, FloatView d_whole) const {
  const ConstFloatView d_output = backward_parameters(dy, x, rows, d_whole);
  linear_.backward_input_gelu_tanh(d_output, rows, pre, dpre);
}

ConstFloatView RowParallelLinear::backward_parameters(ConstFloatView dy, ConstFloatView x, int64_t rows,
                                                      FloatView d_whole) const {
  if (!tp_->active() || d_whole.empty()) {
    const ConstFloatView d_output = tp_->active() ? tp_->reduce_from_tensor_region_backward(dy) : dy;
    linear_.backward_weight_and_bias(d_output, x, rows);
    return d_output;
  }
  // The bias was added to this rank's rows only: its gradient sums those rows.
  linear_.backward_bias(dy, rows / tp_->size());
  const FloatView d_output = d_whole.first(rows * out_features());
  tp_->reduce_scatter_to_sequence_parallel_region_backward(dy, d_output);
  linear_.backward_weight(d_output, x, rows);
  return d_output;
}

}  // namespace mgt
