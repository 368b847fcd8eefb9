#include "model/head_scatter_attention.hpp"

#include <string>
#include <vector>

#include "core/error.hpp"

namespace mgt {
namespace {

void check_shape(const AttentionShape& shape, int ranks, const char* where) {
  if (shape.layout != SeqLayout::kSeqMajor || shape.seq_q != shape.seq_kv || shape.seq_q % 2 != 0)
    throw Error(std::string("all-to-all context-parallel attention ") + where +
                ": expects sequence-major queries and keys of one even length (two chunks), got " +
                std::to_string(shape.seq_q) + " queries and " + std::to_string(shape.seq_kv) + " keys");
  const std::string why = HeadScatterAttention::unsupported(shape.heads, shape.groups, ranks);
  if (!why.empty()) throw Error(std::string("all-to-all context-parallel attention ") + where + ": " + why);
}

}  // namespace

HeadScatterAttention::HeadScatterAttention(Backend& backend, dist::Communicator& group)
    : ContextParallelAttention(backend, group) {}

std::string HeadScatterAttention::unsupported(int64_t heads, int64_t groups, int64_t ranks) {
  if (heads % ranks != 0 || groups % ranks != 0)
    return "the attention heads (" + std::to_string(heads) + ") and query groups (" + std::to_string(groups) +
           ") of each tensor-parallel rank must be multiples of the context-parallel size (" +
           std::to_string(ranks) + ")";
  return {};
}

int64_t HeadScatterAttention::scratch_elements(const AttentionShape& shape) {
  const int64_t qn = shape.query().elements(), kvn = shape.key_value().elements();
  // The exchange's two buffers; the whole-sequence q, out, dout, dq and k, v, dk, dv.
  return 2 * qn + 4 * qn + 4 * kvn;
}

const HeadScatterAttention::Orders& HeadScatterAttention::orders(int64_t local_seq, int64_t batch, int64_t heads) {
  const auto key = std::make_tuple(local_seq, batch, heads);
  if (const auto found = orders_.find(key); found != orders_.end()) return found->second;
  const int64_t n = size(), c = local_seq / 2, part = heads / n, rows = local_seq * batch * heads;
  // Row (t, b, h) of a local tensor; row (j, t, b, h') of the exchange's [N, 2c, b, heads/N];
  // row (s, b, h') of the whole sequence.
  const auto local_row = [&](int64_t t, int64_t b, int64_t h) { return (t * batch + b) * heads + h; };
  const auto peer_row = [&](int64_t j, int64_t t, int64_t b, int64_t h) {
    return ((j * local_seq + t) * batch + b) * part + h;
  };
  const auto whole_row = [&](int64_t s, int64_t b, int64_t h) { return (s * batch + b) * part + h; };
  // Where rank j's local token t lies in the sequence (its chunks j and 2N−1−j).
  const auto position = [&](int64_t j, int64_t t) { return t < c ? j * c + t : (2 * n - 1 - j) * c + (t - c); };
  std::vector<int64_t> to_peers(rows), to_sequence(rows), from_sequence(rows), from_peers(rows);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t t = 0; t < local_seq; ++t)
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < part; ++h) {
          const int64_t peer = peer_row(j, t, b, h), whole = whole_row(position(j, t), b, h);
          to_peers[peer] = local_row(t, b, j * part + h);        // my heads' slice j, to rank j
          to_sequence[whole] = peer;                             // rank j's token t, in order
          from_sequence[peer] = whole;                           // back to rank j's tokens
          from_peers[local_row(t, b, j * part + h)] = peer;      // slice j, from rank j
        }
  Orders o;
  const auto upload = [&](const std::vector<int64_t>& host, DeviceIndexBuffer& device) {
    device = DeviceIndexBuffer(*backend_, rows);
    backend_->copy_from_host<int64_t>(host, device.view());
  };
  upload(to_peers, o.to_peers);
  upload(to_sequence, o.to_sequence);
  upload(from_sequence, o.from_sequence);
  upload(from_peers, o.from_peers);
  return orders_.emplace(key, std::move(o)).first->second;
}

void HeadScatterAttention::exchange(ConstFloatView in, ConstIndexView before, ConstIndexView after, int64_t head_dim,
                                    FloatView out) {
  const int64_t n = in.size(), rows = n / head_dim;
  const FloatView send = scratch(0, n, in.type()), received = scratch(1, n, in.type());
  backend_->gather_rows(in, rows, head_dim, before, {}, send);
  const std::vector<int64_t> counts(static_cast<size_t>(size()), n / size());
  group_->all_to_all(ConstFloatView(send), counts, received, counts);
  backend_->gather_rows(received, rows, head_dim, after, {}, out);
}

