#include "model/parallel_linear.hpp"

#include <vector>

namespace mgt {
namespace {

// This rank's rows of the sequence-major grid under sequence parallelism.
RowRange sequence_slice(const TensorParallelMappings& tp, int64_t rows) {
  const int64_t local = rows / tp.size();
  return {tp.rank() * local, local};
}

// Whether x is this rank's slice of `whole` itself (an all-gather into `whole` is in place).
bool holds_own_rows(const TensorParallelMappings& tp, ConstFloatView whole, ConstFloatView x) {
  return whole.size() == x.size() * tp.size() && x.raw() == whole.subspan(tp.rank() * x.size(), x.size()).raw();
}

void run(const DeferredGemm& work) {
  if (work) work();
}

// The rows before and after `mine`, those of them that exist.
std::vector<RowRange> others(RowRange mine, int64_t rows) {
  std::vector<RowRange> ranges;
  if (mine.first > 0) ranges.push_back({0, mine.first});
  const int64_t after = mine.first + mine.count;
  if (after < rows) ranges.push_back({after, rows - after});
  return ranges;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(GptParameters& params, const std::string& weight_name,
                                           const std::string& bias_name,
                                           const TensorParallelMappings& tp, Fp8Training* fp8)
    : tp_(&tp), linear_(params, weight_name, bias_name, fp8) {}

void ColumnParallelLinear::forward(ConstFloatView x, int64_t rows, FloatView y,
                                   FloatView gathered) const {
  if (gathered.empty()) {
    linear_.forward(tp_->copy_to_tensor_region_forward(x), rows, y, InputRows::kWhole);
    return;
  }
  const int64_t out = out_features();
  forward_gathered(x, rows, gathered, [&](ConstFloatView input, RowRange r) {
    linear_.forward(input, r.count, y.subspan(r.first * out, r.count * out));
  });
}

void ColumnParallelLinear::forward_gelu_tanh(ConstFloatView x, int64_t rows, FloatView pre, FloatView y,
                                             FloatView gathered) const {
  if (gathered.empty()) {
    linear_.forward_gelu_tanh(tp_->copy_to_tensor_region_forward(x), rows, pre, y, InputRows::kWhole);
    return;
  }
  const int64_t out = out_features();
  forward_gathered(x, rows, gathered, [&](ConstFloatView input, RowRange r) {
    linear_.forward_gelu_tanh(input, r.count, pre.subspan(r.first * out, r.count * out),
                              y.subspan(r.first * out, r.count * out));
  });
}

void ColumnParallelLinear::forward_gathered(ConstFloatView x, int64_t rows, FloatView gathered,
                                            const RowsGemm& gemm) const {
  const int64_t in = in_features();
  const FloatView input = gathered.first(rows * in);
  if (!tp_->active()) {
    tp_->gather_from_sequence_parallel_region_forward(x, input);
    gemm(input, {0, rows});
    return;
  }
  // This rank's rows first, from its own slice, while the all-gather brings the others' (the
  // order of Transformer Engine's ring-exchange overlap); then the rows before and after them.
  dist::PendingCollective gather = tp_->start_gather_from_sequence_parallel_region_forward(x, input);
  const RowRange mine = sequence_slice(*tp_, rows);
  gemm(x, mine);
  gather.wait();
  for (const RowRange r : others(mine, rows)) gemm(input.subspan(r.first * in, r.count * in), r);
}

void ColumnParallelLinear::backward(ConstFloatView dy, ConstFloatView x, int64_t rows,
                                    FloatView dx, FloatView gathered, FloatView d_whole,
                                    const DeferredGemm& beside_scatter, DeferredGemm* weight_later) const {
  if (gathered.empty()) {
    run(beside_scatter);
    linear_.backward(dy, x, rows, dx);
    if (!dx.empty()) tp_->copy_to_tensor_region_backward(dx);
    return;
  }
  // Megatron's overlap of the two collectives with the two GEMMs: the input's all-gather runs
  // beside the input gradient's GEMM, the input gradient's reduce-scatter beside the weight
  // gradient's GEMM (each GEMM reads only what is already there). Where the forward gathered in
  // place, X is still there and only the reduce-scatter is left.
  const FloatView input = gathered.first(rows * in_features());
  dist::PendingCollective gather;
  if (!holds_own_rows(*tp_, input, x)) gather = tp_->start_gather_from_sequence_parallel_region_forward(x, input);
  const FloatView d_input = dx.empty() ? FloatView{} : d_whole.first(rows * in_features());
  if (!dx.empty()) linear_.backward_input(dy, rows, d_input);
  gather.wait();
  dist::PendingCollective scatter;
  if (!dx.empty()) scatter = tp_->start_gather_from_sequence_parallel_region_backward(d_input, dx);
  run(beside_scatter);
  if (weight_later) {
    *weight_later = [this, dy, input, rows] { linear_.backward_weight_and_bias(dy, input, rows); };
  } else {
    linear_.backward_weight_and_bias(dy, input, rows);
  }
  scatter.wait();
}

void ColumnParallelLinear::backward_through_gelu_tanh(FloatView d, ConstFloatView pre, ConstFloatView x, int64_t rows,
                                                      FloatView dx, const DeferredGemm& beside_scatter) const {
  run(beside_scatter);
  linear_.backward_through_gelu_tanh(d, pre, x, rows, dx);
  if (!dx.empty()) tp_->copy_to_tensor_region_backward(dx);
}

RowParallelLinear::RowParallelLinear(GptParameters& params, const std::string& weight_name,
                                     const std::string& bias_name,
                                     const TensorParallelMappings& tp, Fp8Training* fp8)
    : tp_(&tp), linear_(params, weight_name, bias_name, fp8) {}

void RowParallelLinear::forward(ConstFloatView x, int64_t rows, FloatView y,
                                FloatView whole, ConstFloatView* addend) const {
  if (addend) *addend = {};
  if (!tp_->active()) {
    linear_.forward(x, rows, y, InputRows::kWhole);  // the bias in the GEMM's epilogue, as without parallelism
    return;
  }
  if (whole.empty()) {
    linear_.forward_without_bias(x, rows, y, InputRows::kWhole);
    tp_->reduce_from_tensor_region_forward(y);
    linear_.add_bias(y, rows);
    return;
  }
  // Block by block, the reduction of each beside the next one's GEMM; the bias, which belongs
  // to the sum, goes with this rank's own block (in the GEMM's epilogue).
  const int64_t local = rows / tp_->size();
  const int64_t in = in_features();
  tp_->reduce_scatter_to_sequence_parallel_region_forward(
      [&](int64_t block, FloatView partial) {
        const ConstFloatView block_rows = x.subspan(block * local * in, local * in);
        if (block == tp_->rank()) {
          linear_.forward(block_rows, local, partial);
        } else {
          linear_.forward_without_bias(block_rows, local, partial);
        }
      },
      y, whole.first(rows * out_features()), addend);
}

void RowParallelLinear::backward(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx,
                                 FloatView d_whole, const DeferredGemm& beside_gather,
                                 DeferredGemm* weight_later) const {
  if (tp_->active() && !d_whole.empty()) {
    const int64_t in = in_features();
    backward_sequence_parallel(
        dy, x, rows, d_whole,
        [&](ConstFloatView d_rows, RowRange r) {
          if (!dx.empty()) linear_.backward_input(d_rows, r.count, dx.subspan(r.first * in, r.count * in));
        },
        beside_gather, weight_later);
    return;
  }
  run(beside_gather);
  if (!tp_->active()) {
    linear_.backward(dy, x, rows, dx);
    return;
  }
  const ConstFloatView d_output = backward_parameters(dy, x, rows);
  if (!dx.empty()) linear_.backward_input(d_output, rows, dx);
}

void RowParallelLinear::backward_gelu_tanh(ConstFloatView dy, ConstFloatView x, ConstFloatView pre,
                                           int64_t rows, FloatView dpre, FloatView d_whole,
                                           const DeferredGemm& beside_gather, DeferredGemm* weight_later) const {
  if (tp_->active() && !d_whole.empty()) {
    const int64_t in = in_features();
    backward_sequence_parallel(
        dy, x, rows, d_whole,
        [&](ConstFloatView d_rows, RowRange r) {
          linear_.backward_input_gelu_tanh(d_rows, r.count, pre.subspan(r.first * in, r.count * in),
                                           dpre.subspan(r.first * in, r.count * in));
        },
        beside_gather, weight_later);
    return;
  }
  run(beside_gather);
  const ConstFloatView d_output = tp_->active() ? tp_->reduce_from_tensor_region_backward(dy) : dy;
  linear_.backward_gelu_tanh(d_output, x, rows, pre, dpre);
}

ConstFloatView RowParallelLinear::backward_parameters(ConstFloatView dy, ConstFloatView x, int64_t rows) const {
  const ConstFloatView d_output = tp_->active() ? tp_->reduce_from_tensor_region_backward(dy) : dy;
  linear_.backward_weight_and_bias(d_output, x, rows);
  return d_output;
}

void RowParallelLinear::backward_sequence_parallel(ConstFloatView dy, ConstFloatView x, int64_t rows,
                                                   FloatView d_whole, const RowsGemm& input_gemm,
                                                   const DeferredGemm& beside_gather,
                                                   DeferredGemm* weight_later) const {
  const int64_t out = out_features();
  // The bias was added to this rank's rows only: its gradient sums those rows.
  const RowRange mine = sequence_slice(*tp_, rows);
  linear_.backward_bias(dy, mine.count);
  // This rank's rows of the input gradient first, from its own output gradient, while the
  // all-gather brings the others'; then the other rows, and the weight gradient in one GEMM over
  // all of them (one pass over its fp32 accumulator, in the one-GPU run's row order).
  const FloatView d_output = d_whole.first(rows * out);
  dist::PendingCollective gather = tp_->start_reduce_scatter_to_sequence_parallel_region_backward(dy, d_output);
  input_gemm(dy, mine);
  run(beside_gather);
  gather.wait();
  for (const RowRange r : others(mine, rows)) input_gemm(d_output.subspan(r.first * out, r.count * out), r);
  if (weight_later) {
    *weight_later = [this, d_output, x, rows] { linear_.backward_weight(d_output, x, rows); };
  } else {
    linear_.backward_weight(d_output, x, rows);
  }
}

}  // namespace mgt
