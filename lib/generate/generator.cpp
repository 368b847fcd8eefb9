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
  SamplingParams sampling;  // top_p decays as tokens are generated
  const GenerationSettings* settings = nullptr;
  Completion completion;
  bool watch_text = false;  // a stop condition looks at the text
};

// A row's prompt cannot be generated from; the message continues "prompt N".
struct RowError : Error {
  RowError(int64_t row_index, const std::string& rest) : Error(rest), row(row_index) {}
  int64_t row;
};

bool watches_text(const GenerationSettings& s) {
  return s.stop_on_eol || s.stop_on_double_eol ||
         std::any_of(s.stop_strings.begin(), s.stop_strings.end(), [](const std::string& t) { return !t.empty(); });
}

// The first id of a text's tokens, or -1 when it has none (or the tokenizer cannot write the
// text, as the null tokenizer cannot write ":").
int64_t first_token(Tokenizer& tokenizer, const std::string& text) {
  std::vector<TokenId> ids;
  try {
    tokenizer.tokenize(text, ids);
  } catch (const Error&) {
    return -1;
  }
  return ids.empty() ? -1 : ids.front();
}

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

void validate_generation_settings(const GenerationSettings& settings, int64_t vocab_size) {
  validate_sampling(settings.sampling, vocab_size);
  if (settings.max_new_tokens < 0)
    throw UsageError("--max-new-tokens must be >= 0, got " + std::to_string(settings.max_new_tokens));
}

Generator::Generator(GptModel& model, Tokenizer& tokenizer, GenerationSettings settings, int64_t max_sequence_length)
    : model_(&model), tokenizer_(&tokenizer), settings_(std::move(settings)) {
  const int64_t positions = model.config().max_position_embeddings;
  max_sequence_length_ = max_sequence_length > 0 ? std::min(max_sequence_length, positions) : positions;
  validate_generation_settings(settings_, tokenizer.vocab_size());
}

std::vector<float> Generator::prompt_log_probs(std::span<const TokenId> prompt) const {
  const auto n = static_cast<int64_t>(prompt.size());
  if (n < 2) return {};
  // The forward pass's per-token cross-entropy against the next token is −log_softmax over the
  // padded vocabulary, as Megatron's log_softmax of the logits gives it.
  std::vector<int64_t> tokens(prompt.begin(), prompt.end());
  std::vector<int64_t> labels(tokens.begin() + 1, tokens.end());
  labels.push_back(tokenizer_->eod());  // the last position's loss is not used
  MicroBatch batch;
  batch.batch_size = 1;
  batch.seq_length = n;
  batch.tokens = tokens;
  batch.labels = labels;
  const ForwardOutput output = model_->forward_only(batch);
  std::vector<float> out(static_cast<size_t>(n - 1));
  for (int64_t t = 0; t + 1 < n; ++t) out[static_cast<size_t>(t)] = -output.losses[static_cast<size_t>(t)];
  return out;
}

std::vector<TokenId> Generator::prompt_tokens(const std::string& prompt, bool add_bos) const {
  std::vector<TokenId> ids;
  if (add_bos) ids.push_back(tokenizer_->eod());
  if (!prompt.empty()) tokenizer_->tokenize(prompt, ids);
  const int64_t vocab = model_->config().padded_vocab_size;
  for (const TokenId id : ids)
    if (id < 0 || id >= vocab)
      throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary (ids 0 to " +
                  std::to_string(vocab - 1) + ")");
  return ids;
}

std::vector<Completion> Generator::generate(std::span<const std::string> prompts, int64_t first_index) {
  std::vector<GenerationRow> rows;
  rows.reserve(prompts.size());
  auto name = [first_index](size_t i) { return "prompt " + std::to_string(first_index + static_cast<int64_t>(i) + 1); };
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRow row{{}, &settings_, settings_.seed, static_cast<uint64_t>(first_index) + i};
    try {
      row.prompt_tokens = prompt_tokens(prompts[i], settings_.add_bos);
    } catch (const Error& e) {
      throw PromptError(i, name(i) + ": " + e.what());
    }
    if (row.prompt_tokens.empty())
      throw PromptError(i, name(i) + " is empty; pass --add-bos to generate from the end-of-document token alone");
    rows.push_back(std::move(row));
  }
  try {
    return generate_rows(rows);
  } catch (const RowError& e) {
    throw PromptError(static_cast<size_t>(e.row), name(static_cast<size_t>(e.row)) + e.what());
  }
}

KvCache& Generator::cache_for(int64_t batch, int64_t capacity) {
  if (cache_ && cache_->batch() == batch && cache_->capacity() == capacity) {
    cache_->clear();
  } else {
    cache_.reset();  // its memory goes before the new one's is taken
    cache_ = std::make_unique<KvCache>(model_->backend(), model_->config(), batch, capacity);
  }
  return *cache_;
}

