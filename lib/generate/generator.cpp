#include "generate/generator.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.hpp"
#include "generate/sample_rng.hpp"
#include "model/kv_cache.hpp"

namespace mgt {

std::string_view to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEndOfDocument: return "eod";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: break;
  }
  return "length";
}

namespace {

// log_softmax(row)[token] over the whole (padded) row, as the model's loss sees it.
float log_prob(std::span<const float> row, int64_t token) {
  const float top = *std::max_element(row.begin(), row.end());
  double total = 0.0;
  for (float v : row) total += std::exp(static_cast<double>(v) - top);
  return static_cast<float>(static_cast<double>(row[static_cast<size_t>(token)]) - top - std::log(total));
}

// One sequence being generated.
struct Sequence {
  int64_t prompt_length = 0;
  int64_t end = 0;  // positions [0, end) at most
  bool done = false;
  SampleRng rng;
  SamplingParams sampling;
  Completion completion;
};

// The first stop condition the text now meets: where the completion's text ends, or npos.
size_t stop_position(const std::string& text, const GenerationSettings& s) {
  size_t cut = std::string::npos;
  for (const std::string& stop : s.stop_strings)
    if (!stop.empty()) cut = std::min(cut, text.find(stop));
  if (s.stop_on_eol) cut = std::min(cut, text.find('\n'));
  if (s.stop_on_double_eol) cut = std::min(cut, text.find("\n\n"));
  return cut;
}

}  // namespace

Generator::Generator(GptModel& model, Tokenizer& tokenizer, GenerationSettings settings)
    : model_(&model), tokenizer_(&tokenizer), settings_(std::move(settings)) {
  validate_sampling(settings_.sampling, tokenizer.vocab_size());
  if (settings_.max_new_tokens < 0)
    throw UsageError("--max-new-tokens must be >= 0, got " + std::to_string(settings_.max_new_tokens));
}

int64_t Generator::max_sequence_length() const { return model_->config().max_position_embeddings; }

std::vector<Completion> Generator::generate(std::span<const std::string> prompts, int64_t first_index) {
  const auto b = static_cast<int64_t>(prompts.size());
  if (b == 0) return {};
  const int64_t limit = max_sequence_length();
  const int64_t vocab = model_->config().padded_vocab_size;
  const int64_t true_vocab = tokenizer_->vocab_size();
  const TokenId eod = tokenizer_->eod();

  std::vector<Sequence> seqs;
  seqs.reserve(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    Sequence s{0, 0, false, SampleRng(settings_.seed, static_cast<uint64_t>(first_index + i)), settings_.sampling, {}};
    std::vector<TokenId>& ids = s.completion.prompt_tokens;
    if (settings_.add_bos) ids.push_back(eod);
    if (!prompts[static_cast<size_t>(i)].empty()) tokenizer_->tokenize(prompts[static_cast<size_t>(i)], ids);
    const std::string which = "prompt " + std::to_string(first_index + i + 1);
    if (ids.empty()) throw Error(which + " is empty; pass --add-bos to generate from the end-of-document token alone");
    s.prompt_length = static_cast<int64_t>(ids.size());
    if (s.prompt_length >= limit)
      throw Error(which + " has " + std::to_string(s.prompt_length) + " tokens; the model's " + std::to_string(limit) +
                  " positions leave no room to generate");
    s.end = std::min(limit, s.prompt_length + settings_.max_new_tokens);
    s.done = s.end == s.prompt_length;
    seqs.push_back(std::move(s));
  }
  int64_t total = 0;
  int64_t shortest = limit;
  for (const Sequence& s : seqs) {
    total = std::max(total, s.end);
    shortest = std::min(shortest, s.prompt_length);
  }

  // [b, total], right-padded with end-of-document like Megatron's tokenize_prompts.
  std::vector<int64_t> tokens(static_cast<size_t>(b * total), eod);
  for (int64_t i = 0; i < b; ++i)
    std::copy(seqs[static_cast<size_t>(i)].completion.prompt_tokens.begin(),
              seqs[static_cast<size_t>(i)].completion.prompt_tokens.end(), tokens.begin() + i * total);

  const bool watch_text =
      settings_.stop_on_eol || settings_.stop_on_double_eol ||
      std::any_of(settings_.stop_strings.begin(), settings_.stop_strings.end(), [](const std::string& t) { return !t.empty(); });
  KvCache cache(model_->backend(), model_->config(), b, total);
  std::vector<int64_t> chunk;
  std::vector<float> row;
  int64_t previous = 0;
  for (int64_t position = shortest; position < total; ++position) {
    if (std::all_of(seqs.begin(), seqs.end(), [](const Sequence& s) { return s.done; })) break;
    const int64_t n = position - previous;
    chunk.clear();
    for (int64_t i = 0; i < b; ++i)
      chunk.insert(chunk.end(), tokens.begin() + i * total + previous, tokens.begin() + i * total + position);
    const std::vector<float> logits = model_->forward_cached(chunk, n, cache);  // of position − 1
    previous = position;

    for (int64_t i = 0; i < b; ++i) {
      Sequence& s = seqs[static_cast<size_t>(i)];
      if (s.done || position < s.prompt_length) continue;
      const std::span<const float> padded(logits.data() + i * vocab, static_cast<size_t>(vocab));
      row.assign(padded.begin(), padded.begin() + true_vocab);
      const int64_t token = sample_token(row, s.sampling, s.rng);
      tokens[static_cast<size_t>(i * total + position)] = token;
      if (s.sampling.top_p_decay > 0.0)
        s.sampling.top_p = std::max(s.sampling.top_p * s.sampling.top_p_decay, s.sampling.top_p_bound);

      Completion& c = s.completion;
      if (token == eod) {
        s.done = true;
        c.finish_reason = FinishReason::kEndOfDocument;
        continue;
      }
      c.tokens.push_back(static_cast<TokenId>(token));
      if (settings_.return_log_probs) c.log_probs.push_back(log_prob(padded, token));
      // The text is needed on every token only to look for a stop; otherwise once, at the end.
      if (watch_text) {
        c.text = tokenizer_->detokenize(c.tokens);
        if (const size_t cut = stop_position(c.text, settings_); cut != std::string::npos) {
          c.text.resize(cut);
          s.done = true;
          c.finish_reason = FinishReason::kStop;
          continue;
        }
      }
      if (position + 1 >= s.end) {
        s.done = true;
        c.finish_reason = FinishReason::kLength;
      }
    }
  }

  std::vector<Completion> out;
  out.reserve(static_cast<size_t>(b));
  for (Sequence& s : seqs) {
    if (s.completion.finish_reason != FinishReason::kStop)
      s.completion.text = tokenizer_->detokenize(s.completion.tokens);
    out.push_back(std::move(s.completion));
  }
  return out;
}

}  // namespace mgt
