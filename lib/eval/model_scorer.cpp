#include "eval/model_scorer.hpp"

#include <utility>

namespace mgt {

TokenScores GptModelScorer::score(const ScoringBatch& batch) {
  MicroBatch micro;
  micro.batch_size = batch.batch_size;
  micro.seq_length = batch.seq_length;
  micro.tokens = batch.tokens;
  micro.labels = batch.labels;
  micro.loss_mask = batch.scored;  // the output layer runs for these positions only
  // The argmax is over the padded vocabulary, as torch.argmax over Megatron's output: the
  // padding rows of the output layer are weights like any other and could, in principle, win.
  ForwardOutput out = model_.forward_selected(micro, batch.want_argmax);

  TokenScores scores;
  scores.losses = std::move(out.losses);
  scores.argmax = std::move(out.argmax);
  return scores;
}

}  // namespace mgt