std::vector<Completion> Generator::generate_rows(std::span<const GenerationRow> rows) {
  const auto b = static_cast<int64_t>(rows.size());
  if (b == 0) return {};
  const int64_t limit = max_sequence_length();
  const int64_t vocab = model_->config().padded_vocab_size;
  const int64_t true_vocab = tokenizer_->vocab_size();
  const TokenId eod = tokenizer_->eod();

  std::vector<Sequence> seqs;
  seqs.reserve(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    const GenerationRow& row = rows[static_cast<size_t>(i)];
    Sequence s{0, 0, false, SampleRng(row.seed, row.stream), row.settings->sampling, row.settings, {},
               watches_text(*row.settings)};
    s.completion.prompt_tokens = row.prompt_tokens;
    if (row.prompt_tokens.empty()) throw RowError(i, " is empty");
    s.prompt_length = static_cast<int64_t>(row.prompt_tokens.size());
    // A prompt may fill every position only when nothing is to be generated (scoring it).
    if (s.prompt_length > limit || (s.prompt_length == limit && row.settings->max_new_tokens > 0))
      throw RowError(i, " has " + std::to_string(s.prompt_length) + " tokens; the " + std::to_string(limit) +
                            " positions of a sequence (max_position_embeddings, or --seq-length) leave no room "
                            "to generate");
    s.end = std::min(limit, s.prompt_length + row.settings->max_new_tokens);
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

  // Megatron bans the first token of "\n" after the first token of ":" (tokenizer.tokenize(':')[0]).
  int64_t colon = -1;
  int64_t newline = -1;
  if (std::any_of(seqs.begin(), seqs.end(), [](const Sequence& s) { return s.settings->prevent_newline_after_colon; })) {
    colon = first_token(*tokenizer_, ":");
    newline = first_token(*tokenizer_, "\n");
  }
  // Where every row picks greedily from the logits alone, the pick happens where the logits are
  // and only the tokens come back.
  const bool greedy_on_device = std::all_of(seqs.begin(), seqs.end(), [](const Sequence& s) {
    return s.sampling.greedy() && !s.settings->return_log_probs && !s.settings->prevent_newline_after_colon;
  });
  KvCache& cache = cache_for(b, total);
  std::vector<int64_t> chunk;
  std::vector<float> logits;
  std::vector<int64_t> picked;
  std::vector<float> row;
  int64_t previous = 0;
  for (int64_t position = shortest; position < total; ++position) {
    if (std::all_of(seqs.begin(), seqs.end(), [](const Sequence& s) { return s.done; })) break;
    const int64_t n = position - previous;
    chunk.clear();
    for (int64_t i = 0; i < b; ++i)
      chunk.insert(chunk.end(), tokens.begin() + i * total + previous, tokens.begin() + i * total + position);
    // Of position − 1. The prompts' step brings its logits back whatever the sampling, so that a
    // model whose logits are not finite is caught (a greedy pick among NaNs is id 0, silently).
    const bool pick_on_device = greedy_on_device && position > shortest;
    if (pick_on_device) picked = model_->forward_cached_greedy(chunk, n, cache, true_vocab);
    else logits = model_->forward_cached(chunk, n, cache);
    previous = position;

    for (int64_t i = 0; i < b; ++i) {
      Sequence& s = seqs[static_cast<size_t>(i)];
      if (s.done || position < s.prompt_length) continue;
      int64_t token = 0;
      std::span<const float> padded;
      if (pick_on_device) {
        token = picked[static_cast<size_t>(i)];
      } else {
        padded = std::span<const float>(logits.data() + i * vocab, static_cast<size_t>(vocab));
        row.assign(padded.begin(), padded.begin() + true_vocab);
        // Checked on the prompts' step only: a diverged model's logits are NaN from the first, and
        // a scan of the vocabulary at every sampled step would cost each step its time.
        if (position == shortest && !std::all_of(row.begin(), row.end(), [](float v) { return std::isfinite(v); }))
          throw RowError(i, ": the model's logits are NaN or infinite: its weights overflow (the run that saved "
                            "them diverged)");
        if (s.settings->prevent_newline_after_colon && colon >= 0 && newline >= 0 && newline < true_vocab &&
            tokens[static_cast<size_t>(i * total + position - 1)] == colon)
          row[static_cast<size_t>(newline)] = -1e10f;
        token = sample_token(row, s.sampling, s.rng);
      }
      tokens[static_cast<size_t>(i * total + position)] = token;
      if (s.sampling.top_p_decay > 0.0)
        s.sampling.top_p = std::max(s.sampling.top_p * s.sampling.top_p_decay, s.sampling.top_p_bound);

      Completion& c = s.completion;
      if (token == eod) {
        s.done = true;
        c.finish_reason = FinishReason::kEndOfDocument;
        if (s.settings->return_log_probs) c.end_of_document_log_prob = log_prob(padded, token);
        continue;
      }
      c.tokens.push_back(static_cast<TokenId>(token));
      if (s.settings->return_log_probs) c.log_probs.push_back(log_prob(padded, token));
      // The text is needed on every token only to look for a stop; otherwise once, at the end.
      if (s.watch_text) {
        c.text = tokenizer_->detokenize(c.tokens);
        if (const size_t cut = stop_position(c.text, *s.settings); cut != std::string::npos) {
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

  for (Sequence& s : seqs)
    if (s.settings->return_prompt_log_probs) s.completion.prompt_log_probs = prompt_log_probs(s.completion.prompt_tokens);

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
