#include "kernels/backend.hpp"

#include <initializer_list>
#include <string>

#include "core/error.hpp"

namespace mgt {
namespace {

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw Error(std::string("Backend::") + op + ": " + what);
}

void dims(const char* op, std::initializer_list<int64_t> values) {
  for (const int64_t v : values) {
    if (v < 0) fail(op, "sizes must be >= 0");
  }
}

// Every view must hold exactly the elements the operation will touch: a larger view usually
// means the caller passed the wrong buffer.
template <typename T>
void expect(DeviceSpan<T> view, int64_t want, const char* op, const char* name) {
  if (view.size() != want) {
    fail(op, std::string(name) + " has " + std::to_string(view.size()) + " elements, expected " +
                 std::to_string(want));
  }
  if (want > 0 && view.data() == nullptr) fail(op, std::string(name) + " is null");
}

// Optional operands (biases) are either empty or exactly sized.
template <typename T>
void expect_optional(DeviceSpan<T> view, int64_t want, const char* op, const char* name) {
  if (!view.empty()) expect(view, want, op, name);
}

template <typename T>
auto* pointer_or_null(DeviceSpan<T> view) {
  return view.empty() ? nullptr : view.data();
}

}  // namespace

void throw_device_span_range(int64_t offset, int64_t count, int64_t size) {
  throw Error("device view: elements [" + std::to_string(offset) + ", " +
              std::to_string(offset + count) + ") are outside a view of " + std::to_string(size) +
              " elements");
}

void Backend::check_transfer(int64_t from, int64_t to, const char* op) {
  if (from != to) {
    fail(op, "source has " + std::to_string(from) + " elements, destination " + std::to_string(to));
  }
}

void Backend::copy(ConstFloatView src, FloatView dst) {
  expect(dst, src.size(), "copy", "dst");
  if (src.size() > 0) do_copy(src.data(), dst.data(), src.size());
}

void Backend::fill(FloatView x, float value) {
  if (x.size() > 0) do_fill(x.data(), x.size(), value);
}

void Backend::linear_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias, int64_t rows,
                             int64_t in, int64_t out, FloatView y) {
  const char* op = "linear_forward";
  dims(op, {rows, in, out});
  expect(x, rows * in, op, "x");
  expect(w, out * in, op, "w");
  expect_optional(bias, out, op, "bias");
  expect(y, rows * out, op, "y");
  do_linear_forward(x.data(), w.data(), pointer_or_null(bias), rows, in, out, y.data());
}

void Backend::linear_backward_input(ConstFloatView dy, ConstFloatView w, int64_t rows, int64_t in,
                                    int64_t out, FloatView dx) {
  const char* op = "linear_backward_input";
  dims(op, {rows, in, out});
  expect(dy, rows * out, op, "dy");
  expect(w, out * in, op, "w");
  expect(dx, rows * in, op, "dx");
  do_linear_backward_input(dy.data(), w.data(), rows, in, out, dx.data());
}

void Backend::linear_backward_weight(ConstFloatView dy, ConstFloatView x, int64_t rows, int64_t in,
                                     int64_t out, FloatView dw) {
  const char* op = "linear_backward_weight";
  dims(op, {rows, in, out});
  expect(dy, rows * out, op, "dy");
  expect(x, rows * in, op, "x");
  expect(dw, out * in, op, "dw");
  do_linear_backward_weight(dy.data(), x.data(), rows, in, out, dw.data());
}

void Backend::bias_backward(ConstFloatView dy, int64_t rows, int64_t cols, FloatView dbias) {
  const char* op = "bias_backward";
  dims(op, {rows, cols});
  expect(dy, rows * cols, op, "dy");
  expect(dbias, cols, op, "dbias");
  do_bias_backward(dy.data(), rows, cols, dbias.data());
}

