#include "model/ring_attention.hpp"

#include <string>

#include "core/error.hpp"
#include "dist/comm_buffer.hpp"
#include "kernels/copy_range.hpp"

namespace mgt {
namespace {

void check_shape(const AttentionShape& shape, const char* where) {
  if (shape.layout != SeqLayout::kSeqMajor || shape.seq_q != shape.seq_kv || shape.seq_q % 2 != 0)
    throw Error(std::string("ring attention ") + where +
                ": expects sequence-major queries and keys of one even length (two chunks), got " +
                std::to_string(shape.seq_q) + " queries and " + std::to_string(shape.seq_kv) + " keys");
}

}  // namespace

RingAttention::RingAttention(Backend& backend, dist::Communicator& group) : ContextParallelAttention(backend, group) {}

int64_t RingAttention::scratch_elements(const AttentionShape& shape) {
  const int64_t qn = shape.query().elements(), kvn = shape.key_value().elements();
  const int64_t lse = shape.batch * shape.heads * shape.seq_q;
  // Forward: two ring buffers of keys and values, a partial output and its lse. Backward: two
  // travelling gradients, the partial dq and dk/dv, the second half's lse.
  return 2 * 2 * kvn + qn + lse + 2 * 2 * kvn + qn + 2 * kvn + lse / 2;
}

RingAttention::Block RingAttention::block(int step, const AttentionParams& params) const {
  if (!params.causal) return Block::kFull;
  if (step == 0) return Block::kDiagonal;
  const int source = (rank() - step + size()) % size();
  return source < rank() ? Block::kEarlier : Block::kLater;
}

AttentionParams RingAttention::step_params(const AttentionParams& params, const AttentionShape& shape,
                                           int step) const {
  AttentionParams p = params;
  p.causal = block(step, params) == Block::kDiagonal;
  // Each (rank, step) block draws from its own range of the dropout stream; a block's elements
  // number fewer than seq² per (batch, head).
  const int64_t heads = params.dropout_heads > 0 ? params.dropout_heads : shape.heads;
  const auto block_elements = static_cast<uint64_t>(shape.batch * heads * shape.seq_q * shape.seq_kv);
  p.dropout_key.offset += static_cast<uint64_t>(rank() * size() + step) * block_elements;
  return p;
}

void RingAttention::forward(ConstFloatView q, ConstFloatView k, ConstFloatView v, const AttentionShape& shape,
                            const AttentionParams& params, FloatView out, FloatView lse) {
  Backend& be = *backend_;
  const int n = size();
  if (n == 1) {
    be.attention_forward(q, k, v, shape, params, out, lse);
    return;
  }
  check_shape(shape, "forward");
  const int64_t c = shape.seq_q / 2;
  const int64_t qn = q.size(), kvn = k.size();
  const int64_t lse_half = shape.batch * shape.heads * c;
  const int next = (rank() + 1) % n, previous = (rank() - 1 + n) % n;
  const FloatView ring[2] = {scratch(0, 2 * kvn, k.type()), scratch(1, 2 * kvn, k.type())};
  const FloatView part_out = scratch(2, qn, out.type());
  const FloatView part_lse = scratch(3, 2 * lse_half, FloatType::kF32);
  be.copy(k, ring[0].first(kvn));
  be.copy(v, ring[0].subspan(kvn, kvn));
  const HeadTensor whole = shape.query();

  for (int step = 0; step < n; ++step) {
    const FloatView held = ring[step % 2];
    // The next step's keys and values travel while this step attends to the ones in hand.
    dist::PendingCollective passing;
    if (step + 1 < n)
      passing = group_->start_send_recv(dist::backend_buffer(ConstFloatView(held)), next,
                                        dist::backend_buffer(ring[(step + 1) % 2]), previous);
    const ConstFloatView key = held.first(kvn), value = held.subspan(kvn, kvn);
    const AttentionParams p = step_params(params, shape, step);
    switch (block(step, params)) {
      case Block::kDiagonal:
        be.attention_forward(q, key, value, shape, p, out, lse);
        break;
      case Block::kFull:
        if (step == 0) {
          be.attention_forward(q, key, value, shape, p, out, lse);
        } else {
          be.attention_forward(q, key, value, shape, p, part_out, part_lse);
          be.attention_merge(part_out, part_lse, whole, 0, 2 * c, out, lse);
        }
        break;
      case Block::kEarlier: {
        AttentionShape first_half = shape;
        first_half.seq_kv = c;
        be.attention_forward(q, key.first(kvn / 2), value.first(kvn / 2), first_half, p, part_out, part_lse);
        be.attention_merge(part_out, part_lse, whole, 0, 2 * c, out, lse);
        break;
      }
      case Block::kLater: {
        AttentionShape second_half = shape;
        second_half.seq_q = c;
        const FloatView po = part_out.first(qn / 2), pl = part_lse.first(lse_half);
        be.attention_forward(q.subspan(qn / 2, qn / 2), key, value, second_half, p, po, pl);
        be.attention_merge(po, pl, whole, c, c, out, lse);
        break;
      }
    }
    passing.wait();
  }
}

void RingAttention::backward(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView out,
                             ConstFloatView dout, ConstFloatView lse, const AttentionShape& shape,
                             const AttentionParams& params, FloatView dq, FloatView dk, FloatView dv) {
  Backend& be = *backend_;
  const int n = size();
  if (n == 1) {
    be.attention_backward(q, k, v, out, dout, lse, shape, params, dq, dk, dv);
    return;
  }
  check_shape(shape, "backward");
  const int64_t c = shape.seq_q / 2;
  const int64_t qn = q.size(), kvn = k.size();
  const int64_t bh = shape.batch * shape.heads;
  const int next = (rank() + 1) % n, previous = (rank() - 1 + n) % n;
  const FloatView ring[2] = {scratch(0, 2 * kvn, k.type()), scratch(1, 2 * kvn, k.type())};
  const FloatView grads[2] = {scratch(4, 2 * kvn, dk.type()), scratch(5, 2 * kvn, dk.type())};
  const FloatView dq_part = scratch(6, qn, dq.type());
  const FloatView dkv_part = scratch(7, 2 * kvn, dk.type());
  const FloatView lse_second = scratch(8, bh * c, FloatType::kF32);
  be.copy(k, ring[0].first(kvn));
  be.copy(v, ring[0].subspan(kvn, kvn));
  if (params.causal) {
    // The second half's rows of lse [b, heads, 2c], for the blocks only those queries attend.
    std::vector<CopyRange> rows(static_cast<std::size_t>(bh));
    for (int64_t r = 0; r < bh; ++r) rows[static_cast<std::size_t>(r)] = {r * 2 * c + c, r * c, c};
    be.copy_ranges(lse, lse_second, rows);
  }

  // The gradient of the keys and values that arrive for the next step travels while this step
  // computes; it is waited for only where this step's share is added to it.
  dist::PendingCollective grad_passing;
  for (int step = 0; step < n; ++step) {
    const FloatView held = ring[step % 2];
    // The gradient of the keys and values in hand, as far as the ranks before this one took it.
    const FloatView grad = grads[step % 2];
    dist::PendingCollective passing;
    if (step + 1 < n)
      passing = group_->start_send_recv(dist::backend_buffer(ConstFloatView(held)), next,
                                        dist::backend_buffer(ring[(step + 1) % 2]), previous);
    const ConstFloatView key = held.first(kvn), value = held.subspan(kvn, kvn);
    const AttentionParams p = step_params(params, shape, step);
    const Block b = block(step, params);
    if (step == 0) {
      // This rank's own block starts dq and its keys' and values' gradient.
      be.attention_backward(q, key, value, out, dout, lse, shape, p, dq, grad.first(kvn), grad.subspan(kvn, kvn));
    } else if (b == Block::kFull) {
      be.attention_backward(q, key, value, out, dout, lse, shape, p, dq_part, dkv_part.first(kvn),
                            dkv_part.subspan(kvn, kvn));
      be.accumulate(dq, dq_part);
      grad_passing.wait();
      be.accumulate(grad, dkv_part);
    } else if (b == Block::kEarlier) {
      AttentionShape first_half = shape;
      first_half.seq_kv = c;
      const int64_t half = kvn / 2;
      be.attention_backward(q, key.first(half), value.first(half), out, dout, lse, first_half, p, dq_part,
                            dkv_part.first(half), dkv_part.subspan(kvn, half));
      be.accumulate(dq, dq_part);
      grad_passing.wait();
      be.accumulate(grad.first(half), dkv_part.first(half));
      be.accumulate(grad.subspan(kvn, half), dkv_part.subspan(kvn, half));
    } else {
      AttentionShape second_half = shape;
      second_half.seq_q = c;
      const int64_t half = qn / 2;
      be.attention_backward(q.subspan(half, half), key, value, out.subspan(half, half), dout.subspan(half, half),
                            lse_second, second_half, p, dq_part.first(half), dkv_part.first(kvn),
                            dkv_part.subspan(kvn, kvn));
      be.accumulate(dq.subspan(half, half), dq_part.first(half));
      grad_passing.wait();
      be.accumulate(grad, dkv_part);
    }
    passing.wait();
    // The gradient follows its keys and values round the ring; after the last step the one that
    // arrives is this rank's own, complete. (The send of the other buffer, started a step ago,
    // is complete: it was waited for above.)
    grad_passing = group_->start_send_recv(dist::backend_buffer(ConstFloatView(grad)), next,
                                           dist::backend_buffer(grads[(step + 1) % 2]), previous);
  }
  grad_passing.wait();
  const FloatView own = grads[n % 2];
  be.copy(own.first(kvn), dk);
  be.copy(own.subspan(kvn, kvn), dv);
}

}  // namespace mgt
