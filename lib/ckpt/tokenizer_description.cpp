#include "ckpt/tokenizer_description.hpp"

#include <optional>

#include "data/python_json.hpp"

namespace mgt {

namespace {

PyValue integer_or_none(const std::optional<std::int64_t>& v) { return v ? PyValue::integer(*v) : PyValue::none(); }

}  // namespace

std::string tokenizer_description_json(const TokenizerOptions& options, const Tokenizer& tokenizer,
                                       std::int64_t padded_vocab_size) {
  PyValue t = PyValue::dict();
  t.set("tokenizer_type", PyValue::string(options.type));
  t.set("class", PyValue::string(tokenizer.class_name()));
  t.set("vocab_file", options.vocab_file.empty() ? PyValue::none() : PyValue::string(options.vocab_file));
  t.set("merge_file", options.merge_file.empty() ? PyValue::none() : PyValue::string(options.merge_file));
  t.set("vocab_size", integer_or_none(options.vocab_size));
  t.set("vocab_extra_ids", PyValue::integer(options.vocab_extra_ids));
  t.set("tokenizer_model", options.tokenizer_model.empty() ? PyValue::none() : PyValue::string(options.tokenizer_model));
  t.set("tiktoken_pattern", options.tiktoken_pattern.empty() ? PyValue::none() : PyValue::string(options.tiktoken_pattern));
  t.set("tiktoken_num_special_tokens", PyValue::integer(options.tiktoken_num_special_tokens));
  if (options.tiktoken_special_tokens) {
    // One space-separated string: the checkpoint's tokenizer record holds scalars only.
    std::string joined;
    for (const std::string& token : *options.tiktoken_special_tokens) joined += (joined.empty() ? "" : " ") + token;
    t.set("tiktoken_special_tokens", PyValue::string(joined));
  }
  t.set("true_vocab_size", PyValue::integer(tokenizer.vocab_size()));
  t.set("padded_vocab_size", PyValue::integer(padded_vocab_size));
  t.set("eod", PyValue::integer(tokenizer.eod()));
  const auto pad = tokenizer.pad();
  t.set("pad", pad ? PyValue::integer(*pad) : PyValue::none());
  return t.dumps();
}

}  // namespace mgt