void Backend::layer_norm_forward(ConstFloatView x, ConstFloatView weight, ConstFloatView bias,
                                 int64_t rows, int64_t hidden, float eps, FloatView y,
                                 FloatView mean, FloatView rstd) {
  const char* op = "layer_norm_forward";
  dims(op, {rows, hidden});
  expect(x, rows * hidden, op, "x");
  expect(weight, hidden, op, "weight");
  expect_optional(bias, hidden, op, "bias");
  expect(y, rows * hidden, op, "y");
  expect(mean, rows, op, "mean");
  expect(rstd, rows, op, "rstd");
  do_layer_norm_forward(x.data(), weight.data(), pointer_or_null(bias), rows, hidden, eps, y.data(),
                        mean.data(), rstd.data());
}

void Backend::layer_norm_backward(ConstFloatView dy, ConstFloatView x, ConstFloatView weight,
                                  ConstFloatView mean, ConstFloatView rstd, int64_t rows,
                                  int64_t hidden, FloatView dx, FloatView dweight,
                                  FloatView dbias) {
  const char* op = "layer_norm_backward";
  dims(op, {rows, hidden});
  expect(dy, rows * hidden, op, "dy");
  expect(x, rows * hidden, op, "x");
  expect(weight, hidden, op, "weight");
  expect(mean, rows, op, "mean");
  expect(rstd, rows, op, "rstd");
  expect(dx, rows * hidden, op, "dx");
  expect(dweight, hidden, op, "dweight");
  expect_optional(dbias, hidden, op, "dbias");
  do_layer_norm_backward(dy.data(), x.data(), weight.data(), mean.data(), rstd.data(), rows, hidden,
                         dx.data(), dweight.data(), pointer_or_null(dbias));
}

void Backend::rms_norm_forward(ConstFloatView x, ConstFloatView weight, int64_t rows,
                               int64_t hidden, float eps, FloatView y, FloatView rstd) {
  const char* op = "rms_norm_forward";
  dims(op, {rows, hidden});
  expect(x, rows * hidden, op, "x");
  expect(weight, hidden, op, "weight");
  expect(y, rows * hidden, op, "y");
  expect(rstd, rows, op, "rstd");
  do_rms_norm_forward(x.data(), weight.data(), rows, hidden, eps, y.data(), rstd.data());
}

void Backend::rms_norm_backward(ConstFloatView dy, ConstFloatView x, ConstFloatView weight,
                                ConstFloatView rstd, int64_t rows, int64_t hidden, FloatView dx,
                                FloatView dweight) {
  const char* op = "rms_norm_backward";
  dims(op, {rows, hidden});
  expect(dy, rows * hidden, op, "dy");
  expect(x, rows * hidden, op, "x");
  expect(weight, hidden, op, "weight");
  expect(rstd, rows, op, "rstd");
  expect(dx, rows * hidden, op, "dx");
  expect(dweight, hidden, op, "dweight");
  do_rms_norm_backward(dy.data(), x.data(), weight.data(), rstd.data(), rows, hidden, dx.data(),
                       dweight.data());
}

void Backend::gelu_forward(ConstFloatView x, FloatView y) {
  expect(y, x.size(), "gelu_forward", "y");
  if (x.size() > 0) do_gelu_forward(x.data(), x.size(), y.data());
}

void Backend::gelu_backward(ConstFloatView dy, ConstFloatView x, FloatView dx) {
  expect(dy, x.size(), "gelu_backward", "dy");
  expect(dx, x.size(), "gelu_backward", "dx");
  if (x.size() > 0) do_gelu_backward(dy.data(), x.data(), x.size(), dx.data());
}

void Backend::gelu_tanh_forward(ConstFloatView x, FloatView y) {
  expect(y, x.size(), "gelu_tanh_forward", "y");
  if (x.size() > 0) do_gelu_tanh_forward(x.data(), x.size(), y.data());
}

void Backend::gelu_tanh_backward(ConstFloatView dy, ConstFloatView x, FloatView dx) {
  expect(dy, x.size(), "gelu_tanh_backward", "dy");
  expect(dx, x.size(), "gelu_tanh_backward", "dx");
  if (x.size() > 0) do_gelu_tanh_backward(dy.data(), x.data(), x.size(), dx.data());
}

void Backend::swiglu_forward(ConstFloatView x, int64_t rows, int64_t ffn, FloatView y) {
  const char* op = "swiglu_forward";
  dims(op, {rows, ffn});
  expect(x, rows * 2 * ffn, op, "x");
  expect(y, rows * ffn, op, "y");
  do_swiglu_forward(x.data(), rows, ffn, y.data());
}

