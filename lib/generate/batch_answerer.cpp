#include "generate/batch_answerer.hpp"

#include <algorithm>
#include <exception>
#include <optional>

#include "core/error.hpp"
#include "generate/server_response.hpp"

namespace mgt {

namespace {

// A request accepted for generation: its settings and, once generated, its completions.
struct Admitted {
  PendingRequest* pending = nullptr;
  GenerationSettings settings;
  std::vector<Completion> completions;
  std::optional<ServerReply> failure;
};

}  // namespace

BatchAnswerer::BatchAnswerer(Generator& generator, const Tokenizer& tokenizer, uint64_t seed, int64_t max_batch_rows)
    : generator_(&generator), tokenizer_(&tokenizer), seed_(seed), max_batch_rows_(std::max<int64_t>(1, max_batch_rows)) {}

void BatchAnswerer::answer(std::span<PendingRequest> batch) {
  const int64_t positions = generator_->max_sequence_length();
  std::vector<Admitted> admitted;
  admitted.reserve(batch.size());
  std::vector<GenerationRow> rows;
  std::vector<size_t> row_owner;  // index into admitted of each row
  for (PendingRequest& pending : batch) {
    try {
      const ServerRequest& r = pending.request;
      Admitted a{&pending, generation_settings(r, tokenizer_->vocab_size()), {}, {}};
      std::vector<GenerationRow> own;
      int64_t longest = 0;
      for (size_t i = 0; i < r.prompts.size(); ++i) {
        // Streams of requests without a seed never meet: a request has at most 128 prompts.
        const uint64_t seed = r.random_seed ? *r.random_seed : seed_;
        const uint64_t stream = r.random_seed ? i : pending.number * kMaxPromptsPerRequest + i;
        std::vector<TokenId> tokens;
        try {
          tokens = generator_->prompt_tokens(r.prompts[i], r.add_bos);
        } catch (const Error& e) {
          throw BadRequest("prompts[" + std::to_string(i) + "]: " + e.what());
        }
        own.push_back({std::move(tokens), nullptr, seed, stream});
        longest = std::max(longest, static_cast<int64_t>(own.back().prompt_tokens.size()));
      }
      // Megatron's check (generate_tokens_probs_and_return_on_first_stage), with its message;
      // written so that a tokens_to_generate near 2^63 cannot wrap the sum past it.
      if (r.tokens_to_generate > positions - longest)
        throw BadRequest("Length of prompt + tokens_to_generate longer than allowed");
      admitted.push_back(std::move(a));
      for (GenerationRow& row : own) {
        rows.push_back(std::move(row));
        row_owner.push_back(admitted.size() - 1);
      }
    } catch (const Error& e) {  // Megatron's checks, or a prompt the tokenizer refuses
      pending.reply.set_value({400, server_error_json(e.what())});
    } catch (const std::exception& e) {
      pending.reply.set_value({500, server_error_json(e.what())});
    }
  }
  // Settings live in `admitted`, which no longer grows: the rows may point at them now.
  for (size_t k = 0; k < rows.size(); ++k) rows[k].settings = &admitted[row_owner[k]].settings;

  for (size_t start = 0; start < rows.size(); start += static_cast<size_t>(max_batch_rows_)) {
    const size_t end = std::min(rows.size(), start + static_cast<size_t>(max_batch_rows_));
    try {
      std::vector<Completion> done = generator_->generate_rows(std::span<const GenerationRow>(rows).subspan(start, end - start));
      for (size_t k = start; k < end; ++k) admitted[row_owner[k]].completions.push_back(std::move(done[k - start]));
    } catch (const std::exception& e) {
      for (size_t k = start; k < end; ++k)
        if (!admitted[row_owner[k]].failure)
          admitted[row_owner[k]].failure = ServerReply{500, server_error_json(std::string("generation failed: ") + e.what())};
    }
  }

  for (Admitted& a : admitted) {
    if (a.failure) {
      a.pending->reply.set_value(*a.failure);
      continue;
    }
    try {
      std::vector<ServerAnswer> answers;
      answers.reserve(a.completions.size());
      for (const Completion& c : a.completions) answers.push_back(server_answer(c, *tokenizer_, a.settings.return_log_probs));
      a.pending->reply.set_value(
          {200, server_response_json(answers, a.settings.return_log_probs), static_cast<int64_t>(admitted.size())});
    } catch (const std::exception& e) {
      a.pending->reply.set_value({500, server_error_json(e.what())});
    }
  }
}

}  // namespace mgt