void HeadScatterAttention::gather_sequence(ConstFloatView x, int64_t local_seq, int64_t batch, int64_t heads,
                                           int64_t head_dim, FloatView whole) {
  const Orders& o = orders(local_seq, batch, heads);
  exchange(x, o.to_peers.view(), o.to_sequence.view(), head_dim, whole);
}

void HeadScatterAttention::scatter_sequence(ConstFloatView whole, int64_t local_seq, int64_t batch, int64_t heads,
                                            int64_t head_dim, FloatView x) {
  const Orders& o = orders(local_seq, batch, heads);
  exchange(whole, o.from_sequence.view(), o.from_peers.view(), head_dim, x);
}

AttentionShape HeadScatterAttention::whole_shape(const AttentionShape& shape) const {
  AttentionShape whole = shape;
  whole.seq_q = whole.seq_kv = shape.seq_q * size();
  whole.heads = shape.heads / size();
  whole.groups = shape.groups / size();
  return whole;
}

AttentionParams HeadScatterAttention::whole_params(const AttentionParams& params, const AttentionShape& shape) const {
  AttentionParams p = params;
  // This rank's heads are the slice `rank` of the call's (already a tensor-parallel slice).
  if (p.dropout_heads == 0) p.dropout_heads = shape.heads;
  p.dropout_first_head += rank() * (shape.heads / size());
  return p;
}

void HeadScatterAttention::forward(ConstFloatView q, ConstFloatView k, ConstFloatView v, const AttentionShape& shape,
                                   const AttentionParams& params, FloatView out, FloatView lse) {
  if (size() == 1) {
    backend_->attention_forward(q, k, v, shape, params, out, lse);
    return;
  }
  check_shape(shape, size(), "forward");
  const int64_t L = shape.seq_q, b = shape.batch, d = shape.head_dim;
  const FloatView wq = scratch(2, q.size(), q.type()), wk = scratch(3, k.size(), k.type());
  const FloatView wv = scratch(4, v.size(), v.type()), wo = scratch(5, out.size(), out.type());
  gather_sequence(q, L, b, shape.heads, d, wq);
  gather_sequence(k, L, b, shape.groups, d, wk);
  gather_sequence(v, L, b, shape.groups, d, wv);
  backend_->attention_forward(wq, wk, wv, whole_shape(shape), whole_params(params, shape), wo, lse);
  scatter_sequence(wo, L, b, shape.heads, d, out);
}

void HeadScatterAttention::backward(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView out,
                                    ConstFloatView dout, ConstFloatView lse, const AttentionShape& shape,
                                    const AttentionParams& params, FloatView dq, FloatView dk, FloatView dv) {
  if (size() == 1) {
    backend_->attention_backward(q, k, v, out, dout, lse, shape, params, dq, dk, dv);
    return;
  }
  check_shape(shape, size(), "backward");
  const int64_t L = shape.seq_q, b = shape.batch, d = shape.head_dim;
  const FloatView wq = scratch(2, q.size(), q.type()), wk = scratch(3, k.size(), k.type());
  const FloatView wv = scratch(4, v.size(), v.type()), wo = scratch(5, out.size(), out.type());
  const FloatView wdo = scratch(6, dout.size(), dout.type()), wdq = scratch(7, dq.size(), dq.type());
  const FloatView wdk = scratch(8, dk.size(), dk.type()), wdv = scratch(9, dv.size(), dv.type());
  gather_sequence(q, L, b, shape.heads, d, wq);
  gather_sequence(k, L, b, shape.groups, d, wk);
  gather_sequence(v, L, b, shape.groups, d, wv);
  gather_sequence(out, L, b, shape.heads, d, wo);
  gather_sequence(dout, L, b, shape.heads, d, wdo);
  backend_->attention_backward(wq, wk, wv, wo, wdo, lse, whole_shape(shape), whole_params(params, shape), wdq, wdk,
                               wdv);
  scatter_sequence(wdq, L, b, shape.heads, d, dq);
  scatter_sequence(wdk, L, b, shape.groups, d, dk);
  scatter_sequence(wdv, L, b, shape.groups, d, dv);
}

}  // namespace mgt