void Backend::swiglu_backward(ConstFloatView dy, ConstFloatView x, int64_t rows, int64_t ffn,
                              FloatView dx) {
  const char* op = "swiglu_backward";
  dims(op, {rows, ffn});
  expect(dy, rows * ffn, op, "dy");
  expect(x, rows * 2 * ffn, op, "x");
  expect(dx, rows * 2 * ffn, op, "dx");
  do_swiglu_backward(dy.data(), x.data(), rows, ffn, dx.data());
}

void Backend::dropout_forward(ConstFloatView x, float p, DropoutKey key, FloatView y) {
  expect(y, x.size(), "dropout_forward", "y");
  if (x.size() > 0) do_dropout_forward(x.data(), x.size(), p, key, y.data());
}

void Backend::dropout_backward(ConstFloatView dy, float p, DropoutKey key, FloatView dx) {
  expect(dx, dy.size(), "dropout_backward", "dx");
  if (dy.size() > 0) do_dropout_backward(dy.data(), dy.size(), p, key, dx.data());
}

void Backend::embedding_forward(ConstIndexView ids, ConstFloatView table, int64_t vocab_start,
                                int64_t hidden, FloatView out) {
  const char* op = "embedding_forward";
  dims(op, {vocab_start, hidden});
  if (hidden == 0 || table.size() % hidden != 0) fail(op, "table is not [rows, hidden]");
  expect(out, ids.size() * hidden, op, "out");
  do_embedding_forward(ids.data(), ids.size(), table.data(), vocab_start, table.size() / hidden,
                       hidden, out.data());
}

void Backend::embedding_backward(ConstIndexView ids, ConstFloatView dout, int64_t vocab_start,
                                 int64_t hidden, FloatView dtable) {
  const char* op = "embedding_backward";
  dims(op, {vocab_start, hidden});
  if (hidden == 0 || dtable.size() % hidden != 0) fail(op, "dtable is not [rows, hidden]");
  expect(dout, ids.size() * hidden, op, "dout");
  do_embedding_backward(ids.data(), ids.size(), dout.data(), vocab_start, dtable.size() / hidden,
                        hidden, dtable.data());
}

void Backend::rotary_forward(ConstFloatView x, const HeadTensor& shape, const RotaryParams& params,
                             FloatView y) {
  expect(x, shape.elements(), "rotary_forward", "x");
  expect(y, shape.elements(), "rotary_forward", "y");
  do_rotary_forward(x.data(), shape, params, y.data());
}

void Backend::rotary_backward(ConstFloatView dy, const HeadTensor& shape,
                              const RotaryParams& params, FloatView dx) {
  expect(dy, shape.elements(), "rotary_backward", "dy");
  expect(dx, shape.elements(), "rotary_backward", "dx");
  do_rotary_backward(dy.data(), shape, params, dx.data());
}

void Backend::attention_forward(ConstFloatView q, ConstFloatView k, ConstFloatView v,
                                const AttentionShape& shape, const AttentionParams& params,
                                FloatView out, FloatView lse) {
  const char* op = "attention_forward";
  const int64_t q_size = shape.query().elements();
  const int64_t kv_size = shape.key_value().elements();
  expect(q, q_size, op, "q");
  expect(k, kv_size, op, "k");
  expect(v, kv_size, op, "v");
  expect(out, q_size, op, "out");
  expect(lse, shape.batch * shape.heads * shape.seq_q, op, "lse");
  do_attention_forward(q.data(), k.data(), v.data(), shape, params, out.data(), lse.data());
}

void Backend::attention_backward(ConstFloatView q, ConstFloatView k, ConstFloatView v,
                                 ConstFloatView out, ConstFloatView dout, ConstFloatView lse,
                                 const AttentionShape& shape, const AttentionParams& params,
                                 FloatView dq, FloatView dk, FloatView dv) {
  const char* op = "attention_backward";
  const int64_t q_size = shape.query().elements();
  const int64_t kv_size = shape.key_value().elements();
  expect(q, q_size, op, "q");
  expect(k, kv_size, op, "k");
  expect(v, kv_size, op, "v");
  expect(out, q_size, op, "out");
  expect(dout, q_size, op, "dout");
  expect(lse, shape.batch * shape.heads * shape.seq_q, op, "lse");
  expect(dq, q_size, op, "dq");
  expect(dk, kv_size, op, "dk");
  expect(dv, kv_size, op, "dv");
  do_attention_backward(q.data(), k.data(), v.data(), out.data(), dout.data(), lse.data(), shape,
                        params, dq.data(), dk.data(), dv.data());
}

void Backend::qkv_split(ConstFloatView mixed, int64_t tokens, int64_t heads, int64_t groups,
                        int64_t unit, FloatView q, FloatView k, FloatView v) {
  const char* op = "qkv_split";
  dims(op, {tokens, heads, groups, unit});
  expect(mixed, tokens * (heads + 2 * groups) * unit, op, "mixed");
  expect(q, tokens * heads * unit, op, "q");
  expect(k, tokens * groups * unit, op, "k");
  expect(v, tokens * groups * unit, op, "v");
  do_qkv_split(mixed.data(), tokens, heads, groups, unit, q.data(), k.data(), v.data());
}

void Backend::qkv_merge(ConstFloatView q, ConstFloatView k, ConstFloatView v, int64_t tokens,
                        int64_t heads, int64_t groups, int64_t unit, FloatView mixed) {
  const char* op = "qkv_merge";
  dims(op, {tokens, heads, groups, unit});
  expect(mixed, tokens * (heads + 2 * groups) * unit, op, "mixed");
  expect(q, tokens * heads * unit, op, "q");
  expect(k, tokens * groups * unit, op, "k");
  expect(v, tokens * groups * unit, op, "v");
  do_qkv_merge(q.data(), k.data(), v.data(), tokens, heads, groups, unit, mixed.data());
}

void Backend::cross_entropy_row_max(ConstFloatView logits, int64_t rows, int64_t vocab,
                                    FloatView row_max) {
  const char* op = "cross_entropy_row_max";
  dims(op, {rows, vocab});
  expect(logits, rows * vocab, op, "logits");
  expect(row_max, rows, op, "row_max");
  do_cross_entropy_row_max(logits.data(), rows, vocab, row_max.data());
}

void Backend::cross_entropy_sum_exp(ConstFloatView logits, ConstFloatView row_max, int64_t rows,
                                    int64_t vocab, FloatView sum_exp) {
  const char* op = "cross_entropy_sum_exp";
  dims(op, {rows, vocab});
  expect(logits, rows * vocab, op, "logits");
  expect(row_max, rows, op, "row_max");
  expect(sum_exp, rows, op, "sum_exp");
  do_cross_entropy_sum_exp(logits.data(), row_max.data(), rows, vocab, sum_exp.data());
}

void Backend::cross_entropy_target_logit(ConstFloatView logits, ConstIndexView targets,
                                         int64_t rows, int64_t vocab, int64_t vocab_start,
                                         FloatView target_logit) {
  const char* op = "cross_entropy_target_logit";
  dims(op, {rows, vocab, vocab_start});
  expect(logits, rows * vocab, op, "logits");
  expect(targets, rows, op, "targets");
  expect(target_logit, rows, op, "target_logit");
  do_cross_entropy_target_logit(logits.data(), targets.data(), rows, vocab, vocab_start,
                                target_logit.data());
}

void Backend::cross_entropy_loss(ConstFloatView row_max, ConstFloatView sum_exp,
                                 ConstFloatView target_logit, FloatView loss) {
  const char* op = "cross_entropy_loss";
  const int64_t rows = loss.size();
  expect(row_max, rows, op, "row_max");
  expect(sum_exp, rows, op, "sum_exp");
  expect(target_logit, rows, op, "target_logit");
  if (rows > 0) {
    do_cross_entropy_loss(row_max.data(), sum_exp.data(), target_logit.data(), rows, loss.data());
  }
}

void Backend::cross_entropy_forward(ConstFloatView logits, ConstIndexView targets, int64_t rows,
                                    int64_t vocab, FloatView loss, FloatView row_max,
                                    FloatView sum_exp) {
  const char* op = "cross_entropy_forward";
  dims(op, {rows, vocab});
  expect(logits, rows * vocab, op, "logits");
  expect(targets, rows, op, "targets");
  expect(loss, rows, op, "loss");
  expect(row_max, rows, op, "row_max");
  expect(sum_exp, rows, op, "sum_exp");
  do_cross_entropy_forward(logits.data(), targets.data(), rows, vocab, loss.data(), row_max.data(),
                           sum_exp.data());
}

void Backend::cross_entropy_backward(ConstFloatView logits, ConstIndexView targets,
                                     ConstFloatView row_max, ConstFloatView sum_exp,
                                     ConstFloatView dloss, int64_t rows, int64_t vocab,
                                     int64_t vocab_start, FloatView dlogits) {
  const char* op = "cross_entropy_backward";
  dims(op, {rows, vocab, vocab_start});
  expect(logits, rows * vocab, op, "logits");
  expect(targets, rows, op, "targets");
  expect(row_max, rows, op, "row_max");
  expect(sum_exp, rows, op, "sum_exp");
  expect(dloss, rows, op, "dloss");
  expect(dlogits, rows * vocab, op, "dlogits");
  do_cross_entropy_backward(logits.data(), targets.data(), row_max.data(), sum_exp.data(),
                            dloss.data(), rows, vocab, vocab_start, dlogits.data());
}

MaskedLossSum Backend::masked_loss_sum(ConstFloatView loss, ConstFloatView loss_mask) {
  expect(loss_mask, loss.size(), "masked_loss_sum", "loss_mask");
  if (loss.empty()) return {};
  return do_masked_loss_sum(loss.data(), loss_mask.data(), loss.size());
}

void Backend::masked_loss_grad(ConstFloatView loss_mask, float scale, FloatView dloss) {
  expect(dloss, loss_mask.size(), "masked_loss_grad", "dloss");
  if (dloss.size() > 0) do_masked_loss_grad(loss_mask.data(), dloss.size(), scale, dloss.data());
}

void Backend::row_argmax(ConstFloatView x, int64_t rows, int64_t cols, IndexView out) {
  dims("row_argmax", {rows, cols});
  expect(x, rows * cols, "row_argmax", "x");
  expect(out, rows, "row_argmax", "out");
  if (rows > 0 && cols > 0) do_row_argmax(x.data(), rows, cols, out.data());
}

void Backend::add_bias(FloatView y, ConstFloatView bias, int64_t rows, int64_t cols) {
  dims("add_bias", {rows, cols});
  expect(y, rows * cols, "add_bias", "y");
  expect(bias, cols, "add_bias", "bias");
  do_add_bias(y.data(), bias.data(), rows, cols);
}

void Backend::add(ConstFloatView a, ConstFloatView b, FloatView out) {
  expect(b, a.size(), "add", "b");
  expect(out, a.size(), "add", "out");
  if (a.size() > 0) do_add(a.data(), b.data(), a.size(), out.data());
}

void Backend::accumulate(FloatView y, ConstFloatView x) {
  expect(x, y.size(), "accumulate", "x");
  if (y.size() > 0) do_accumulate(y.data(), x.data(), y.size());
}

void Backend::scale(FloatView x, float factor) {
  if (x.size() > 0) do_scale(x.data(), x.size(), factor);
}

void Backend::adamw_step(FloatView param, ConstFloatView grad, FloatView exp_avg,
                         FloatView exp_avg_sq, const AdamWParams& params, int64_t step) {
  const char* op = "adamw_step";
  expect(grad, param.size(), op, "grad");
  expect(exp_avg, param.size(), op, "exp_avg");
  expect(exp_avg_sq, param.size(), op, "exp_avg_sq");
  if (step < 1) fail(op, "step must be >= 1");
  if (param.size() > 0) {
    do_adamw_step(param.data(), grad.data(), exp_avg.data(), exp_avg_sq.data(), param.size(),
                  params, step);
  }
}

double Backend::sum_of_squares(ConstFloatView x) {
  return x.empty() ? 0.0 : do_sum_of_squares(x.data(), x.size());
}

}  // namespace mgt
